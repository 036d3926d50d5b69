#include "shards/server/poller_transports.hpp"

#include "net/client_socket.hpp"
#include "net/tls_client_socket.hpp"
#include "shards/base/shard_task.hpp"

namespace percore::shards {

result<poller_transports::client_ptr> poller_transports::tls_client_for(const std::string& ca_pem) {
    for (auto it = tls_clients_.begin(); it != tls_clients_.end(); ++it) {  // 16 at most: a walk is cheap
        if (it->first != ca_pem) continue;
        tls_clients_.splice(tls_clients_.begin(), tls_clients_, it);
        return tls_clients_.front().second;
    }
    auto made = ca_pem.empty() ? crypto::make_tls_client("") : crypto::make_tls_client_from_pem(ca_pem);
    if (!made) return std::unexpected("TLS: " + std::string(made.error().message()));
    if (tls_clients_.size() >= max_tls_clients_per_shard) tls_clients_.pop_back();
    tls_clients_.emplace_front(ca_pem, std::make_shared<const crypto::tls_client>(std::move(*made)));
    return tls_clients_.front().second;
}

result<std::unique_ptr<net::client_transport>> poller_transports::make(const delivery_url& url,
                                                                       const std::string& ca_pem,
                                                                       const net::socket_address& peer) {
    PERCORE_REQUIRES(on_shard_thread(loop_.shard()));
    if (!url.https) return std::make_unique<net::client_socket>(loop_, poller_, peer);
    auto client = tls_client_for(ca_pem);
    if (!client) return std::unexpected(std::move(client.error()));
    std::string host = url.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return std::make_unique<net::tls_client_socket>(loop_, poller_, peer, std::move(*client), std::move(host));
}

}  // namespace percore::shards
