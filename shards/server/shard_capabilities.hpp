// shard_capabilities: what one shard runs beside its connections — each capability's task
// (base/shard_task.hpp) built for that shard and registered with its table. The one place that
// names the capabilities a shard runs; the shard itself drives only shard_tasks.
//
// Registered, in this order (the order a round steps them):
//   feed waits (every shard)           the change feeds that wait for commits (SPEC §8)
//   backups (every shard)              GET /_backup streams (SPEC §11)
//   delivery engine (a primary)        webhook deliveries (SPEC §9), issuer::delivery
//   follower slot (shard 0 of a board   the copy of the primary (SPEC §10), issuer::follower
//     that follows or may: --follow, --cluster)
//   coordinator (shard 0, --cluster)   the group's leadership through etcd (SPEC §12)
//   app erasures (a primary)           deleted apps' keys (SPEC §7), issuer::app_erasure
// A follower runs no deliveries and no erasures: the primary's arrive as changes. With --cluster a
// board's role changes while it runs (SPEC §12): its deliveries and erasures are registered behind
// while_primary, which steps them only while the board is the primary.
//
// Contract: built on the main thread with the shard, before it runs; destroyed with the shard,
// after its connections closed. Everything else on the shard's thread.
#pragma once

#include <memory>
#include <optional>

#include "shards/base/shard_task.hpp"
#include "shards/deliveries/delivery_engine.hpp"
#include "shards/cluster/coordinator.hpp"
#include "shards/follower/follower_slot.hpp"
#include "shards/server/while_primary.hpp"
#include "shards/http/document_service.hpp"
#include "shards/server/poller_transports.hpp"
#include "shards/server/shard_context.hpp"

namespace percore::shards {

class shard_capabilities {
public:
    shard_capabilities(shard_context& context, unsigned id, store_client& stores, document_service& service,
                       shard_metrics& metrics, runtime::loop& loop, runtime::poller& poller);

    // Registers every task this shard runs (see above) with `tasks`.
    void register_with(shard_tasks& tasks);

private:
    void make_coordinator(runtime::loop& loop, runtime::poller& poller);

    shard_context& context_;
    document_service& service_;
    poller_transports transports_;          // before the tasks whose connections it makes
    delivery_engine deliveries_;
    std::unique_ptr<follower_slot> follower_;  // --follow or --cluster, shard 0 only
    std::optional<while_primary> deliveries_while_primary_;  // --cluster
    std::optional<while_primary> erasures_while_primary_;    // --cluster
    std::unique_ptr<coordinator> coordinator_;               // --cluster, shard 0 only
};

}  // namespace percore::shards
