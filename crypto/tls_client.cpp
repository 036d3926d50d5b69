#include "crypto/tls_client.hpp"

#include <string>

#include "shards/runtime/check.hpp"

namespace percore::crypto {

result<tls_client> tls_client::create(const crypto_api& api, std::string_view ca_file) {
    const std::string path(ca_file);
    if (path.find('\0') != std::string::npos)
        return std::unexpected(error(errc::unusable_file, "TLS CA file name holds a NUL byte"));
    char err[module_error_bytes] = {};
    percore_tls_client* client = api.tls_client_new(path.c_str(), err, sizeof err);
    if (client == nullptr) return std::unexpected(file_error(err));
    return tls_client(api, client);
}

result<tls_client> tls_client::create_from_pem(const crypto_api& api, std::string_view pem) {
    char err[module_error_bytes] = {};
    percore_tls_client* client = api.tls_client_new_pem(pem.data(), pem.size(), err, sizeof err);
    if (client == nullptr) return std::unexpected(file_error(err));
    return tls_client(api, client);
}

result<tls_connection> tls_client::connect(int fd, std::string_view host) const {
    PERCORE_REQUIRES(object_ != nullptr);
    PERCORE_REQUIRES(fd >= 0);
    PERCORE_REQUIRES(!host.empty() && host.size() <= tls_client_longest_host &&
                     host.find('\0') == std::string_view::npos);
    const std::string name(host);
    char err[module_error_bytes] = {};
    percore_tls_conn* conn = api_->tls_client_connect(object_, fd, name.c_str(), err, sizeof err);
    if (conn == nullptr) return std::unexpected(error(errc::out_of_memory, "cannot start TLS to " + name + ": " + err));
    return tls_connection(*api_, conn);
}

result<tls_client> make_tls_client(std::string_view ca_file) {
    auto api = load_crypto_module();
    if (!api) return std::unexpected(api.error());
    return tls_client::create(**api, ca_file);
}

}  // namespace percore::crypto

namespace percore::crypto {

result<tls_client> make_tls_client_from_pem(std::string_view pem) {
    auto api = load_crypto_module();
    if (!api) return std::unexpected(api.error());
    return tls_client::create_from_pem(**api, pem);
}

result<std::string> ca_certificates_pem(std::string_view pem, std::size_t max_bytes) {
    auto api = load_crypto_module();
    if (!api) return std::unexpected(api.error());
    std::string out(max_bytes, '\0');
    std::size_t written = 0;
    char err[module_error_bytes] = {};
    const std::size_t n = (*api)->ca_pem_certificates(pem.data(), pem.size(), out.data(), out.size(), &written, err,
                                                       sizeof err);
    if (n == 0) return std::unexpected(file_error(err));
    out.resize(written);
    return out;
}

}  // namespace percore::crypto
