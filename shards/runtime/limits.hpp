// runtime limits: the single source of the shard runtime's bounds and defaults.
#pragma once

#include <chrono>
#include <cstddef>

namespace percore::runtime {

// Shards in one process. A write's ticket names its origin shard in origin_bits
// (shards/base/write_ticket.hpp ties the two), and the cross-shard queues are max_shards² at most.
inline constexpr unsigned max_shards = 1024;
// Messages per ordered pair of shards before the sender keeps the rest in its own backlog:
// 4096 × 32 B = 128 KiB per pair; at 8 shards, 56 pairs hold 7 MiB when full.
inline constexpr std::size_t queue_capacity_messages = 4096;
// Messages drained from one queue per round, so one busy sender cannot hold a shard's round.
inline constexpr std::size_t drain_batch_messages = 256;
// The loop's tick: deadlines (idle, linger, body rate) are checked this often, and the Date line
// refreshed; a shard with nothing to do still wakes 4 times a second.
inline constexpr std::chrono::milliseconds tick_interval{250};

// Fair turns (poller): the connection sockets' readiness is served one connection turn at a time,
// round robin over the turn classes that have ready connections.
// Events taken per epoll_wait: 256 × 12 B on the stack (as before fair turns).
inline constexpr int max_poll_events = 256;
// Connection turns per round: what is left stays queued for the next round (the loop does not sleep
// while turns are queued). 256 is what one epoll_wait handed a round before fair turns, so a
// one-class shard does as much per round as it did.
inline constexpr std::size_t max_turns_per_round = 256;
// After this many turns, epoll_wait(0) again, so that a connection of another class that became
// ready meanwhile waits behind at most this many turns, not behind a whole backlog. 8 turns of
// small requests are ~20-40 µs; the re-poll costs one syscall (~0.3 µs) per 8 turns, and none in a
// round whose queue empties sooner.
inline constexpr std::size_t turns_between_polls = 8;
// Classes with a queue of their own at once: 64 × 24 B in the poller. Classes beyond share one more
// queue (its turns are fair against every other class; inside it, first come first served).
inline constexpr std::size_t max_turn_queues = 64;

static_assert(drain_batch_messages <= queue_capacity_messages);
static_assert(turns_between_polls > 0 && turns_between_polls <= max_turns_per_round);
static_assert(max_turn_queues > 0 && max_turn_queues < 0xffff, "queue indices fit 16 bits");

}  // namespace percore::runtime
