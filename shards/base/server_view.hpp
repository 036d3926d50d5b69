// server_view: the whole server as /_health, /_metrics and /_stats show it — every shard's
// counters and snapshot, and whether the server serves. Implemented by the server; read from any
// shard's thread (the counters are relaxed atomics written by their own shard).
#pragma once

#include "net/connection_stats.hpp"
#include "shards/base/board_role.hpp"
#include "shards/base/feed_identity.hpp"
#include "shards/base/metrics.hpp"
#include "store/snapshot.hpp"

namespace percore::shards {

class app_registry;
struct follower_status;

class server_view {
public:
    virtual unsigned shard_count() const = 0;
    virtual bool serving() const = 0;
    virtual bool stopping() const = 0;
    virtual bool any_store_failed() const = 0;
    virtual int cpu_of(unsigned shard) const = 0;
    virtual const shard_metrics& metrics_of(unsigned shard) const = 0;
    virtual const net::connection_stats& connections_of(unsigned shard) const = 0;
    virtual const store::snapshot* snapshot_of(unsigned shard) const = 0;
    virtual const app_registry& apps() const = 0;
    // The data directory's id and layout generation: what the change feed's cursors name.
    virtual feed_identity data_identity() const = 0;
    // What the board is now (board_role.hpp): primary, follower of whom, or fenced.
    virtual const board_role& role() const = 0;
    // While the board follows (SPEC §10): how far behind its copy is; null otherwise.
    virtual const follower_status* follower() const { return nullptr; }

protected:
    ~server_view() = default;
};

}  // namespace percore::shards
