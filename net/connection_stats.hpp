// connection_stats: one shard's connection counters, written by that shard's thread (relaxed
// load + store: a single writer needs no locked instruction) and read by any thread that renders
// /_metrics or /_stats.
#pragma once

#include <atomic>
#include <cstdint>

namespace percore::net {

struct connection_stats {
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> refused{0};
    std::atomic<std::uint64_t> active{0};
    std::atomic<std::uint64_t> bytes_in{0};
    std::atomic<std::uint64_t> bytes_out{0};
    std::atomic<std::uint64_t> body_bytes_in_flight{0};
    std::atomic<std::uint64_t> tls_handshake_failures{0};
    std::atomic<std::uint64_t> reads_paused{0};   // reading stopped: unsent answers past their bound
    std::atomic<std::uint64_t> streams_cut_off{0};   // a stream's unsent bytes would have passed their bound
};

inline void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace percore::net
