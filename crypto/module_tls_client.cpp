// TLS client: the trust configuration deliveries use to reach HTTPS receivers (module_abi.h,
// "TLS"), and the client side of a connection over a caller's socket. The connection itself is a
// percore_tls_conn like a server's (module_tls.cpp runs its handshake, reads and writes).
//
// Sharing between shard threads: a percore_tls_client holds one SSL_CTX that nothing changes after
// tls_client_new returns; SSL_new takes its own reference under OpenSSL's locks, so any number of
// threads may connect from one client at once.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <climits>
#include <cstring>
#include <new>

#include "crypto/module_tls_state.hpp"

struct percore_tls_client {
    SSL_CTX* context = nullptr;  // immutable once made
};

namespace percore::crypto::module {

namespace {

constexpr std::size_t longest_host = 253;  // a DNS name's most bytes (RFC 1035), below SNI's 255

bool load_trust(SSL_CTX* ctx, const char* ca_file, char* err, std::size_t err_len) {
    ERR_clear_error();
    if (ca_file == nullptr || *ca_file == '\0') {
        if (SSL_CTX_set_default_verify_paths(ctx) == 1) return true;
        set_error(err, err_len, "cannot use the system's CA certificates: %s", take_openssl_reason());
        return false;
    }
    if (!check_readable("CA file", ca_file, err, err_len)) return false;
    if (SSL_CTX_load_verify_locations(ctx, ca_file, nullptr) == 1) return true;
    unsigned long code = ERR_peek_error();
    const char* reason = take_openssl_reason();
    if (ERR_GET_LIB(code) == ERR_LIB_X509 && ERR_GET_REASON(code) == X509_R_NO_CERTIFICATE_OR_CRL_FOUND)
        set_error(err, err_len, "TLS CA file %s holds no PEM certificate", ca_file);
    else
        set_error(err, err_len, "TLS CA file %s: %s", ca_file, reason);
    return false;
}

// Each certificate of `len` bytes of PEM text, in order, to `each` (which may keep a reference; false
// stops, with err set by it). The count, or 0 with a reason: no certificate, or a block that is
// malformed (anything but the clean end of the text, PEM_R_NO_START_LINE). No file is read.
template <class Each>
std::size_t for_each_certificate(const char* pem, std::size_t len, char* err, std::size_t err_len, Each each) {
    if (pem == nullptr || len == 0 || len > INT_MAX) {
        set_error(err, err_len, "holds no PEM certificate");
        return 0;
    }
    ERR_clear_error();
    BIO* in = BIO_new_mem_buf(pem, static_cast<int>(len));
    if (in == nullptr) {
        set_error(err, err_len, "out of memory");
        return 0;
    }
    std::size_t n = 0;
    while (X509* cert = PEM_read_bio_X509(in, nullptr, nullptr, nullptr)) {
        ++n;
        const bool go = each(cert);
        X509_free(cert);
        if (!go) {
            BIO_free(in);
            return 0;
        }
    }
    BIO_free(in);
    const unsigned long code = ERR_peek_last_error();
    if (code != 0 && !(ERR_GET_LIB(code) == ERR_LIB_PEM && ERR_GET_REASON(code) == PEM_R_NO_START_LINE)) {
        set_error(err, err_len, "certificate %zu is malformed: %s", n + 1, take_openssl_reason());
        return 0;
    }
    ERR_clear_error();
    if (n == 0) set_error(err, err_len, "holds no PEM certificate");
    return n;
}

// An IP literal (IPv4 dotted, or IPv6 without brackets) is verified against the certificate's IP
// addresses and sent without SNI; anything else is a DNS name.
bool is_ip_literal(const char* host) {
    unsigned char address[sizeof(in6_addr)];
    return inet_pton(AF_INET, host, address) == 1 || inet_pton(AF_INET6, host, address) == 1;
}

bool set_peer_name(SSL* ssl, const char* host) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    if (is_ip_literal(host)) return X509_VERIFY_PARAM_set1_ip_asc(param, host) == 1;
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return SSL_set_tlsext_host_name(ssl, host) == 1 && X509_VERIFY_PARAM_set1_host(param, host, 0) == 1;
}

}  // namespace

namespace {

// A client context with the shared policy and no trust yet (null and a reason when it cannot be made).
percore_tls_client* new_client(char* err, std::size_t err_len) {
    auto* client = new (std::nothrow) percore_tls_client;
    if (client == nullptr) {
        set_error(err, err_len, "out of memory");
        return nullptr;
    }
    ERR_clear_error();
    client->context = SSL_CTX_new(TLS_client_method());
    if (client->context == nullptr) {
        set_error(err, err_len, "cannot make a TLS context: %s", take_openssl_reason());
        delete client;
        return nullptr;
    }
    SSL_CTX* ctx = client->context;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (!apply_shared_policy(ctx) || SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof alpn_http11) != 0) {
        set_error(err, err_len, "cannot apply the TLS policy: %s", take_openssl_reason());
        tls_client_free(client);
        return nullptr;
    }
    return client;
}

}  // namespace

percore_tls_client* tls_client_new(const char* ca_file, char* err, std::size_t err_len) {
    percore_tls_client* client = new_client(err, err_len);
    if (client == nullptr) return nullptr;
    if (!load_trust(client->context, ca_file, err, err_len)) {
        tls_client_free(client);
        return nullptr;
    }
    return client;
}

percore_tls_client* tls_client_new_pem(const char* pem, std::size_t len, char* err, std::size_t err_len) {
    percore_tls_client* client = new_client(err, err_len);
    if (client == nullptr) return nullptr;
    X509_STORE* store = SSL_CTX_get_cert_store(client->context);  // empty: no default paths loaded
    char why[256] = {};
    const std::size_t n = for_each_certificate(pem, len, why, sizeof why, [&](X509* cert) {
        if (X509_STORE_add_cert(store, cert) == 1) return true;  // takes its own reference
        set_error(why, sizeof why, "cannot trust a certificate: %s", take_openssl_reason());
        return false;
    });
    if (n == 0) {
        set_error(err, err_len, "TLS CA certificates (PEM text): %s", why);
        tls_client_free(client);
        return nullptr;
    }
    return client;
}

std::size_t ca_pem_certificates(const char* pem, std::size_t len, char* out, std::size_t out_cap, std::size_t* out_len,
                                char* err, std::size_t err_len) {
    if (out_len != nullptr) *out_len = 0;
    BIO* written = BIO_new(BIO_s_mem());
    if (written == nullptr) {
        set_error(err, err_len, "out of memory");
        return 0;
    }
    const std::size_t n = for_each_certificate(pem, len, err, err_len, [&](X509* cert) {
        if (PEM_write_bio_X509(written, cert) == 1) return true;
        set_error(err, err_len, "cannot write a certificate: %s", take_openssl_reason());
        return false;
    });
    char* data = nullptr;
    const long size = n == 0 ? 0 : BIO_get_mem_data(written, &data);
    const std::size_t bytes = size > 0 ? static_cast<std::size_t>(size) : 0;
    if (out_len != nullptr) *out_len = bytes;
    const bool fits = n != 0 && bytes <= out_cap && (out != nullptr || bytes == 0);
    if (fits && bytes != 0) std::memcpy(out, data, bytes);
    BIO_free(written);
    if (n != 0 && !fits) set_error(err, err_len, "its certificates take %zu bytes, more than %zu", bytes, out_cap);
    return fits ? n : 0;
}

void tls_client_free(percore_tls_client* client) {
    if (client == nullptr) return;
    SSL_CTX_free(client->context);
    delete client;
}

percore_tls_conn* tls_client_connect(const percore_tls_client* client, int fd, const char* host, char* err,
                                     std::size_t err_len) {
    if (client == nullptr || host == nullptr || *host == '\0' || std::strlen(host) > longest_host) {
        set_error(err, err_len, "no usable TLS host name (empty, or longer than %zu bytes)", longest_host);
        return nullptr;
    }
    percore_tls_conn* conn = make_connection(client->context, fd, false);
    if (conn == nullptr) {
        set_error(err, err_len, "out of memory");
        return nullptr;
    }
    ERR_clear_error();
    if (!set_peer_name(conn->ssl, host)) {
        set_error(err, err_len, "cannot verify TLS host %s: %s", host, take_openssl_reason());
        tls_conn_free(conn);
        return nullptr;
    }
    return conn;
}

}  // namespace percore::crypto::module
