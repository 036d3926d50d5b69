// document_api: percore's HTTP API (SPEC §2, §5) on one shard: turns requests into snapshot reads
// and writes for the owning shard, and answers.
//
// Contract
// - One per shard, called by that shard's connection_pool on the shard's thread.
// - Reads never hop: GET, HEAD and list pages are answered at once from the owners' current
//   snapshots (any shard's). Writes go to the owner's store (directly when this shard owns the
//   key, else over the queue) and are answered when their batch is published: handle() returns
//   pending and the shard completes the ticket.
// - Large values are sent by reference to the snapshot's document (kept alive with a reference),
//   small ones are copied into the output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/connection_pool.hpp"
#include "net/route.hpp"
#include "store/snapshot.hpp"

namespace percore::shards {

class shard;
class shard_group;
struct shard_metrics;

inline constexpr std::size_t zero_copy_min_bytes = 16 * 1024;

// Owner tags carry the origin shard and the connection ticket: origin(10) index(22) generation(32).
std::uint64_t make_tag(unsigned origin, net::answer_ticket ticket);
unsigned tag_origin(std::uint64_t tag);
net::answer_ticket tag_ticket(std::uint64_t tag);

class document_api final : public net::request_handler {
public:
    document_api(shard_group& group, shard& self, shard_metrics& metrics);

    result handle(net::request& req, net::response& res, net::answer_ticket ticket) override;
    void answered(net::method verb, int status, std::uint64_t latency_ns) override;

private:
    result get_document(const net::request& req, net::response& res, const net::route& r);
    result write_document(net::request& req, net::response& res, const net::route& r, net::answer_ticket ticket);
    void list_documents(net::response& res, const net::route& r);
    void health(net::response& res);
    void metrics_text(net::response& res);
    void stats_json(net::response& res);
    void build_key(std::string_view app, std::string_view key);

    shard_group& group_;
    shard& self_;
    shard_metrics& metrics_;
    net::route_scratch scratch_;
    std::string key_;                                 // app '\0' key, reused
    std::string text_;                                // list, metrics and stats bodies, reused
    std::vector<store::snapshot::cursor> cursors_;    // one per shard, for list pages
};

}  // namespace percore::shards
