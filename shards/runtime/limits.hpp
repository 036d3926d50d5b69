// runtime limits: the single source of the shard runtime's bounds and defaults.
#pragma once

#include <chrono>
#include <cstddef>

namespace percore::runtime {

// Shards in one process. A write's ticket names its origin shard in origin_bits
// (shards/write_ticket.hpp ties the two), and the cross-shard queues are max_shards² at most.
inline constexpr unsigned max_shards = 1024;
// Messages per ordered pair of shards before the sender keeps the rest in its own backlog:
// 4096 × 32 B = 128 KiB per pair; at 8 shards, 56 pairs hold 7 MiB when full.
inline constexpr std::size_t queue_capacity_messages = 4096;
// Messages drained from one queue per round, so one busy sender cannot hold a shard's round.
inline constexpr std::size_t drain_batch_messages = 256;
// The loop's tick: deadlines (idle, linger, body rate) are checked this often, and the Date line
// refreshed; a shard with nothing to do still wakes 4 times a second.
inline constexpr std::chrono::milliseconds tick_interval{250};

static_assert(drain_batch_messages <= queue_capacity_messages);

}  // namespace percore::runtime
