#include "crypto/tls.hpp"

#include <algorithm>
#include <climits>
#include <iterator>
#include <utility>

#include "shards/runtime/check.hpp"

namespace percore::crypto {

namespace {

tls_status status_of(int raw) {
    switch (raw) {
    case PERCORE_TLS_OK: return tls_status::ok;
    case PERCORE_TLS_WANT_READ: return tls_status::want_read;
    case PERCORE_TLS_WANT_WRITE: return tls_status::want_write;
    case PERCORE_TLS_CLOSED: return tls_status::closed;
    default: return tls_status::error;
    }
}

}  // namespace

std::string_view to_string(tls_status status) {
    switch (status) {
    case tls_status::ok: return "ok";
    case tls_status::want_read: return "want_read";
    case tls_status::want_write: return "want_write";
    case tls_status::closed: return "closed";
    case tls_status::error: return "error";
    }
    return "error";
}

// ---- tls_connection ----

tls_status tls_connection::handshake() {
    PERCORE_REQUIRES(object_ != nullptr);
    return status_of(api_->tls_conn_handshake(object_));
}

tls_io tls_connection::read(std::span<char> into) {
    PERCORE_REQUIRES(object_ != nullptr);
    std::size_t n = 0;
    tls_status status = status_of(api_->tls_conn_read(object_, into.data(), into.size(), &n));
    return {status, n};
}

tls_io tls_connection::write(std::span<const char> bytes) {
    PERCORE_REQUIRES(object_ != nullptr);
    std::size_t n = 0;
    tls_status status = status_of(api_->tls_conn_write(object_, bytes.data(), bytes.size(), &n));
    return {status, n};
}

tls_io tls_connection::write(std::span<const iovec> pieces) {
    PERCORE_REQUIRES(object_ != nullptr);
    std::size_t taken = 0;
    // writev takes an int count; a span longer than that goes in slices.
    while (true) {
        std::size_t count = std::min<std::size_t>(pieces.size(), INT_MAX);
        std::size_t n = 0;
        tls_status status =
            status_of(api_->tls_conn_writev(object_, pieces.data(), static_cast<int>(count), &n));
        taken += n;
        if (status != tls_status::ok || count == pieces.size()) return {status, taken};
        pieces = pieces.subspan(count);
    }
}

tls_status tls_connection::flush() {
    PERCORE_REQUIRES(object_ != nullptr);
    std::size_t n = 0;
    return status_of(api_->tls_conn_writev(object_, nullptr, 0, &n));
}

tls_status tls_connection::shutdown() {
    PERCORE_REQUIRES(object_ != nullptr);
    return status_of(api_->tls_conn_shutdown(object_));
}

std::size_t tls_connection::pending() const {
    PERCORE_REQUIRES(object_ != nullptr);
    return api_->tls_conn_pending(object_);
}

std::string_view tls_connection::last_error() const {
    PERCORE_REQUIRES(object_ != nullptr);
    return api_->tls_conn_last_error(object_);
}

tls_info tls_connection::info() const {
    PERCORE_REQUIRES(object_ != nullptr);
    percore_tls_info raw{};
    api_->tls_conn_info(object_, &raw);
    tls_info info;
    info.handshake_done = raw.handshake_done != 0;
    info.resumed = raw.resumed != 0;
    info.protocol = raw.protocol != nullptr ? raw.protocol : "";
    info.cipher = raw.cipher != nullptr ? raw.cipher : "";
    info.alpn = raw.alpn;
    info.has_peer_certificate = raw.has_peer_certificate != 0;
    std::copy(std::begin(raw.peer_certificate_sha256), std::end(raw.peer_certificate_sha256),
              info.peer_certificate_sha256.begin());
    return info;
}

// ---- tls_server ----

result<tls_server> tls_server::create(const crypto_api& api, const std::string& cert_path,
                                      const std::string& key_path) {
    char err[module_error_bytes] = {};
    percore_tls_server* server = api.tls_server_new(cert_path.c_str(), key_path.c_str(), err, sizeof err);
    if (server == nullptr) return std::unexpected(file_error(err));
    return tls_server(api, server);
}

result<void> tls_server::reload(const std::string& cert_path, const std::string& key_path) {
    PERCORE_REQUIRES(object_ != nullptr);
    char err[module_error_bytes] = {};
    if (api_->tls_server_reload(object_, cert_path.c_str(), key_path.c_str(), err, sizeof err) != 0)
        return std::unexpected(file_error(err));
    return {};
}

result<tls_connection> tls_server::accept(int fd) {
    PERCORE_REQUIRES(object_ != nullptr);
    PERCORE_REQUIRES(fd >= 0);
    percore_tls_conn* conn = api_->tls_conn_new(object_, fd);
    if (conn == nullptr)
        return std::unexpected(error(errc::out_of_memory, "cannot start TLS on a connection: out of memory"));
    return tls_connection(*api_, conn);
}

result<tls_server> make_tls_server(const std::string& cert_path, const std::string& key_path) {
    auto api = load_crypto_module();
    if (!api) return std::unexpected(api.error());
    return tls_server::create(**api, cert_path, key_path);
}

}  // namespace percore::crypto
