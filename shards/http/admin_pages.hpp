// admin_pages: the server's own pages (base/endpoint.hpp) — /_health, /_metrics (Prometheus text:
// prometheus_writer.hpp; the process' figures: process_stats.hpp) and /_stats (JSON per shard) —
// rendered from a server_view: every shard's counters, connections and snapshots.
//
// Contract
// - One per shard, owned by that shard's document service, on that shard's thread inside a round
//   (its text buffers are reused). It reads other shards' figures through the server_view only
//   (relaxed atomics, published snapshots): a page may be a moment stale, never torn.
// - GET and HEAD only (405 otherwise). /_health is open to anyone; /_metrics and /_stats only to
//   the server admin when auth is on (access.hpp refuses others before this is called).
// - /_health/primary and /_health/replica?lag=N (SPEC §12, HAProxy's checks, open to anyone): 200
//   or 503, the body the status and role of /_health; see probe().
// - /_metrics stays bounded whatever the number of apps and deliveries: metrics_labelled_apps and
//   metrics_labelled_deliveries below. The deliveries' series are admin_pages_deliveries.cpp's.
// - Submits no writes.
#pragma once

#include <string>

#include "net/response.hpp"
#include "shards/base/endpoint.hpp"
#include "shards/base/json_text.hpp"
#include "shards/feed/change_feed.hpp"
#include "shards/base/server_view.hpp"

namespace percore::shards {

class prometheus_writer;

// /_metrics labels this many apps by name (those with the most requests); the rest are summed.
inline constexpr std::size_t metrics_labelled_apps = 20;
// ... and this many deliveries (the first in app and name order), each with its lag counted by
// paging the feed (at most max_delivery_lag_changes): a scrape's cost stays bounded.
inline constexpr std::size_t metrics_labelled_deliveries = 20;

class admin_pages final : public endpoint {
public:
    // self: this shard. feed: for the deliveries' lag (null: no per-delivery series, as in tests
    // without stores).
    admin_pages(const server_view& server, unsigned self, change_feed* feed = nullptr)
        : server_(server), self_(self), feed_(feed) {}

    // REQUIRES: on this shard's thread; r.kind is health, metrics or stats.
    result handle(net::request& req, net::response& res, const net::route& r, const principal& who,
                  net::answer_ticket ticket) override;

private:
    void health(net::response& res);
    void probe(net::response& res, const net::route& r);
    void metrics(net::response& res);
    void stats(net::response& res);
    void append_shard_stats(unsigned shard);
    void metrics_requests();
    void metrics_writes();
    void metrics_connections();
    void metrics_store();
    void metrics_delivery_counters(prometheus_writer& w);
    void per_shard(prometheus_writer& w, std::string_view name, std::string_view type, std::string_view help,
                   const counter shard_metrics::*field);
    void metrics_process();
    void metrics_apps();
    void metrics_follower();
    void append_role();
    void metrics_deliveries(change_feed& feed);  // admin_pages_deliveries.cpp

    const server_view& server_;
    const unsigned self_;
    change_feed* feed_;
    std::string text_;
    std::string scratch_;
};

}  // namespace percore::shards
