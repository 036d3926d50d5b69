// admin_pages: the server's own endpoints — /_health, /_metrics (Prometheus text:
// prometheus_writer.hpp; the process' figures: process_stats.hpp) and /_stats (JSON per shard) —
// rendered from a server_view. The deliveries' series are admin_pages_deliveries.cpp's.
//
// One per shard (its text buffer is reused); on that shard's thread.
#pragma once

#include <string>

#include "net/response.hpp"
#include "shards/base/json_text.hpp"
#include "shards/feed/change_feed.hpp"
#include "shards/base/server_view.hpp"

namespace percore::shards {

// /_metrics labels this many apps by name (those with the most requests); the rest are summed.
inline constexpr std::size_t metrics_labelled_apps = 20;
// ... and this many deliveries (the first in app and name order), each with its lag counted by
// paging the feed (at most max_delivery_lag_changes): a scrape's cost stays bounded.
inline constexpr std::size_t metrics_labelled_deliveries = 20;

class admin_pages {
public:
    // feed: for the deliveries' lag (null: no per-delivery series, as in tests without stores).
    explicit admin_pages(const server_view& server, change_feed* feed = nullptr) : server_(server), feed_(feed) {}

    void health(net::response& res);
    void metrics(net::response& res);
    void stats(net::response& res);

private:
    void metrics_requests();
    void metrics_writes();
    void metrics_connections();
    void metrics_store();
    void metrics_process();
    void metrics_apps();
    void metrics_follower();
    void append_role();
    void metrics_deliveries(change_feed& feed);  // admin_pages_deliveries.cpp

    const server_view& server_;
    change_feed* feed_;
    std::string text_;
    std::string scratch_;
};

}  // namespace percore::shards
