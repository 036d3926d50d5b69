// changes_endpoint: the /_changes/ targets (base/endpoint.hpp) — an app's change feed, GET
// /_changes/{app} (SPEC §8: feed=normal, longpoll, continuous, eventsource), and the replication
// feed a follower copies, GET /_changes/_all (SPEC §10: normal or longpoll, each change with its
// value: replication_page.hpp).
//
// Contract
// - One per shard, owned by that shard's document service, on that shard's thread inside a round;
//   it pages the feed (change_feed.hpp, reading every shard's snapshot) and hands what must wait —
//   a long poll with nothing yet, a stream — to the shard's feed_waits (owns neither).
// - A page is answered at once (200); a `since` the feed cannot start from is 400, or 410 with the
//   oldest cursor (counted for the server and the app); a wait is pending, answered by feed_waits,
//   or 501 where nothing can wait (in-process tests) and 503 with Retry-After past
//   max_feed_waits_per_shard. Methods other than GET and HEAD are 405.
// - A token with a key prefix sees only its prefix's changes (reachable_prefix, access.hpp).
// - Submits no writes.
#pragma once

#include <string>

#include "shards/apps/access.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/base/endpoint.hpp"
#include "shards/base/metrics.hpp"
#include "shards/base/sync_acks.hpp"
#include "shards/feed/change_feed.hpp"
#include "shards/feed/feed_waits.hpp"

namespace percore::shards {

class changes_endpoint final : public endpoint {
public:
    changes_endpoint(change_feed& feed, feed_waits& waits, app_registry& apps, shard_metrics& metrics, unsigned self);

    // REQUIRES: on this shard's thread; r.kind is changes or replication.
    result handle(net::request& req, net::response& res, const net::route& r, const principal& who,
                  net::answer_ticket ticket) override;

    // --replication sync (SPEC §12): a follower's page request acknowledges the versions its cursor
    // names (sync_acks.hpp). `acks` outlives this; set before the shards run. Null: async.
    void set_sync_acks(sync_acks* acks) { acks_ = acks; }

private:
    result list_changes(const net::request& req, net::response& res, const net::route& r, const principal& who,
                        net::answer_ticket ticket);
    result send_changes(net::response& res, const net::route& r, feed_cursor pos, net::answer_ticket ticket);
    result replication_page(net::response& res, const net::route& r, net::answer_ticket ticket, std::string_view board);
    result wait_for_changes(const net::route& r, feed_cursor pos, net::answer_ticket ticket, net::response& res);
    result refuse_feed(net::response& res, const problem& why, app_entry* app);

    change_feed& feed_;
    feed_waits& waits_;
    app_registry& apps_;
    shard_metrics& metrics_;
    const unsigned self_;
    sync_acks* acks_ = nullptr;  // --replication sync only
    std::string key_;   // the feed's app prefix: app '\0' key prefix (empty: the replication feed)
    std::string text_;  // page bodies, reused
};

}  // namespace percore::shards
