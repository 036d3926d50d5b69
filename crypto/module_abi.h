/* module_abi.h: the one interface between percore and its crypto module (percore-crypto.so), which
 * holds everything that needs OpenSSL: HTTPS (TLS 1.2 and 1.3), sealing (authenticated encryption
 * of values) and digests (SHA-256 of app tokens, HMAC-SHA256 signatures of deliveries). Plain C, so
 * the table stays stable whatever either side is compiled with.
 *
 * Why a module: a server that never uses TLS or sealing must not pay for OpenSSL (measured: opening
 * the module adds about 2 MiB of resident memory, the first TLS context another 3.3 MiB, to a
 * server that starts at about 2.4 MiB). The server binary links neither libssl nor libcrypto;
 * crypto/loader.hpp dlopen()s this module the first time TLS or sealing is configured, and reads
 * the table that the module's only exported symbol returns:
 *
 *     const struct percore_crypto_v1* percore_crypto_v1_get(void);
 *
 * Compatibility: abi_version is PERCORE_CRYPTO_ABI_VERSION for this layout. New functions are only
 * ever appended, and struct_size says how many bytes of the table the module fills, so a server
 * accepts a module whose struct_size is at least the size it was compiled with. Changing or removing
 * a field means a new abi_version (and a new symbol, percore_crypto_v2_get). (The table once ended
 * with six test_* entries that no server ever called; they were cut from the end, which an older
 * server notices through struct_size and refuses with a clear error, so abi_version stayed 1.)
 *
 * This table holds only what the server uses. Tests that need more (known-answer AEAD, a pinned
 * nonce, a TLS client, forced ticket rotation) load a separate test build of the module,
 * tests/crypto/percore-crypto-test.so, made from the same objects plus tests/crypto/test_entries.cpp;
 * its second table is described in tests/crypto/test_module_abi.h. The production module neither
 * contains nor exports any of it (tests/crypto/check_linkage.sh checks).
 *
 * Ownership: every handle a *_new or *_load function returns is owned by the caller and released
 * with the matching *_free. A handle's functions may be called from any thread, one thread at a time
 * per handle, unless a function says otherwise. Error texts are written into the caller's buffer
 * (err, err_len), as one line without a newline, truncated to fit. No function throws, aborts or
 * prints; nothing here blocks (sockets are non-blocking) except reading key and certificate files.
 *
 * ----- TLS ----------------------------------------------------------------------------------------
 * A percore_tls_server holds the certificate, key and policy shared by every shard thread:
 * TLS 1.2 and 1.3 only; TLS 1.2 suites ECDHE with AES-GCM or ChaCha20-Poly1305 only (TLS 1.3: its
 * three defaults), in the server's order except that a client that puts ChaCha20-Poly1305 first (one
 * without AES instructions) gets it; groups X25519, P-256, P-384; security level 2 (RSA keys of 2048 bits and more,
 * EC keys of 224 bits and more); no renegotiation, no compression, no 0-RTT; ALPN "http/1.1" chosen
 * when offered, and a client that offers ALPN without "http/1.1" is refused (no_application_protocol
 * alert); a client without ALPN is served. Sessions resume from stateless tickets only (no
 * server-side cache): the ticket keys live in the server object, so every shard can resume every
 * shard's sessions and a reload keeps them; a new key every PERCORE_TLS_TICKET_KEY_SECONDS, the
 * previous one still accepted for decryption as long again, so a ticket lives 1 to 2 periods.
 * Connections release their read and write buffers while idle (SSL_MODE_RELEASE_BUFFERS).
 *
 * A connection (percore_tls_conn) runs over a non-blocking stream socket the caller owns (and
 * closes after tls_conn_free). Its functions return a percore_tls_status:
 *   OK          done (handshake complete, bytes read, all bytes taken, close_notify sent)
 *   WANT_READ   wait until the socket is readable and call the same function again
 *   WANT_WRITE  wait until the socket is writable and call the same function again
 *               (either WANT may come from any function: TLS reads write and writes read)
 *   CLOSED      the peer closed: close_notify, or end of stream without one (an HTTP request is
 *               framed by HTTP, which catches truncation, so a missing close_notify is no error)
 *   ERROR       the connection is dead: tls_conn_last_error() says why; only tls_conn_free (and
 *               closing the socket) remain.
 * Reads return at most one TLS record (16 KiB) per call, so a short read does not mean the socket
 * is drained: with an edge-triggered reactor, read until WANT_READ (tls_conn_pending() tells
 * whether OpenSSL still holds bytes a read can return without the socket).
 * Writes take bytes: *n is how many of the given bytes the connection has taken over; they will be
 * sent whatever the status. On WANT_WRITE (or WANT_READ) the caller keeps the rest and, once the
 * socket is ready, calls again with the rest, or with nothing (tls_conn_writev(conn, NULL, 0, &n))
 * when it has no more, until OK: only then is everything on its way. Small pieces are gathered
 * into records of up to 16 KiB (one send() per record). Writes never raise SIGPIPE (MSG_NOSIGNAL).
 *
 * A percore_tls_client is the client side's trust configuration (deliveries to HTTPS receivers):
 * the system's CA certificates (OpenSSL's default verify paths; Debian: /etc/ssl/certs), one
 * PEM file of CA certificates (the operator's), or CA certificates given as PEM text in memory (a
 * tenant's: tls_client_new_pem, which reads no file); TLS 1.2 and 1.3 with the server's suites and groups above; ALPN
 * "http/1.1" offered; the peer's chain and name always verified (SSL_VERIFY_PEER): a DNS name
 * against the certificate's DNS names (SNI sent), an IP literal (IPv4, or IPv6 without brackets)
 * against its IP addresses (no SNI, as RFC 6066 wants). Immutable once made: any number of
 * threads may make connections from one client at once. A client connection is a
 * percore_tls_conn like a server's, with the same functions and statuses; its handshake fails
 * (ERROR) when verification fails, and tls_conn_last_error() then says why, e.g.
 * "certificate verify failed: hostname mismatch (wanted example.com)".
 *
 * ----- Sealing ------------------------------------------------------------------------------------
 * A seal key is read from a file of 64 hex digits (a 32-byte key; whitespace around them allowed,
 * anything else refused). Two suites, both AEAD with 256-bit keys: AES-256-GCM, used where the CPU
 * has AES instructions (x86 AES-NI + PCLMULQDQ, arm64 AES + PMULL), ChaCha20-Poly1305 elsewhere;
 * the environment variable PERCORE_SEAL_SUITE=aes-256-gcm|chacha20-poly1305 forces one (read
 * when the key is loaded). The suite used to seal is written into the sealed form, and open()
 * accepts both suites on every CPU. Each suite gets its own subkey, derived from the file's key
 * with HKDF-SHA256 (no salt, info "percore-seal-v1 aes-256-gcm" / "percore-seal-v1
 * chacha20-poly1305"), so one key file never drives two algorithms.
 *
 * The sealed form (PERCORE_SEAL_OVERHEAD = 30 bytes more than the plaintext):
 *
 *     0        1        2                        14                    14+n             30+n
 *     +--------+--------+------------------------+---------------------+----------------+
 *     | format | suite  | nonce (12 bytes,       | ciphertext          | tag (16 bytes) |
 *     | 0x01   | 1 or 2 |  random per seal)      | (n bytes = plain)   |                |
 *     +--------+--------+------------------------+---------------------+----------------+
 *     suite 1 = AES-256-GCM, 2 = ChaCha20-Poly1305
 *
 * The AEAD's associated data is the 14 header bytes followed by the caller's associated data (which
 * is not stored: open() needs the same bytes). Changing any byte, cutting any byte, a different key
 * or different associated data makes open() fail; nothing unauthenticated is ever returned (the
 * output is wiped on failure). Random 96-bit nonces: seal at most PERCORE_SEAL_MESSAGES_PER_KEY
 * values with one key (NIST SP 800-38D §8.3), then change the key. A key may also be made from its
 * 32 bytes in memory (seal_key_from_bytes, appended to ABI version 1 like the digests).
 *
 * ----- Digests ------------------------------------------------------------------------------------
 * One-shot SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104; any key length, a key longer than the
 * 64-byte block is hashed first, an empty key is allowed) over one contiguous buffer, written to the
 * caller's 32 bytes (PERCORE_SHA256_BYTES). They return 0, or -1 when an argument is null where bytes
 * are expected (data or key with a length above 0, out) or OpenSSL failed (out of memory); out is
 * then zeroed. No handle and no state: any thread, any number at once. The key is not kept after the
 * call. App tokens are stored as their SHA-256 (a token carries at least 128 random bits, so no
 * salt or stretching is needed) and compared in constant time by the server, without the module;
 * deliveries sign with HMAC-SHA256 (the Standard Webhooks signature). Appended to ABI version 1:
 * a server that calls them needs a module whose struct_size includes them (the loader checks).
 */
#ifndef PERCORE_CRYPTO_MODULE_ABI_H
#define PERCORE_CRYPTO_MODULE_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PERCORE_CRYPTO_ABI_VERSION 1u
#define PERCORE_CRYPTO_ENTRY_SYMBOL "percore_crypto_v1_get"

#define PERCORE_TLS_TICKET_KEY_SECONDS 3600         /* a new ticket key every hour */
#define PERCORE_TLS_RECORD_PLAINTEXT_BYTES 16384    /* the most one record carries */

#define PERCORE_SEAL_KEY_BYTES 32
#define PERCORE_SEAL_NONCE_BYTES 12
#define PERCORE_SEAL_TAG_BYTES 16
#define PERCORE_SEAL_HEADER_BYTES 14                /* format, suite, nonce */
#define PERCORE_SEAL_OVERHEAD 30                    /* header + tag */
#define PERCORE_SEAL_FORMAT_V1 0x01
#define PERCORE_SEAL_MESSAGES_PER_KEY 4294967296ull /* 2^32 random nonces per key */

#define PERCORE_SHA256_BYTES 32                     /* a SHA-256 or HMAC-SHA256 output */

enum percore_tls_status {
    PERCORE_TLS_OK = 0,
    PERCORE_TLS_WANT_READ = 1,
    PERCORE_TLS_WANT_WRITE = 2,
    PERCORE_TLS_CLOSED = 3,
    PERCORE_TLS_ERROR = 4
};

enum percore_seal_suite {
    PERCORE_SEAL_AES_256_GCM = 1,
    PERCORE_SEAL_CHACHA20_POLY1305 = 2
};

enum percore_seal_status {
    PERCORE_SEAL_OK = 0,
    PERCORE_SEAL_OUTPUT_TOO_SMALL = 1,  /* *out_len says how many bytes are needed */
    PERCORE_SEAL_TRUNCATED = 2,         /* shorter than header + tag */
    PERCORE_SEAL_NOT_SEALED = 3,        /* first byte is no known format */
    PERCORE_SEAL_UNKNOWN_SUITE = 4,
    PERCORE_SEAL_AUTH_FAILED = 5,       /* changed, wrong key or wrong associated data */
    PERCORE_SEAL_INTERNAL = 6           /* OpenSSL failed (out of memory, no random bytes) */
};

typedef struct percore_tls_server percore_tls_server;
typedef struct percore_tls_conn percore_tls_conn;
typedef struct percore_tls_client percore_tls_client;
typedef struct percore_seal_key percore_seal_key;

/* What a connection negotiated. Strings are static (valid as long as the module is loaded). */
struct percore_tls_info {
    int handshake_done;
    int resumed;                        /* the session came from a ticket */
    const char* protocol;               /* "TLSv1.3", "TLSv1.2"; "" before the handshake */
    const char* cipher;                 /* OpenSSL's name, e.g. "TLS_AES_256_GCM_SHA384" */
    char alpn[32];                      /* "http/1.1", or "" when none was negotiated */
    int has_peer_certificate;
    uint8_t peer_certificate_sha256[32]; /* the peer's certificate (a client sees the server's) */
};

struct percore_crypto_v1 {
    uint32_t abi_version;   /* PERCORE_CRYPTO_ABI_VERSION */
    uint32_t struct_size;   /* sizeof(struct percore_crypto_v1) as the module was built */
    const char* (*library_version)(void);  /* e.g. "OpenSSL 3.0.19 27 Jan 2026" */

    /* ---- TLS server context: one per listening configuration, shared by all shard threads ---- */
    /* Loads the PEM certificate chain and key. NULL and a reason when a file is missing or
     * unreadable, holds no certificate or key, the key is encrypted, too weak, or does not match. */
    percore_tls_server* (*tls_server_new)(const char* cert_path, const char* key_path,
                                          char* err, size_t err_len);
    /* Replaces certificate and key: connections made after it returns 0 use the new pair;
     * connections made before keep theirs; tickets stay valid. On -1 (the same reasons as
     * tls_server_new) nothing changes. Any thread, concurrently with tls_conn_new on others. */
    int (*tls_server_reload)(percore_tls_server* server, const char* cert_path,
                             const char* key_path, char* err, size_t err_len);
    /* After every connection made from it is freed. */
    void (*tls_server_free)(percore_tls_server* server);

    /* ---- TLS connection (server side) ---- */
    /* Starts the server side over `fd` (a connected non-blocking socket, not owned). Any thread,
     * concurrently with others and with tls_server_reload. NULL only when out of memory. */
    percore_tls_conn* (*tls_conn_new)(percore_tls_server* server, int fd);
    int (*tls_conn_handshake)(percore_tls_conn* conn);
    int (*tls_conn_read)(percore_tls_conn* conn, void* buf, size_t len, size_t* n);
    int (*tls_conn_write)(percore_tls_conn* conn, const void* buf, size_t len, size_t* n);
    int (*tls_conn_writev)(percore_tls_conn* conn, const struct iovec* iov, int iovcnt, size_t* n);
    /* Flushes what writes took, then sends close_notify (OK once it is sent; the peer's is not
     * awaited). OK at once before the handshake finished or after an ERROR (nothing to send). */
    int (*tls_conn_shutdown)(percore_tls_conn* conn);
    void (*tls_conn_free)(percore_tls_conn* conn);
    /* Why the last call returned ERROR (or CLOSED): a short text, "" when none; valid until the
     * connection is freed. */
    const char* (*tls_conn_last_error)(const percore_tls_conn* conn);
    /* Non-zero when a read can return bytes without reading the socket (plaintext, or a record
     * OpenSSL has read ahead): an edge-triggered reader must read again before waiting. */
    size_t (*tls_conn_pending)(const percore_tls_conn* conn);
    void (*tls_conn_info)(const percore_tls_conn* conn, struct percore_tls_info* info);

    /* ---- Sealing ---- */
    /* Reads the key file and picks the suite (CPU, or PERCORE_SEAL_SUITE). A key may be used by
     * any number of threads at once. */
    percore_seal_key* (*seal_key_load)(const char* hex_key_path, char* err, size_t err_len);
    void (*seal_key_free)(percore_seal_key* key);
    const char* (*seal_suite_name)(const percore_seal_key* key);  /* "aes-256-gcm", ... */
    /* out_cap >= len + PERCORE_SEAL_OVERHEAD; out must not overlap the input. Returns a
     * percore_seal_status; *out_len = bytes written (or needed, on OUTPUT_TOO_SMALL). */
    int (*seal)(const percore_seal_key* key, const void* aad, size_t aad_len, const void* plain,
                size_t len, void* out, size_t out_cap, size_t* out_len);
    /* out_cap >= len - PERCORE_SEAL_OVERHEAD. Either suite, whatever this key seals with. */
    int (*open)(const percore_seal_key* key, const void* aad, size_t aad_len, const void* sealed,
                size_t len, void* out, size_t out_cap, size_t* out_len);

    /* ---- Digests (appended; see "Digests" above) ---- */
    /* SHA-256 of len bytes at data (data may be NULL when len is 0). 0, or -1 (out zeroed). */
    int (*digest_sha256)(const void* data, size_t len, uint8_t out[32]);
    /* HMAC-SHA256 of data under key (either may be NULL when its length is 0). 0, or -1. */
    int (*hmac_sha256)(const void* key, size_t key_len, const void* data, size_t len, uint8_t out[32]);

    /* ---- TLS client (appended; see "TLS" above) ---- */
    /* ca_file NULL or "": the system's CA certificates; otherwise that PEM file (read now, not
     * again). NULL and a reason when ca_file is missing, unreadable or holds no certificate. */
    percore_tls_client* (*tls_client_new)(const char* ca_file, char* err, size_t err_len);
    /* After every connection made from it is freed. */
    void (*tls_client_free)(percore_tls_client* client);
    /* Starts the client side over `fd` (a connected or connecting non-blocking socket, not owned)
     * for `host` (a DNS name, or an IP literal; not empty, at most 253 bytes): tls_conn_handshake
     * then runs the client handshake. NULL and a reason when out of memory or `host` cannot be
     * used. Any thread, concurrently with others. */
    percore_tls_conn* (*tls_client_connect)(const percore_tls_client* client, int fd, const char* host,
                                            char* err, size_t err_len);
    /* ---- Sealing with a key held in memory (appended) ---- */
    /* As seal_key_load, from the PERCORE_SEAL_KEY_BYTES key bytes themselves (a delivery's seal
     * key, made by the server and kept in its catalog): the same subkeys, suite choice and sealed
     * form as a key file holding their hex. The bytes are not kept. NULL and a reason when key is
     * NULL, PERCORE_SEAL_SUITE is unknown, or OpenSSL failed. */
    percore_seal_key* (*seal_key_from_bytes)(const uint8_t key[32], char* err, size_t err_len);
    /* ---- Digests over parts (appended) ---- */
    /* As hmac_sha256, of the n parts one after the other (a part with iov_len 0 may have a NULL
     * base): a delivery signs id "." timestamp "." body without copying its body (up to ~1 MiB) to
     * make them one buffer. */
    int (*hmac_sha256_parts)(const void* key, size_t key_len, const struct iovec* parts, size_t n, uint8_t out[32]);
    /* ---- TLS client trusting CA certificates given as text (appended) ---- */
    /* The certificates in the len bytes of PEM text at pem (text between or around the blocks is
     * ignored, as OpenSSL's readers do), written again as PEM alone ("-----BEGIN CERTIFICATE-----",
     * lines of 64 base64 characters, "-----END CERTIFICATE-----", each line ending in "\n") into out
     * (out_cap bytes; out may be NULL when out_cap is 0). Reads no file. Returns the number of
     * certificates (at least 1) with *out_len the bytes written; 0 and a reason when the text holds
     * no certificate, a block is malformed, or out is too small (*out_len then says how many bytes
     * are needed; 0 when the text is unusable). A delivery's ca_pem (SPEC §9) is checked and stored
     * in this form. */
    size_t (*ca_pem_certificates)(const char* pem, size_t len, char* out, size_t out_cap, size_t* out_len,
                                  char* err, size_t err_len);
    /* As tls_client_new, trusting only the certificates in the len bytes of PEM text at pem (held
     * in memory: no file is read, the system's CA certificates are not used). NULL and a reason
     * when the text holds no certificate or a block is malformed, or out of memory. */
    percore_tls_client* (*tls_client_new_pem)(const char* pem, size_t len, char* err, size_t err_len);
};

/* The module's only exported symbol. */
const struct percore_crypto_v1* percore_crypto_v1_get(void);
typedef const struct percore_crypto_v1* (*percore_crypto_v1_get_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* PERCORE_CRYPTO_MODULE_ABI_H */
