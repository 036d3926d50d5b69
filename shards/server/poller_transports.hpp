// poller_transports: the outgoing connections of one shard's tasks (a delivery's receiver, a
// follower's primary) on that shard's loop and poller — plain TCP, or TLS with one trust
// configuration per distinct CA text (the system's CAs for none), made on first use and kept in a
// small cache of the most recently used ones.
//
// Contract
// - One per shard, on its thread; outlives the transports it made only through the poller
//   (declared before the tasks that hold them, server/shard_capabilities.hpp).
// - make(url, ca_pem, peer): ca_pem is PEM text held in memory (a delivery record's, checked at
//   its PUT); no file named by a tenant is ever read (review M5). The cache is keyed by that text
//   itself (exact: two texts never share a configuration) and holds at most max_tls_clients_per_shard;
//   past it the least recently used is dropped — a TLS transport shares its configuration, so one
//   dropped while a delivery's connection uses it lives until that transport goes.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "crypto/tls_client.hpp"
#include "shards/deliveries/delivery_transports.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

namespace percore::shards {

// Trust configurations one shard keeps. Each is an SSL_CTX with its certificates (a tenant's ca_pem
// is at most 32 KiB of PEM; the system store's, made once, a few MiB: crypto/module_abi.h), and
// making one again costs a parse of that text (well under a millisecond for a few certificates).
// 16 covers the distinct CAs a board's deliveries name, while a tenant cycling texts holds at most
// 16 contexts per shard, never one per spelling (review M5: the map by ca_file grew without bound).
inline constexpr std::size_t max_tls_clients_per_shard = 16;

class poller_transports final : public delivery_transports {
public:
    poller_transports(runtime::loop& loop, runtime::poller& poller) : loop_(loop), poller_(poller) {}

    result<std::unique_ptr<net::client_transport>> make(const delivery_url& url, const std::string& ca_pem,
                                                        const net::socket_address& peer) override;

    // Configurations held now (at most max_tls_clients_per_shard).
    std::size_t tls_clients() const { return tls_clients_.size(); }

private:
    using client_ptr = std::shared_ptr<const crypto::tls_client>;
    // The configuration for `ca_pem`, made on a miss, and now the most recently used.
    result<client_ptr> tls_client_for(const std::string& ca_pem);

    runtime::loop& loop_;
    runtime::poller& poller_;
    std::list<std::pair<std::string, client_ptr>> tls_clients_;  // by CA text, most recently used first
};

}  // namespace percore::shards
