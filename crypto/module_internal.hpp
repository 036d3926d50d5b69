// module_internal: what the crypto module's source files share. Only the module's sources include
// this (and OpenSSL); the server sees module_abi.h alone.
//
// Most functions here implement one entry of struct percore_crypto_v1 (module_abi.h says what each
// does, who owns what and which thread may call it); module.cpp puts them into the table. The
// "building blocks" below are what the test build of the module (tests/crypto/test_entries.cpp)
// adds its test-only entries on top of; the production module contains no test-only code.
//
// Thread: every function may be called from any thread (the handle rules are module_abi.h's).
// Nothing here aborts, throws or prints: the module answers with statuses, as the C ABI promises.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "crypto/module_abi.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX, declared here so this header needs no OpenSSL header

namespace percore::crypto::module {

// Writes one line into the caller's error buffer (truncated to fit, always terminated).
void set_error(char* err, std::size_t err_len, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

// The reason of the oldest error in this thread's OpenSSL error queue ("" when empty); clears it.
const char* take_openssl_reason();

// ---- TLS (module_tls.cpp) ----
percore_tls_server* tls_server_new(const char* cert_path, const char* key_path, char* err, std::size_t err_len);
int tls_server_reload(percore_tls_server* server, const char* cert_path, const char* key_path, char* err,
                      std::size_t err_len);
void tls_server_free(percore_tls_server* server);

percore_tls_conn* tls_conn_new(percore_tls_server* server, int fd);
int tls_conn_handshake(percore_tls_conn* conn);
int tls_conn_read(percore_tls_conn* conn, void* buf, std::size_t len, std::size_t* n);
int tls_conn_write(percore_tls_conn* conn, const void* buf, std::size_t len, std::size_t* n);
int tls_conn_writev(percore_tls_conn* conn, const struct iovec* iov, int iovcnt, std::size_t* n);
int tls_conn_shutdown(percore_tls_conn* conn);
void tls_conn_free(percore_tls_conn* conn);
const char* tls_conn_last_error(const percore_tls_conn* conn);
std::size_t tls_conn_pending(const percore_tls_conn* conn);
void tls_conn_info(const percore_tls_conn* conn, percore_tls_info* info);

// ---- TLS client (module_tls_client.cpp) ----
percore_tls_client* tls_client_new(const char* ca_file, char* err, std::size_t err_len);
percore_tls_client* tls_client_new_pem(const char* pem, std::size_t len, char* err, std::size_t err_len);
std::size_t ca_pem_certificates(const char* pem, std::size_t len, char* out, std::size_t out_cap, std::size_t* out_len,
                                char* err, std::size_t err_len);
void tls_client_free(percore_tls_client* client);
percore_tls_conn* tls_client_connect(const percore_tls_client* client, int fd, const char* host, char* err,
                                     std::size_t err_len);

// ---- Sealing (module_seal.cpp) ----
percore_seal_key* seal_key_load(const char* path, char* err, std::size_t err_len);
percore_seal_key* seal_key_from_bytes(const std::uint8_t key[PERCORE_SEAL_KEY_BYTES], char* err, std::size_t err_len);
void seal_key_free(percore_seal_key* key);
const char* seal_suite_name(const percore_seal_key* key);
int seal(const percore_seal_key* key, const void* aad, std::size_t aad_len, const void* plain, std::size_t len,
         void* out, std::size_t out_cap, std::size_t* out_len);
int open(const percore_seal_key* key, const void* aad, std::size_t aad_len, const void* sealed, std::size_t len,
         void* out, std::size_t out_cap, std::size_t* out_len);

// ---- Digests (module_digest.cpp) ----
int digest_sha256(const void* data, std::size_t len, std::uint8_t out[PERCORE_SHA256_BYTES]);
int hmac_sha256(const void* key, std::size_t key_len, const void* data, std::size_t len,
                std::uint8_t out[PERCORE_SHA256_BYTES]);
int hmac_sha256_parts(const void* key, std::size_t key_len, const struct iovec* parts, std::size_t n,
                      std::uint8_t out[PERCORE_SHA256_BYTES]);

// ---- Building blocks (also used by the test build's extra entries) ----

// A connection over `fd` (not owned) from `ctx` (SSL_new takes its own reference), server or client
// side. NULL when out of memory.
percore_tls_conn* make_connection(struct ssl_ctx_st* ctx, int fd, bool server_side);

struct byte_range {
    const unsigned char* data;
    std::size_t size;
};

// One AEAD operation with an explicit 32-byte key and 12-byte nonce. Encrypting writes the 16-byte
// tag to `tag`; decrypting checks it (and wipes `out` on failure). The associated data is the
// concatenation of the `aad` parts. Returns a percore_seal_status.
int aead(bool encrypt, int suite, const unsigned char* key, const unsigned char* nonce,
         std::initializer_list<byte_range> aad, const unsigned char* in, std::size_t len, unsigned char* out,
         unsigned char* tag);

// seal() with the given nonce, or a random one when `nonce` is NULL.
int seal_with(const percore_seal_key* key, const std::uint8_t* nonce, const void* aad, std::size_t aad_len,
              const void* plain, std::size_t len, void* out, std::size_t out_cap, std::size_t* out_len);

}  // namespace percore::crypto::module
