// connection_shared: what every connection of one pool shares — the limits, the round clock, the
// request handler, the counters, the Date line, the header-field scratch, the body budget (and each
// turn class's share of it) and the free list — owned by the connection_pool and lent to each of its connections (so a connection
// knows the state it shares, not the pool that owns it).
//
// One per pool; on the pool's shard thread only.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>

#include "net/connection_stats.hpp"
#include "net/limits.hpp"
#include "net/request_handler.hpp"
#include "net/request_parser.hpp"
#include "net/response.hpp"
#include "shards/runtime/check.hpp"
#include "shards/runtime/round_clock.hpp"

namespace percore::net {

class connection_shared {
public:
    connection_shared(const runtime::round_clock& clock, request_handler& handler, connection_limits limits)
        : clock_(clock),
          handler_(handler),
          limits_(limits),
          class_share_(class_body_share_bytes(limits)),
          fields_(limits.head.max_header_fields + 1) {
        format_date_line(0, head_lines_);
        keep_alive_line_bytes_ = format_keep_alive_line(limits.idle_timeout, head_lines_ + date_line_bytes);
    }

    const connection_limits& limits() const { return limits_; }
    runtime::clock_type::time_point now() const { return clock_.now(); }
    request_handler& handler() { return handler_; }
    connection_stats& stats() { return stats_; }
    const connection_stats& stats() const { return stats_; }
    std::span<header_field> fields() { return fields_; }
    // The lines every answer's head carries after its status line: the Date line alone for an answer
    // that closes its connection, the Date and Keep-Alive lines for one that keeps it (one text, so
    // the Keep-Alive line costs an answer no instruction of its own).
    std::string_view date_line() const { return {head_lines_, date_line_bytes}; }
    std::string_view date_and_keep_alive_lines() const { return {head_lines_, date_line_bytes + keep_alive_line_bytes_}; }
    std::string_view head_lines(connection_header ch) const {
        return ch == connection_header::close ? date_line() : date_and_keep_alive_lines();
    }
    void set_date(std::int64_t unix_seconds) { format_date_line(unix_seconds, head_lines_); }
    bool shutting_down() const { return shutting_down_; }
    void begin_shutdown() { shutting_down_ = true; }

    // The body budget: bytes of request bodies held by all connections, at most body_budget_bytes;
    // those of one non-default turn class at most class_body_share_bytes (class 0 is not counted
    // apart). Classes holding nothing have no entry: the table is as large as the most classes
    // that ever held bodies at once, and allocates nothing once it has grown to that.
    bool body_fits(std::uint64_t bytes, std::uint32_t turn_class) const {
        if (stats_.body_bytes_in_flight.load(std::memory_order_relaxed) + bytes > limits_.body_budget_bytes) return false;
        return turn_class == 0 || class_body_bytes(turn_class) + bytes <= class_share_;
    }
    // body_fits() and the charge with one lookup of the class (a fit test and then the charge
    // looked it up twice: ~40 instructions of a PUT, callgrind).
    [[nodiscard]] bool reserve_body(std::uint64_t bytes, std::uint32_t turn_class) {
        const std::uint64_t in_flight = stats_.body_bytes_in_flight.load(std::memory_order_relaxed);
        if (in_flight + bytes > limits_.body_budget_bytes) return false;
        if (turn_class != 0) {
            auto [held, fresh] = class_bytes_.try_emplace(turn_class, 0);
            if (held->second + bytes > class_share_) {
                if (fresh) class_bytes_.erase(held);   // a class holding nothing has no entry
                return false;
            }
            held->second += bytes;
        }
        stats_.body_bytes_in_flight.store(in_flight + bytes, std::memory_order_relaxed);
        return true;
    }
    void release_body(std::uint64_t bytes, std::uint32_t turn_class) {
        std::uint64_t in_flight = stats_.body_bytes_in_flight.load(std::memory_order_relaxed);
        PERCORE_ASSERT(in_flight >= bytes);
        stats_.body_bytes_in_flight.store(in_flight - bytes, std::memory_order_relaxed);
        if (turn_class == 0) return;
        auto held = class_bytes_.find(turn_class);
        PERCORE_ASSERT(held != class_bytes_.end() && held->second >= bytes);
        held->second -= bytes;
        if (held->second == 0) class_bytes_.erase(held);
    }
    std::uint64_t class_body_bytes(std::uint32_t turn_class) const {
        auto held = class_bytes_.find(turn_class);
        return held == class_bytes_.end() ? 0 : held->second;
    }

    // Slots: a connection that closes gives its index back.
    std::size_t open_connections() const { return open_; }
    void opened() {
        ++open_;
        stats_.active.store(open_, std::memory_order_relaxed);
    }
    void released(std::uint32_t index) {
        PERCORE_ASSERT(open_ > 0);
        --open_;
        stats_.active.store(open_, std::memory_order_relaxed);
        free_.push_back(index);
    }
    std::vector<std::uint32_t>& free_slots() { return free_; }

private:
    const runtime::round_clock& clock_;
    request_handler& handler_;
    connection_limits limits_;
    std::uint64_t class_share_;   // class_body_share_bytes(limits_)
    boost::unordered_flat_map<std::uint32_t, std::uint64_t> class_bytes_;   // non-default classes' body bytes
    char head_lines_[date_line_bytes + max_keep_alive_line_bytes] = {};   // the Date line, then the Keep-Alive line
    std::size_t keep_alive_line_bytes_ = 0;
    std::vector<header_field> fields_;   // parse scratch shared by the pool's connections
    connection_stats stats_;
    std::vector<std::uint32_t> free_;
    std::size_t open_ = 0;
    bool shutting_down_ = false;
};

}  // namespace percore::net
