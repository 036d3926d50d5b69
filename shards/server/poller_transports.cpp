#include "shards/server/poller_transports.hpp"

#include "net/client_socket.hpp"
#include "net/tls_client_socket.hpp"
#include "shards/base/shard_task.hpp"

namespace percore::shards {

result<std::unique_ptr<net::client_transport>> poller_transports::make(const delivery_url& url,
                                                                       const std::string& ca_file,
                                                                       const net::socket_address& peer) {
    PERCORE_REQUIRES(on_shard_thread(loop_.shard()));
    if (!url.https) return std::make_unique<net::client_socket>(loop_, poller_, peer);
    auto it = tls_clients_.find(ca_file);
    if (it == tls_clients_.end()) {
        auto made = crypto::make_tls_client(ca_file);
        if (!made) return std::unexpected("TLS: " + std::string(made.error().message()));
        it = tls_clients_.emplace(ca_file, std::make_unique<crypto::tls_client>(std::move(*made))).first;
    }
    std::string host = url.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return std::make_unique<net::tls_client_socket>(loop_, poller_, peer, *it->second, std::move(host));
}

}  // namespace percore::shards
