// poller_transports: the outgoing connections of one shard's tasks (a delivery's receiver, a
// follower's primary) on that shard's loop and poller — plain TCP, or TLS with one trust
// configuration per ca_file made on first use (the system's CAs for none).
//
// Contract: one per shard, on its thread; outlives the transports it made only through the poller
// (declared before the tasks that hold them, server/shard_capabilities.hpp).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "crypto/tls_client.hpp"
#include "shards/deliveries/delivery_transports.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

namespace percore::shards {

class poller_transports final : public delivery_transports {
public:
    poller_transports(runtime::loop& loop, runtime::poller& poller) : loop_(loop), poller_(poller) {}

    result<std::unique_ptr<net::client_transport>> make(const delivery_url& url, const std::string& ca_file,
                                                        const net::socket_address& peer) override;

private:
    runtime::loop& loop_;
    runtime::poller& poller_;
    std::map<std::string, std::unique_ptr<crypto::tls_client>> tls_clients_;  // by ca_file
};

}  // namespace percore::shards
