/* test_module_abi.h: the second table of the crypto module's test build,
 * tests/crypto/percore-crypto-test.so. That build is the production module's objects (the same
 * percore_crypto_v1 table, built from the same sources) plus tests/crypto/test_entries.cpp, which
 * exports a second symbol:
 *
 *     const struct percore_crypto_test_v1* percore_crypto_test_v1_get(void);
 *
 * Who uses it: the crypto tests only (tests/crypto/crypto_test_support.hpp opens it). The server
 * never sees it, and the production module (crypto/percore-crypto.so) holds none of it:
 * tests/crypto/check_linkage.sh checks that the production module exports nothing but
 * percore_crypto_v1_get and contains none of these functions.
 *
 * Ownership and threads are as in crypto/module_abi.h: every handle passed in here must come from
 * the percore_crypto_v1 table of the same test module (the structures are private to each loaded
 * module); a connection from test_tls_client_new is released with that table's tls_conn_free.
 */
#ifndef PERCORE_TESTS_CRYPTO_TEST_MODULE_ABI_H
#define PERCORE_TESTS_CRYPTO_TEST_MODULE_ABI_H

#include "crypto/module_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PERCORE_CRYPTO_TEST_ABI_VERSION 1u
#define PERCORE_CRYPTO_TEST_ENTRY_SYMBOL "percore_crypto_test_v1_get"

/* How test_tls_client_new makes its client. Zero / NULL fields take defaults. */
struct percore_tls_client_options {
    const char* ca_file;          /* verify the server's chain against these PEM certificates */
    const char* server_name;      /* SNI, and the name the certificate must hold when ca_file is set */
    int min_version, max_version; /* 0x0302 = TLS 1.1, 0x0303 = TLS 1.2, 0x0304 = TLS 1.3 */
    const char* alpn;             /* comma-separated protocols to offer; NULL: no ALPN */
    const char* cipher_list;      /* OpenSSL cipher string for TLS 1.2 and older */
    int override_security_level;  /* 1: use security_level (0..5) instead of the default */
    int security_level;
    const uint8_t* session;       /* a session from test_tls_conn_session(), to resume */
    size_t session_len;
};

struct percore_crypto_test_v1 {
    uint32_t abi_version;   /* PERCORE_CRYPTO_TEST_ABI_VERSION */
    uint32_t struct_size;   /* sizeof(struct percore_crypto_test_v1) as the module was built */

    /* The bare AEAD with an explicit key and nonce, for known-answer tests: out = ciphertext ||
     * tag (len + 16 bytes). test_aead_open takes that and returns the plaintext. */
    int (*test_aead_seal)(int suite, const uint8_t key[32], const uint8_t nonce[12],
                          const void* aad, size_t aad_len, const void* in, size_t len,
                          void* out, size_t out_cap, size_t* out_len);
    int (*test_aead_open)(int suite, const uint8_t key[32], const uint8_t nonce[12],
                          const void* aad, size_t aad_len, const void* in, size_t len,
                          void* out, size_t out_cap, size_t* out_len);
    /* seal() with a given nonce, to pin the sealed form. */
    int (*test_seal_with_nonce)(const percore_seal_key* key, const uint8_t nonce[12],
                                const void* aad, size_t aad_len, const void* plain, size_t len,
                                void* out, size_t out_cap, size_t* out_len);
    /* The client side of a connection (same percore_tls_conn functions), so tests can drive both
     * ends of a handshake without linking OpenSSL themselves. */
    percore_tls_conn* (*test_tls_client_new)(int fd, const struct percore_tls_client_options* options,
                                             char* err, size_t err_len);
    /* A client's resumable session, serialized (DER); -1 when it has none yet (TLS 1.3 tickets
     * arrive after the handshake, with the first read). *len = bytes needed when cap is short. */
    int (*test_tls_conn_session)(const percore_tls_conn* conn, void* out, size_t cap, size_t* len);
    /* Rotates the ticket keys now, as if a period had passed. */
    void (*test_tls_server_rotate_ticket_keys)(percore_tls_server* server);
};

const struct percore_crypto_test_v1* percore_crypto_test_v1_get(void);
typedef const struct percore_crypto_test_v1* (*percore_crypto_test_v1_get_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* PERCORE_TESTS_CRYPTO_TEST_MODULE_ABI_H */
