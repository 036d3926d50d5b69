// module_internal: what the crypto module's source files share. Only the module's sources include
// this (and OpenSSL); the server sees module_abi.h alone.
//
// Every function here implements one entry of struct percore_crypto_v1 (module_abi.h says what each
// does, who owns what and which thread may call it); module.cpp puts them into the table.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>

#include "crypto/module_abi.h"

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
void tls_server_rotate_ticket_keys(percore_tls_server* server);

percore_tls_conn* tls_conn_new(percore_tls_server* server, int fd);
percore_tls_conn* tls_client_new(int fd, const percore_tls_client_options* options, char* err, std::size_t err_len);
int tls_conn_handshake(percore_tls_conn* conn);
int tls_conn_read(percore_tls_conn* conn, void* buf, std::size_t len, std::size_t* n);
int tls_conn_write(percore_tls_conn* conn, const void* buf, std::size_t len, std::size_t* n);
int tls_conn_writev(percore_tls_conn* conn, const struct iovec* iov, int iovcnt, std::size_t* n);
int tls_conn_shutdown(percore_tls_conn* conn);
void tls_conn_free(percore_tls_conn* conn);
const char* tls_conn_last_error(const percore_tls_conn* conn);
std::size_t tls_conn_pending(const percore_tls_conn* conn);
void tls_conn_info(const percore_tls_conn* conn, percore_tls_info* info);
int tls_conn_session(const percore_tls_conn* conn, void* out, std::size_t cap, std::size_t* len);

// ---- Sealing (module_seal.cpp) ----
percore_seal_key* seal_key_load(const char* path, char* err, std::size_t err_len);
void seal_key_free(percore_seal_key* key);
const char* seal_suite_name(const percore_seal_key* key);
int seal(const percore_seal_key* key, const void* aad, std::size_t aad_len, const void* plain, std::size_t len,
         void* out, std::size_t out_cap, std::size_t* out_len);
int open(const percore_seal_key* key, const void* aad, std::size_t aad_len, const void* sealed, std::size_t len,
         void* out, std::size_t out_cap, std::size_t* out_len);
int seal_with_nonce(const percore_seal_key* key, const std::uint8_t nonce[12], const void* aad, std::size_t aad_len,
                    const void* plain, std::size_t len, void* out, std::size_t out_cap, std::size_t* out_len);
int aead_seal(int suite, const std::uint8_t key[32], const std::uint8_t nonce[12], const void* aad,
              std::size_t aad_len, const void* in, std::size_t len, void* out, std::size_t out_cap,
              std::size_t* out_len);
int aead_open(int suite, const std::uint8_t key[32], const std::uint8_t nonce[12], const void* aad,
              std::size_t aad_len, const void* in, std::size_t len, void* out, std::size_t out_cap,
              std::size_t* out_len);

}  // namespace percore::crypto::module
