// delivery_transports: the seam through which an outgoing exchange (a delivery, a follower's page
// request) gets its connection — implemented by the shard on its poller, by a fake in tests.
//
// Contract: the owning shard's thread.
#pragma once

#include <memory>
#include <string>

#include "net/client_connection.hpp"
#include "net/resolve.hpp"
#include "shards/base/result.hpp"
#include "shards/deliveries/delivery_record.hpp"

namespace percore::shards {

// Makes the transport of one delivery's connection (plain TCP, or TLS for https) to `peer`; a
// problem when it cannot (the crypto module or ca_pem unusable). `ca_pem`: the CA certificates to
// trust as PEM text (a delivery record's), empty for the system's.
class delivery_transports {
public:
    virtual result<std::unique_ptr<net::client_transport>> make(const delivery_url& url, const std::string& ca_pem,
                                                                const net::socket_address& peer) = 0;

protected:
    ~delivery_transports() = default;
};

}  // namespace percore::shards
