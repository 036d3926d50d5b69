// worker: one thread's share of the connections and its epoll loop.
//
// Contract
// - run_phase() runs on the calling thread until the phase is over: for a measuring phase, until
//   plan.end_ns and then until every request in flight is answered or drain_limit_ns has passed;
//   for a prepare phase, until every key has been written once (or prepare_limit_ns has passed).
// - Each phase starts with fresh connections and fresh counters (result() holds the last phase's);
//   the ETag table lives as long as the worker, so ETags learned while preparing are used later.
// - Errors from the OS are counted in stats, never thrown; only a failed epoll_create1 is returned.
// - The PUT body (--size bytes) and, for --style etcd, its base64 are made once, in the constructor.
#pragma once

#include "etag_table.hpp"
#include "http_client_connection.hpp"
#include "options.hpp"
#include "stats.hpp"

#include <expected>
#include <string>

namespace percore::load {

inline constexpr std::int64_t drain_limit_ns = 2'000'000'000;
inline constexpr std::int64_t prepare_limit_ns = 60'000'000'000;
inline constexpr int max_events_per_wait = 256;

class worker {
public:
    worker(const options& opts, std::uint32_t first_connection, std::uint32_t connection_count);

    std::expected<void, std::string> run_phase(const phase_plan& plan);
    const stats& result() const { return stats_; }

private:
    const options& opts_;
    std::uint32_t first_connection_;
    std::uint32_t connection_count_;
    etag_table etags_;
    std::string body_;
    std::string body_base64_;   // base64 of body_ for --style etcd; empty otherwise
    stats stats_;
};

}  // namespace percore::load
