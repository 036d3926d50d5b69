// shards limits: where the layers' limits meet. The defaults of `percore serve` are the layers'
// own (net/limits.hpp, store/limits.hpp, shards/runtime/limits.hpp); this header ties the bounds
// that must agree across layers, so that changing one without the other fails to compile.
#pragma once

#include "net/limits.hpp"
#include "shards/runtime/limits.hpp"
#include "shards/write_ticket.hpp"
#include "store/limits.hpp"

namespace percore::shards {

// --shards: at most this many (256 pinned threads is past any board; the runtime could name 1024).
inline constexpr unsigned max_shards = 256;
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
inline constexpr std::uint64_t default_segment_bytes = store::default_segment_target_bytes;
static_assert(default_body_budget_bytes >= default_max_body_bytes, "one largest body fits the budget");

}  // namespace percore::shards
