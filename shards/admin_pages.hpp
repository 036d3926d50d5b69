// admin_pages: the server's own endpoints — /_health, /_metrics (Prometheus text) and /_stats
// (JSON per shard) — rendered from a server_view.
//
// One per shard (its text buffer is reused); on that shard's thread.
#pragma once

#include <string>

#include "net/response.hpp"
#include "shards/change_feed.hpp"
#include "shards/server_view.hpp"

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
    void metrics_deliveries(change_feed& feed);  // admin_deliveries.cpp

    const server_view& server_;
    change_feed* feed_;
    std::string text_;
    std::string scratch_;
};

// Text helpers shared by the pages and the list bodies.
void append_uint(std::string& out, std::uint64_t v);
void append_decimal(std::string& out, double v);
void append_ratio(std::string& out, std::uint64_t num, std::uint64_t den);  // num/den, up to nine places
void append_json_string(std::string& out, std::string_view s);
// The JSON string of n bytes takes at most json_string_max_bytes(n) characters (every byte a
// \u00XX escape, and the quotes); put_json_string() writes it at `o`, which has that room, and
// returns the end.
constexpr std::size_t json_string_max_bytes(std::size_t n) { return 6 * n + 2; }
char* put_json_string(char* o, std::string_view s);

}  // namespace percore::shards
