// admin_pages: the server's own endpoints — /_health, /_metrics (Prometheus text) and /_stats
// (JSON per shard) — rendered from a server_view.
//
// One per shard (its text buffer is reused); on that shard's thread.
#pragma once

#include <string>

#include "net/response.hpp"
#include "shards/server_view.hpp"

namespace percore::shards {

// /_metrics labels this many apps by name (those with the most requests); the rest are summed.
inline constexpr std::size_t metrics_labelled_apps = 20;

class admin_pages {
public:
    explicit admin_pages(const server_view& server) : server_(server) {}

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

    const server_view& server_;
    std::string text_;
};

// Text helpers shared by the pages and the list bodies.
void append_uint(std::string& out, std::uint64_t v);
void append_decimal(std::string& out, double v);
void append_ratio(std::string& out, std::uint64_t num, std::uint64_t den);  // num/den, up to nine places
void append_json_string(std::string& out, std::string_view s);

}  // namespace percore::shards
