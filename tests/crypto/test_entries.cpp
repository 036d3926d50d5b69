// The test build's extra entries (tests/crypto/test_module_abi.h): linked only into
// tests/crypto/percore-crypto-test.so, beside the production module's own objects, so the
// production module (crypto/percore-crypto.so) carries no test-only code or table fields.
//
// Built on the module's building blocks (crypto/module_internal.hpp, crypto/module_tls_state.hpp).
// Like the rest of the module, nothing here aborts, throws or prints.
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstring>

#include "crypto/module_internal.hpp"
#include "crypto/module_tls_state.hpp"
#include "tests/crypto/test_module_abi.h"

namespace percore::crypto::module {

namespace {

// ---- AEAD and sealing ----------------------------------------------------------------------------

int raw_aead(bool encrypt, int suite, const std::uint8_t key[32], const std::uint8_t nonce[12], const void* aad,
             std::size_t aad_len, const void* in, std::size_t len, void* out, std::size_t out_cap,
             std::size_t* out_len) {
    if (out_len == nullptr) return PERCORE_SEAL_INTERNAL;
    if (suite != PERCORE_SEAL_AES_256_GCM && suite != PERCORE_SEAL_CHACHA20_POLY1305) return PERCORE_SEAL_UNKNOWN_SUITE;
    if (!encrypt && len < PERCORE_SEAL_TAG_BYTES) return PERCORE_SEAL_TRUNCATED;
    std::size_t data_len = encrypt ? len : len - PERCORE_SEAL_TAG_BYTES;
    std::size_t need = encrypt ? len + PERCORE_SEAL_TAG_BYTES : data_len;
    *out_len = need;
    if (out_cap < need || (need > 0 && out == nullptr)) return PERCORE_SEAL_OUTPUT_TOO_SMALL;
    auto* o = static_cast<unsigned char*>(out);
    const auto* i = static_cast<const unsigned char*>(in);
    unsigned char tag[PERCORE_SEAL_TAG_BYTES];
    if (!encrypt) std::memcpy(tag, i + data_len, sizeof tag);
    int status = aead(encrypt, suite, key, nonce, {{static_cast<const unsigned char*>(aad), aad_len}}, i, data_len,
                      o, tag);
    if (status == PERCORE_SEAL_OK && encrypt) std::memcpy(o + data_len, tag, sizeof tag);
    if (status != PERCORE_SEAL_OK) *out_len = 0;
    return status;
}

int aead_seal(int suite, const std::uint8_t key[32], const std::uint8_t nonce[12], const void* aad,
              std::size_t aad_len, const void* in, std::size_t len, void* out, std::size_t out_cap,
              std::size_t* out_len) {
    return raw_aead(true, suite, key, nonce, aad, aad_len, in, len, out, out_cap, out_len);
}

int aead_open(int suite, const std::uint8_t key[32], const std::uint8_t nonce[12], const void* aad,
              std::size_t aad_len, const void* in, std::size_t len, void* out, std::size_t out_cap,
              std::size_t* out_len) {
    return raw_aead(false, suite, key, nonce, aad, aad_len, in, len, out, out_cap, out_len);
}

int seal_with_nonce(const percore_seal_key* key, const std::uint8_t nonce[12], const void* aad, std::size_t aad_len,
                    const void* plain, std::size_t len, void* out, std::size_t out_cap, std::size_t* out_len) {
    if (nonce == nullptr) return PERCORE_SEAL_INTERNAL;
    return seal_with(key, nonce, aad, aad_len, plain, len, out, out_cap, out_len);
}

// ---- TLS client --------------------------------------------------------------------------------

SSL_CTX* client_context(const percore_tls_client_options& o) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == nullptr) return nullptr;
    bool ok = true;
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (o.override_security_level) SSL_CTX_set_security_level(ctx, o.security_level);
    if (o.min_version != 0) ok = ok && SSL_CTX_set_min_proto_version(ctx, o.min_version) == 1;
    if (o.max_version != 0) ok = ok && SSL_CTX_set_max_proto_version(ctx, o.max_version) == 1;
    if (o.cipher_list != nullptr) ok = ok && SSL_CTX_set_cipher_list(ctx, o.cipher_list) == 1;
    if (ok && o.ca_file != nullptr) {
        ok = SSL_CTX_load_verify_locations(ctx, o.ca_file, nullptr) == 1;
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    }
    if (!ok) {
        SSL_CTX_free(ctx);
        return nullptr;
    }
    return ctx;
}

// "a,b" as ALPN's wire form (length-prefixed names); false when a name is empty or too long.
bool set_alpn(SSL* ssl, const char* protocols) {
    unsigned char wire[256];
    std::size_t wire_len = 0;
    for (const char* p = protocols; *p != '\0';) {
        const char* end = std::strchr(p, ',');
        std::size_t len = end != nullptr ? static_cast<std::size_t>(end - p) : std::strlen(p);
        if (len == 0 || len > 255 || wire_len + 1 + len > sizeof wire) return false;
        wire[wire_len++] = static_cast<unsigned char>(len);
        std::memcpy(wire + wire_len, p, len);
        wire_len += len;
        p += len + (end != nullptr ? 1 : 0);
    }
    return SSL_set_alpn_protos(ssl, wire, static_cast<unsigned int>(wire_len)) == 0;
}

bool configure_client(SSL* ssl, const percore_tls_client_options& o) {
    bool ok = o.alpn == nullptr || set_alpn(ssl, o.alpn);
    if (ok && o.server_name != nullptr) {
        ok = SSL_set_tlsext_host_name(ssl, o.server_name) == 1;
        if (ok && o.ca_file != nullptr) ok = SSL_set1_host(ssl, o.server_name) == 1;
    }
    if (ok && o.session != nullptr) {
        const unsigned char* p = o.session;
        SSL_SESSION* session = d2i_SSL_SESSION(nullptr, &p, static_cast<long>(o.session_len));
        ok = session != nullptr && SSL_set_session(ssl, session) == 1;
        SSL_SESSION_free(session);
    }
    return ok;
}

percore_tls_conn* options_client_new(int fd, const percore_tls_client_options* options, char* err, std::size_t err_len) {
    percore_tls_client_options defaults{};
    const percore_tls_client_options& o = options != nullptr ? *options : defaults;
    ERR_clear_error();
    SSL_CTX* ctx = client_context(o);
    percore_tls_conn* conn = ctx != nullptr ? make_connection(ctx, fd, false) : nullptr;
    SSL_CTX_free(ctx);  // the connection holds its own reference
    if (conn == nullptr) {
        set_error(err, err_len, "cannot make a TLS client: %s", take_openssl_reason());
        return nullptr;
    }
    if (!configure_client(conn->ssl, o)) {
        set_error(err, err_len, "cannot set up the TLS client: %s", take_openssl_reason());
        tls_conn_free(conn);
        return nullptr;
    }
    return conn;
}

int tls_conn_session(const percore_tls_conn* conn, void* out, std::size_t cap, std::size_t* len) {
    if (conn == nullptr || len == nullptr) return -1;
    *len = 0;
    SSL_SESSION* session = SSL_get1_session(conn->ssl);
    if (session == nullptr) return -1;
    int result = -1;
    if (SSL_SESSION_is_resumable(session) == 1) {
        int need = i2d_SSL_SESSION(session, nullptr);
        if (need > 0) {
            *len = static_cast<std::size_t>(need);
            if (out != nullptr && cap >= *len) {
                auto* p = static_cast<unsigned char*>(out);
                if (i2d_SSL_SESSION(session, &p) == need) result = 0;
            }
        }
    }
    SSL_SESSION_free(session);
    ERR_clear_error();
    return result;
}

void tls_server_rotate_ticket_keys(percore_tls_server* server) {
    if (server != nullptr) server->tickets.rotate_now();
}

constexpr percore_crypto_test_v1 test_table{
    .abi_version = PERCORE_CRYPTO_TEST_ABI_VERSION,
    .struct_size = sizeof(percore_crypto_test_v1),
    .test_aead_seal = aead_seal,
    .test_aead_open = aead_open,
    .test_seal_with_nonce = seal_with_nonce,
    .test_tls_client_new = options_client_new,
    .test_tls_conn_session = tls_conn_session,
    .test_tls_server_rotate_ticket_keys = tls_server_rotate_ticket_keys,
};

}  // namespace

}  // namespace percore::crypto::module

extern "C" __attribute__((visibility("default"))) const percore_crypto_test_v1* percore_crypto_test_v1_get(void) {
    return &percore::crypto::module::test_table;
}
