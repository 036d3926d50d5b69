// metrics: one shard's counters, written by that shard's thread only and read by any shard that
// answers /_metrics or /_stats.
//
// Single writer: add() is a relaxed load and store (no locked instruction on the hot path);
// readers use relaxed loads and may see a slightly stale value, never a torn one.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/request_parser.hpp"

namespace percore::shards {

using counter = std::atomic<std::uint64_t>;

inline void add(counter& c, std::uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline std::uint64_t read(const counter& c) { return c.load(std::memory_order_relaxed); }

inline constexpr std::array<std::string_view, 5> metric_methods = {"GET", "HEAD", "PUT", "DELETE", "OTHER"};
inline constexpr std::array<int, 26> metric_statuses = {200, 201, 204, 206, 304, 400, 401, 403, 404, 405, 408, 409, 411,
                                                        412, 413, 414, 416, 417, 429, 431, 500, 501, 503, 505, 507, 0};
// Upper bounds in seconds; the last bucket is +Inf.
inline constexpr std::array<double, 14> latency_bounds_seconds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                                  0.005,  0.01,    0.025,  0.05,  0.1,
                                                                  0.25,   0.5,     1,      2.5};
inline constexpr std::array<std::uint64_t, 8> batch_size_bounds = {1, 2, 4, 8, 16, 32, 64, 128};

// Why a delivery's attempt failed (percore_delivery_failures_total{cause}): the receiver answered
// something else than a 2xx ("status"), or the exchange ended without an answer (net's client_error
// names), or it could not start ("other": no crypto module, an unusable url, ca_file or host).
inline constexpr std::array<std::string_view, 8> delivery_failure_causes = {
    "status", "timed_out", "connect_failed", "tls_failed", "closed_early", "malformed", "too_large", "other"};

// Where an answer is counted (every answer is: inline, and the status by a table rather than a
// search, they cost ~10 instructions of a request less, callgrind).
inline std::size_t method_index(net::method m) {
    switch (m) {
    case net::method::get: return 0;
    case net::method::head: return 1;
    case net::method::put: return 2;
    case net::method::del: return 3;
    default: return 4;
    }
}
// The statuses a table covers: every status code is 100-599 (RFC 9110 §15).
inline constexpr int first_counted_status = 100;
inline constexpr int counted_status_span = 500;
inline constexpr std::array<std::uint8_t, counted_status_span> status_slots = [] {
    std::array<std::uint8_t, counted_status_span> slots{};
    slots.fill(static_cast<std::uint8_t>(metric_statuses.size() - 1));
    for (std::size_t i = 0; i + 1 < metric_statuses.size(); ++i)
        slots[static_cast<std::size_t>(metric_statuses[i] - first_counted_status)] = static_cast<std::uint8_t>(i);
    return slots;
}();
// Unknown statuses share the last slot.
inline std::size_t status_index(int status) {
    const auto at = static_cast<unsigned>(status - first_counted_status);
    return at < counted_status_span ? status_slots[at] : metric_statuses.size() - 1;
}
// latency_bounds_seconds in whole nanoseconds, rounded down: for a whole number of nanoseconds n,
// n > bound * 1e9 exactly when n > floor(bound * 1e9), so the buckets are the same as comparing in
// seconds, without a conversion and a multiplication per bound.
inline constexpr std::array<std::uint64_t, latency_bounds_seconds.size()> latency_bounds_ns = [] {
    std::array<std::uint64_t, latency_bounds_seconds.size()> ns{};
    for (std::size_t i = 0; i < ns.size(); ++i) ns[i] = static_cast<std::uint64_t>(latency_bounds_seconds[i] * 1e9);
    return ns;
}();

template <std::size_t N>
struct histogram {
    std::array<counter, N + 1> buckets{};  // last: above every bound
    counter count{0};
    counter sum{0};  // nanoseconds for latencies, items for sizes
};

struct shard_metrics {
    std::array<std::array<counter, metric_statuses.size()>, metric_methods.size()> requests{};
    std::array<histogram<latency_bounds_seconds.size()>, metric_methods.size()> latency_ns;  // by method_index
    histogram<batch_size_bounds.size()> batch_writes;
    counter batch_bytes{0};
    histogram<latency_bounds_seconds.size()> sync_ns;  // durable store only; in memory there is no sync
    counter messages_sent{0};
    counter messages_received{0};
    counter wakeups_sent{0};
    counter remote_writes{0};
    // the change feed (SPEC §8)
    counter feeds_open{0};             // long polls and streams waiting on this shard (a gauge)
    counter feed_changes_sent{0};      // changes listed in pages, long polls and streams
    counter feed_cursors_expired{0};   // cursors answered 410
    // --replication sync (SPEC §12): the writes of this shard's store answered once a follower had
    // them, those answered 503 past --sync-timeout, those held now, and how far the followers'
    // acknowledgement is behind the shard's newest durable version (gauges)
    counter sync_acknowledged{0};
    counter sync_timeouts{0};
    counter sync_held{0};
    counter sync_ack_lag{0};
    // deliveries (SPEC §9) this shard ran
    counter delivery_attempts{0};
    counter delivery_batches_delivered{0};  // answered 2xx
    counter delivery_changes_sent{0};       // in delivered batches
    std::array<counter, delivery_failure_causes.size()> delivery_failures{};  // by delivery_failure_causes
    std::atomic<double> recovery_seconds{0};

    void record_request(net::method m, int status, std::uint64_t latency_ns);
    void record_batch(std::uint64_t writes, std::uint64_t bytes);
    void record_sync(std::uint64_t duration_ns);
};

}  // namespace percore::shards
