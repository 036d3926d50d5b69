// shards limits: where the layers' limits meet. The defaults of `percore serve` are the layers'
// own (net/limits.hpp, store/limits.hpp, shards/runtime/limits.hpp); this header ties the bounds
// that must agree across layers, so that changing one without the other fails to compile.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net/limits.hpp"
#include "shards/runtime/limits.hpp"
#include "shards/write_ticket.hpp"
#include "store/limits.hpp"

namespace percore::shards {

// --shards: at most this many (256 pinned threads is past any board; the runtime could name 1024).
inline constexpr unsigned max_shards = 256;

// The change feed (SPEC §8, shards/feed_waits.hpp). Waiting feeds (long polls and streams) one shard
// holds: each costs its connection (already bounded by --max-connections) and ~200 bytes here plus
// its cursor (17 bytes a shard); 10,000 is --max-connections' default, so the bound is there to
// name the memory (about 2-4 MiB a shard at most), not to refuse clients a shard would take anyway.
inline constexpr std::size_t max_feed_waits_per_shard = 10000;
// Changes a stream writes per page and round: ~200 bytes each, 100 is ~20 KiB, well inside the
// 256 KiB a stream may leave unsent (net/limits.hpp max_stream_unsent_bytes).
inline constexpr std::uint32_t max_feed_page_changes = 100;
static_assert(max_shards <= runtime::max_shards);

// --max-body: a body becomes one log record's value.
inline constexpr std::uint64_t max_body_limit = net::max_body_limit;
static_assert(max_body_limit <= store::max_value_bytes, "every accepted body fits one record");

// --max-connections: every connection slot must fit an answer ticket's index field.
inline constexpr std::uint64_t max_connections_limit = net::max_connections_limit;
static_assert(max_connections_limit < (std::uint64_t{1} << write_ticket::index_bits),
              "the top index is left to the server's own background writes (write_ticket::background_index)");

// Defaults: the layers' own.
inline constexpr std::uint64_t default_max_body_bytes = net::default_connection_limits.max_body_bytes;
inline constexpr std::uint64_t default_body_budget_bytes = net::default_connection_limits.body_budget_bytes;
inline constexpr std::uint64_t default_max_connections = net::default_connection_limits.max_connections;
inline constexpr double default_idle_timeout_seconds =
    static_cast<double>(net::default_connection_limits.idle_timeout.count()) / 1000.0;
inline constexpr std::uint64_t default_changes_retention_seconds = store::default_changes_retention_seconds;
inline constexpr std::uint64_t max_changes_retention_seconds = 365ull * 86400;  // a year; the message says 31536000
static_assert(max_changes_retention_seconds == 31536000);
inline constexpr std::uint64_t default_segment_bytes = store::default_segment_target_bytes;
static_assert(default_body_budget_bytes >= default_max_body_bytes, "one largest body fits the budget");

}  // namespace percore::shards
