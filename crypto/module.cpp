// The crypto module's table and its only exported symbol (see module_abi.h). Built into
// percore-crypto.so with hidden visibility and a version script (module.map), so nothing else of
// the module, of OpenSSL's interface or of the statically linked libstdc++ is visible to the server.
#include <openssl/crypto.h>
#include <openssl/err.h>

#include <cstdio>

#include "crypto/module_internal.hpp"

namespace percore::crypto::module {

void set_error(char* err, std::size_t err_len, const char* format, ...) {
    if (err == nullptr || err_len == 0) return;
    va_list args;
    va_start(args, format);
    std::vsnprintf(err, err_len, format, args);
    va_end(args);
}

const char* take_openssl_reason() {
    unsigned long code = ERR_peek_error();
    const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
    ERR_clear_error();
    if (code != 0 && reason == nullptr) return "unknown OpenSSL error";
    return reason != nullptr ? reason : "";
}

namespace {

const char* library_version() { return OpenSSL_version(OPENSSL_VERSION); }

constexpr percore_crypto_v1 table{
    .abi_version = PERCORE_CRYPTO_ABI_VERSION,
    .struct_size = sizeof(percore_crypto_v1),
    .library_version = library_version,
    .tls_server_new = tls_server_new,
    .tls_server_reload = tls_server_reload,
    .tls_server_free = tls_server_free,
    .tls_conn_new = tls_conn_new,
    .tls_conn_handshake = tls_conn_handshake,
    .tls_conn_read = tls_conn_read,
    .tls_conn_write = tls_conn_write,
    .tls_conn_writev = tls_conn_writev,
    .tls_conn_shutdown = tls_conn_shutdown,
    .tls_conn_free = tls_conn_free,
    .tls_conn_last_error = tls_conn_last_error,
    .tls_conn_pending = tls_conn_pending,
    .tls_conn_info = tls_conn_info,
    .seal_key_load = seal_key_load,
    .seal_key_free = seal_key_free,
    .seal_suite_name = seal_suite_name,
    .seal = seal,
    .open = open,
    .digest_sha256 = digest_sha256,
    .hmac_sha256 = hmac_sha256,
    .tls_client_new = tls_client_new,
    .tls_client_free = tls_client_free,
    .tls_client_connect = tls_client_connect,
    .seal_key_from_bytes = seal_key_from_bytes,
    .hmac_sha256_parts = hmac_sha256_parts,
    .ca_pem_certificates = ca_pem_certificates,
    .tls_client_new_pem = tls_client_new_pem,
};

}  // namespace

}  // namespace percore::crypto::module

extern "C" __attribute__((visibility("default"))) const percore_crypto_v1* percore_crypto_v1_get(void) {
    return &percore::crypto::module::table;
}
