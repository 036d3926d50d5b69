// TLS: the server context (policy, certificate, ticket keys) and connections over non-blocking
// sockets, server or client side (the client context is module_tls_client.cpp's). The policy and
// the status contract are in module_abi.h.
//
// Sharing between shard threads: a percore_tls_server holds one SSL_CTX, read under a shared lock
// while a connection is made (SSL_new takes its own reference to the context). A reload builds a
// complete new SSL_CTX outside the lock and swaps it in; connections made before keep the old one
// alive through their reference. The ticket keys do not live in the SSL_CTX but in the server
// object (the ticket callback finds it through the context's app data), so every context of one
// server, on every shard, encrypts and decrypts tickets with the same keys.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <shared_mutex>

#include "crypto/module_tls_state.hpp"

namespace percore::crypto::module {

namespace {

// TLS 1.2: forward-secret key exchange and AEAD ciphers only (ECDSA and RSA certificates).
constexpr const char* tls12_cipher_list =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// TLS 1.3: OpenSSL's defaults, spelled out so a system configuration cannot change them.
constexpr const char* tls13_ciphersuites = "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256";
constexpr const char* key_exchange_groups = "X25519:P-256:P-384";
constexpr int security_level = 2;  // RSA >= 2048 bits, EC >= 224 bits, no SHA-1 signatures
constexpr unsigned char session_id_context[] = {'p', 'e', 'r', 'c', 'o', 'r', 'e'};
constexpr std::size_t record_bytes = PERCORE_TLS_RECORD_PLAINTEXT_BYTES;

}  // namespace

std::int64_t now_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_BOOTTIME, &ts);  // counts suspended time: a ticket key ages while asleep too
    return ts.tv_sec;
}

bool make_ticket_key(ticket_key& key, std::int64_t now) {
    ticket_key fresh;
    if (RAND_bytes(fresh.name, sizeof fresh.name) != 1 || RAND_bytes(fresh.aes, sizeof fresh.aes) != 1 ||
        RAND_bytes(fresh.hmac, sizeof fresh.hmac) != 1) {
        ERR_clear_error();
        OPENSSL_cleanse(&fresh, sizeof fresh);
        return false;
    }
    fresh.created = now;
    fresh.valid = true;
    key = fresh;
    OPENSSL_cleanse(&fresh, sizeof fresh);
    return true;
}

namespace {

int ticket_callback(SSL* ssl, unsigned char* key_name, unsigned char* iv, EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac,
                    int encrypt) {
    auto* server = static_cast<percore_tls_server*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
    if (server == nullptr) return -1;
    ticket_key key;
    int result = 1;
    if (encrypt) {
        if (!server->tickets.for_encryption(key) || RAND_bytes(iv, 16) != 1) return -1;
        std::memcpy(key_name, key.name, sizeof key.name);
    } else {
        result = server->tickets.for_decryption(key_name, key);
        if (result == 0) return 0;  // unknown or expired: a full handshake
        // A TLS 1.3 client spends a ticket when it resumes (RFC 8446 8.1; OpenSSL's client cache
        // drops it): 2 asks OpenSSL for a fresh one, else every other reconnection of the client
        // is a full handshake (measured with wrk: half were; one ECDSA sign and verify each). A
        // TLS 1.2 ticket stays valid: renewed only when its key is the previous one.
        if (SSL_version(ssl) == TLS1_3_VERSION) result = 2;
    }
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key.hmac, sizeof key.hmac),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
        OSSL_PARAM_construct_end(),
    };
    bool ok = EVP_MAC_CTX_set_params(mac, params) == 1 &&
              (encrypt ? EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes, iv)
                       : EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes, iv)) == 1;
    OPENSSL_cleanse(&key, sizeof key);
    return ok ? result : -1;
}

int select_alpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* offered,
                unsigned int offered_len, void*) {
    unsigned char* chosen = nullptr;
    if (SSL_select_next_proto(&chosen, out_len, alpn_http11, sizeof alpn_http11, offered, offered_len) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;  // offered ALPN, but not http/1.1: no_application_protocol
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

struct passphrase_probe {
    bool asked = false;
};

// Never prompt on the terminal for a key's passphrase: remember that one was wanted and fail.
int refuse_passphrase(char*, int, int, void* userdata) {
    if (userdata != nullptr) static_cast<passphrase_probe*>(userdata)->asked = true;
    return 0;
}

// ---- A socket BIO that writes with MSG_NOSIGNAL ----------------------------------------------

int write_nosignal(BIO* bio, const char* data, int len) {
    int fd = -1;
    BIO_get_fd(bio, &fd);
    ssize_t n;
    do n = ::send(fd, data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    BIO_clear_retry_flags(bio);
    if (n <= 0 && BIO_sock_should_retry(static_cast<int>(n))) BIO_set_retry_write(bio);
    return static_cast<int>(n);
}

const BIO_METHOD* socket_method() {
    static BIO_METHOD* method = [] {
        const BIO_METHOD* base = BIO_s_socket();
        BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                     "percore socket");
        if (m == nullptr) return m;
        BIO_meth_set_write(m, write_nosignal);
        BIO_meth_set_read(m, BIO_meth_get_read(base));
        BIO_meth_set_puts(m, BIO_meth_get_puts(base));
        BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(base));
        BIO_meth_set_create(m, BIO_meth_get_create(base));
        BIO_meth_set_destroy(m, BIO_meth_get_destroy(base));
        return m;
    }();
    return method;
}

}  // namespace

// ---- Contexts ----------------------------------------------------------------------------------

bool check_readable(const char* what, const char* path, char* err, std::size_t err_len) {
    if (path == nullptr || *path == '\0') {
        set_error(err, err_len, "no TLS %s file given", what);
        return false;
    }
    int fd;
    do fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        set_error(err, err_len, "cannot read TLS %s %s: %s", what, path, std::strerror(errno));
        return false;
    }
    struct stat st{};
    bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    ::close(fd);
    if (!regular) set_error(err, err_len, "TLS %s %s is not a regular file", what, path);
    return regular;
}

bool apply_shared_policy(SSL_CTX* ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_security_level(ctx, security_level);
    // Release the read and write buffers (16 KiB and more each) whenever they are empty; accept a
    // retried write from another address (a record kept in percore_tls_conn::retry).
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(ctx, 1);  // one recv() takes what is there, not a header and then a body
    return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
           SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1 &&
           SSL_CTX_set_cipher_list(ctx, tls12_cipher_list) == 1 &&
           SSL_CTX_set_ciphersuites(ctx, tls13_ciphersuites) == 1 &&
           SSL_CTX_set1_groups_list(ctx, key_exchange_groups) == 1;
}

namespace {

bool apply_server_policy(SSL_CTX* ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
    SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);  // tickets only: nothing shared to lock
    SSL_CTX_set_timeout(ctx, ticket_key_seconds);             // the lifetime hint of a ticket
    SSL_CTX_set_max_early_data(ctx, 0);
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, nullptr);
    return apply_shared_policy(ctx) &&
           SSL_CTX_set_session_id_context(ctx, session_id_context, sizeof session_id_context) == 1 &&
           SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_callback) == 1;
}

bool load_certificate_and_key(SSL_CTX* ctx, const char* cert_path, const char* key_path, char* err,
                              std::size_t err_len) {
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_path) != 1) {
        unsigned long code = ERR_peek_error();
        const char* reason = take_openssl_reason();
        if (ERR_GET_LIB(code) == ERR_LIB_PEM && ERR_GET_REASON(code) == PEM_R_NO_START_LINE)
            set_error(err, err_len, "TLS certificate %s holds no PEM certificate", cert_path);
        else if (ERR_GET_LIB(code) == ERR_LIB_SSL &&
                 (ERR_GET_REASON(code) == SSL_R_EE_KEY_TOO_SMALL || ERR_GET_REASON(code) == SSL_R_CA_KEY_TOO_SMALL ||
                  ERR_GET_REASON(code) == SSL_R_CA_MD_TOO_WEAK))
            set_error(err, err_len,
                      "TLS certificate %s is too weak (%s): RSA keys need 2048 bits or more, EC keys 224 or more, "
                      "signatures SHA-256 or better",
                      cert_path, reason);
        else
            set_error(err, err_len, "TLS certificate %s: %s", cert_path, reason);
        return false;
    }
    passphrase_probe probe;
    SSL_CTX_set_default_passwd_cb(ctx, refuse_passphrase);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, &probe);
    int loaded = SSL_CTX_use_PrivateKey_file(ctx, key_path, SSL_FILETYPE_PEM);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr);
    if (loaded != 1) {
        unsigned long code = ERR_peek_error();
        const char* reason = take_openssl_reason();
        if (probe.asked)
            set_error(err, err_len, "TLS key %s is encrypted; percore needs it without a passphrase", key_path);
        else if (ERR_GET_LIB(code) == ERR_LIB_X509 &&
                 (ERR_GET_REASON(code) == X509_R_KEY_VALUES_MISMATCH || ERR_GET_REASON(code) == X509_R_KEY_TYPE_MISMATCH))
            set_error(err, err_len, "TLS key %s does not match the certificate %s", key_path, cert_path);
        else if (ERR_GET_REASON(code) == PEM_R_NO_START_LINE || ERR_GET_REASON(code) == SSL_R_NO_PRIVATE_KEY_ASSIGNED ||
                 std::strcmp(reason, "unsupported") == 0 || std::strcmp(reason, "decoder routines") == 0)
            set_error(err, err_len, "TLS key %s holds no PEM private key", key_path);
        else
            set_error(err, err_len, "TLS key %s: %s", key_path, reason);
        return false;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        set_error(err, err_len, "TLS key %s does not match the certificate %s", key_path, cert_path);
        return false;
    }
    return true;
}

SSL_CTX* build_server_context(percore_tls_server* server, const char* cert_path, const char* key_path, char* err,
                              std::size_t err_len) {
    if (!check_readable("certificate", cert_path, err, err_len) || !check_readable("key", key_path, err, err_len))
        return nullptr;
    ERR_clear_error();
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) {
        set_error(err, err_len, "cannot make a TLS context: %s", take_openssl_reason());
        return nullptr;
    }
    SSL_CTX_set_app_data(ctx, server);
    if (!apply_server_policy(ctx)) {
        set_error(err, err_len, "cannot apply the TLS policy: %s", take_openssl_reason());
        SSL_CTX_free(ctx);
        return nullptr;
    }
    if (!load_certificate_and_key(ctx, cert_path, key_path, err, err_len)) {
        SSL_CTX_free(ctx);
        return nullptr;
    }
    return ctx;
}

// A failed verification says why (and, for a name, which one was wanted): "certificate verify
// failed: hostname mismatch (wanted example.com)". The text is allocated only here; when that
// fails, the bare reason stays.
void describe_verify_failure(percore_tls_conn* conn) {
    long verdict = SSL_get_verify_result(conn->ssl);
    if (verdict == X509_V_OK) return;
    X509_VERIFY_PARAM* param = SSL_get0_param(conn->ssl);
    const char* wanted = nullptr;
    char* ip = nullptr;
    if (verdict == X509_V_ERR_HOSTNAME_MISMATCH) wanted = X509_VERIFY_PARAM_get0_host(param, 0);
    else if (verdict == X509_V_ERR_IP_ADDRESS_MISMATCH) wanted = ip = X509_VERIFY_PARAM_get1_ip_asc(param);
    const char* why = X509_verify_cert_error_string(verdict);
    char line[512];  // a host is at most 253 bytes, the reasons are short
    if (wanted != nullptr) std::snprintf(line, sizeof line, "%s: %s (wanted %s)", conn->last_error, why, wanted);
    else std::snprintf(line, sizeof line, "%s: %s", conn->last_error, why);
    if (char* text = ::strdup(line); text != nullptr) {
        std::free(conn->detail);
        conn->detail = text;
        conn->last_error = text;
    }
    OPENSSL_free(ip);
    ERR_clear_error();
}

// After an SSL_* call failed: the status, and the reason kept for tls_conn_last_error().
int failure(percore_tls_conn* conn, int ret, int saved_errno) {
    int status = PERCORE_TLS_ERROR;
    switch (SSL_get_error(conn->ssl, ret)) {
    case SSL_ERROR_WANT_READ:
        status = PERCORE_TLS_WANT_READ;
        break;
    case SSL_ERROR_WANT_WRITE:
        status = PERCORE_TLS_WANT_WRITE;
        break;
    case SSL_ERROR_ZERO_RETURN:
        conn->last_error = "closed by the peer";
        status = PERCORE_TLS_CLOSED;
        break;
    case SSL_ERROR_SYSCALL:
        conn->failed = true;
        if (ERR_peek_error() != 0) {
            conn->last_error = take_openssl_reason();
        } else if (saved_errno != 0) {
            const char* text = strerrordesc_np(saved_errno);
            conn->last_error = text != nullptr ? text : "system error";
        } else {
            conn->last_error = "end of stream";
            status = PERCORE_TLS_CLOSED;
        }
        break;
    case SSL_ERROR_SSL: {
        conn->failed = true;
        unsigned long code = ERR_peek_error();
        bool verify_failed = ERR_GET_LIB(code) == ERR_LIB_SSL && ERR_GET_REASON(code) == SSL_R_CERTIFICATE_VERIFY_FAILED;
        conn->last_error = take_openssl_reason();
        if (*conn->last_error == '\0') conn->last_error = "TLS protocol error";
        if (verify_failed) describe_verify_failure(conn);
        break;
    }
    default:
        conn->failed = true;
        conn->last_error = "unexpected TLS state";
        break;
    }
    ERR_clear_error();
    return status;
}

// Writes one record's worth (at most record_bytes). On WANT_*, OpenSSL may hold the record half
// sent and must be given the same bytes again: they are copied into conn->retry and count as taken.
int write_record(percore_tls_conn* conn, const unsigned char* data, std::size_t len) {
    ERR_clear_error();
    errno = 0;
    std::size_t written = 0;
    if (SSL_write_ex(conn->ssl, data, len, &written) == 1) return PERCORE_TLS_OK;
    int status = failure(conn, 0, errno);
    if (status == PERCORE_TLS_WANT_READ || status == PERCORE_TLS_WANT_WRITE) {
        if (data != conn->retry) {
            auto* copy = static_cast<unsigned char*>(std::malloc(len));
            if (copy == nullptr) {
                conn->failed = true;
                conn->last_error = "out of memory";
                return PERCORE_TLS_ERROR;
            }
            std::memcpy(copy, data, len);
            conn->retry = copy;
            conn->retry_len = len;
        }
    }
    return status;
}

}  // namespace

percore_tls_conn* make_connection(SSL_CTX* ctx, int fd, bool server_side) {
    const BIO_METHOD* method = socket_method();
    if (method == nullptr) return nullptr;
    auto* conn = new (std::nothrow) percore_tls_conn;
    if (conn == nullptr) return nullptr;
    conn->ssl = SSL_new(ctx);
    BIO* bio = conn->ssl != nullptr ? BIO_new(method) : nullptr;
    if (bio == nullptr) {
        SSL_free(conn->ssl);
        delete conn;
        ERR_clear_error();
        return nullptr;
    }
    BIO_set_fd(bio, fd, BIO_NOCLOSE);
    SSL_set_bio(conn->ssl, bio, bio);
    if (server_side) SSL_set_accept_state(conn->ssl);
    else SSL_set_connect_state(conn->ssl);
    return conn;
}

// ---- Server ------------------------------------------------------------------------------------

percore_tls_server* tls_server_new(const char* cert_path, const char* key_path, char* err, std::size_t err_len) {
    auto* server = new (std::nothrow) percore_tls_server;
    if (server == nullptr) {
        set_error(err, err_len, "out of memory");
        return nullptr;
    }
    if (!server->tickets.init()) {
        set_error(err, err_len, "cannot make TLS ticket keys: no random bytes");
        delete server;
        return nullptr;
    }
    server->context = build_server_context(server, cert_path, key_path, err, err_len);
    if (server->context == nullptr) {
        delete server;
        return nullptr;
    }
    return server;
}

int tls_server_reload(percore_tls_server* server, const char* cert_path, const char* key_path, char* err,
                      std::size_t err_len) {
    if (server == nullptr) return -1;
    SSL_CTX* fresh = build_server_context(server, cert_path, key_path, err, err_len);
    if (fresh == nullptr) return -1;
    SSL_CTX* old;
    {
        std::unique_lock lock(server->context_mutex);
        old = server->context;
        server->context = fresh;
    }
    SSL_CTX_free(old);  // freed once the last connection made from it is
    return 0;
}

void tls_server_free(percore_tls_server* server) {
    if (server == nullptr) return;
    SSL_CTX_free(server->context);
    delete server;
}

// ---- Connections -------------------------------------------------------------------------------

percore_tls_conn* tls_conn_new(percore_tls_server* server, int fd) {
    if (server == nullptr) return nullptr;
    std::shared_lock lock(server->context_mutex);
    return make_connection(server->context, fd, true);
}

int tls_conn_handshake(percore_tls_conn* conn) {
    if (conn == nullptr || conn->failed) return PERCORE_TLS_ERROR;
    if (SSL_is_init_finished(conn->ssl)) return PERCORE_TLS_OK;
    ERR_clear_error();
    errno = 0;
    int ret = SSL_do_handshake(conn->ssl);
    if (ret == 1) return PERCORE_TLS_OK;
    return failure(conn, ret, errno);
}

int tls_conn_read(percore_tls_conn* conn, void* buf, std::size_t len, std::size_t* n) {
    if (n != nullptr) *n = 0;
    if (conn == nullptr || n == nullptr || conn->failed) return PERCORE_TLS_ERROR;
    if (len == 0) return PERCORE_TLS_OK;
    ERR_clear_error();
    errno = 0;
    std::size_t got = 0;
    if (SSL_read_ex(conn->ssl, buf, len, &got) == 1) {
        *n = got;
        return PERCORE_TLS_OK;
    }
    return failure(conn, 0, errno);
}

int tls_conn_writev(percore_tls_conn* conn, const struct iovec* iov, int iovcnt, std::size_t* n) {
    if (n != nullptr) *n = 0;
    if (conn == nullptr || n == nullptr || conn->failed || iovcnt < 0 || (iovcnt > 0 && iov == nullptr))
        return PERCORE_TLS_ERROR;
    if (conn->retry_len > 0) {
        int status = write_record(conn, conn->retry, conn->retry_len);
        if (status != PERCORE_TLS_OK) return status;
        std::free(conn->retry);
        conn->retry = nullptr;
        conn->retry_len = 0;
    }
    unsigned char gather[record_bytes];  // small pieces go out together in one record
    std::size_t taken = 0;
    int piece = 0;
    std::size_t offset = 0;  // into iov[piece]
    auto skip_empty = [&] {
        while (piece < iovcnt && offset == iov[piece].iov_len) {
            ++piece;
            offset = 0;
        }
    };
    int last_nonempty = iovcnt - 1;
    while (last_nonempty >= 0 && iov[last_nonempty].iov_len == 0) --last_nonempty;
    skip_empty();
    while (piece < iovcnt) {
        const auto* base = static_cast<const unsigned char*>(iov[piece].iov_base);
        std::size_t left = iov[piece].iov_len - offset;
        const unsigned char* record;
        std::size_t record_len;
        if (left >= record_bytes || piece == last_nonempty) {  // straight from the caller's bytes
            record = base + offset;
            record_len = std::min(left, record_bytes);
            offset += record_len;
        } else {
            record_len = 0;
            while (piece < iovcnt && record_len < record_bytes) {
                const auto* from = static_cast<const unsigned char*>(iov[piece].iov_base) + offset;
                std::size_t step = std::min(iov[piece].iov_len - offset, record_bytes - record_len);
                std::memcpy(gather + record_len, from, step);
                record_len += step;
                offset += step;
                skip_empty();
            }
            record = gather;
        }
        skip_empty();
        int status = write_record(conn, record, record_len);
        if (status == PERCORE_TLS_ERROR || status == PERCORE_TLS_CLOSED) {
            *n = taken;
            return status;
        }
        taken += record_len;  // sent, or kept in conn->retry
        if (status != PERCORE_TLS_OK) {
            *n = taken;
            return status;
        }
    }
    *n = taken;
    return PERCORE_TLS_OK;
}

int tls_conn_write(percore_tls_conn* conn, const void* buf, std::size_t len, std::size_t* n) {
    iovec one{const_cast<void*>(buf), len};
    return tls_conn_writev(conn, &one, 1, n);
}

int tls_conn_shutdown(percore_tls_conn* conn) {
    if (conn == nullptr) return PERCORE_TLS_ERROR;
    if (conn->failed || SSL_in_init(conn->ssl)) return PERCORE_TLS_OK;  // nothing that could be sent
    std::size_t unused = 0;
    int status = tls_conn_writev(conn, nullptr, 0, &unused);
    if (status != PERCORE_TLS_OK) return status;
    ERR_clear_error();
    errno = 0;
    int ret = SSL_shutdown(conn->ssl);
    if (ret >= 0) return PERCORE_TLS_OK;  // 0: ours is sent (the peer's is not awaited); 1: both
    return failure(conn, ret, errno);
}

void tls_conn_free(percore_tls_conn* conn) {
    if (conn == nullptr) return;
    SSL_free(conn->ssl);
    std::free(conn->detail);
    if (conn->retry != nullptr) {
        OPENSSL_cleanse(conn->retry, conn->retry_len);
        std::free(conn->retry);
    }
    delete conn;
}

const char* tls_conn_last_error(const percore_tls_conn* conn) { return conn != nullptr ? conn->last_error : ""; }

std::size_t tls_conn_pending(const percore_tls_conn* conn) {
    if (conn == nullptr || conn->failed) return 0;
    int plain = SSL_pending(conn->ssl);
    if (plain > 0) return static_cast<std::size_t>(plain);
    return SSL_has_pending(conn->ssl) == 1 ? 1 : 0;
}

void tls_conn_info(const percore_tls_conn* conn, percore_tls_info* info) {
    if (info == nullptr) return;
    *info = percore_tls_info{};
    info->protocol = "";
    info->cipher = "";
    if (conn == nullptr) return;
    SSL* ssl = conn->ssl;
    info->handshake_done = SSL_is_init_finished(ssl) ? 1 : 0;
    if (info->handshake_done) {
        info->protocol = SSL_get_version(ssl);
        const char* cipher = SSL_get_cipher_name(ssl);
        info->cipher = cipher != nullptr ? cipher : "";
        info->resumed = SSL_session_reused(ssl) == 1 ? 1 : 0;
    }
    const unsigned char* alpn = nullptr;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
    if (alpn != nullptr) {
        std::size_t copy = std::min<std::size_t>(alpn_len, sizeof info->alpn - 1);
        std::memcpy(info->alpn, alpn, copy);
        info->alpn[copy] = '\0';
    }
    if (X509* peer = SSL_get0_peer_certificate(ssl); peer != nullptr) {
        unsigned int md_len = 0;
        if (X509_digest(peer, EVP_sha256(), info->peer_certificate_sha256, &md_len) == 1 && md_len == 32)
            info->has_peer_certificate = 1;
    }
    ERR_clear_error();
}

}  // namespace percore::crypto::module
