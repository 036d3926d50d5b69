#include "net/connection_pool.hpp"

#include <cstring>

#include "shards/runtime/check.hpp"

namespace percore::net {

std::unique_ptr<char[]> request::take_body() {
    if (owned_ && *owned_) return std::move(*owned_);
    auto copy = std::make_unique_for_overwrite<char[]>(body_.size() ? body_.size() : 1);
    if (!body_.empty()) std::memcpy(copy.get(), body_.data(), body_.size());
    return copy;
}

connection_pool::connection_pool(const runtime::round_clock& clock, request_handler& handler, connection_limits limits)
    : clock_(clock), handler_(handler), limits_(limits), fields_(limits.head.max_header_fields + 1) {
    PERCORE_REQUIRES(limits.max_connections <= max_connections_limit);
    PERCORE_REQUIRES(limits.max_body_bytes <= max_body_limit);
    format_date_line(0, date_line_);
}

connection_pool::~connection_pool() { close_all(); }

void connection_pool::set_date(std::int64_t unix_seconds) { format_date_line(unix_seconds, date_line_); }

connection* connection_pool::open(transport& io) {
    if (full()) return nullptr;
    connection* c;
    if (!free_.empty()) {
        c = connections_[free_.back()].get();
        free_.pop_back();
    } else {
        connections_.push_back(std::make_unique<connection>(*this, static_cast<std::uint32_t>(connections_.size())));
        c = connections_.back().get();
    }
    ++open_;
    stats_.active.store(open_, std::memory_order_relaxed);
    c->open(io);
    return c;
}

void connection_pool::release(connection& c) {
    PERCORE_ASSERT(open_ > 0);
    --open_;
    stats_.active.store(open_, std::memory_order_relaxed);
    free_.push_back(c.index());
}

bool connection_pool::reserve_body(std::uint64_t bytes) {
    std::uint64_t in_flight = stats_.body_bytes_in_flight.load(std::memory_order_relaxed);
    if (in_flight + bytes > limits_.body_budget_bytes) return false;
    stats_.body_bytes_in_flight.store(in_flight + bytes, std::memory_order_relaxed);
    return true;
}

void connection_pool::release_body(std::uint64_t bytes) {
    std::uint64_t in_flight = stats_.body_bytes_in_flight.load(std::memory_order_relaxed);
    PERCORE_ASSERT(in_flight >= bytes);
    stats_.body_bytes_in_flight.store(in_flight - bytes, std::memory_order_relaxed);
}

void connection_pool::complete(answer_ticket ticket, const simple_answer& answer) {
    if (ticket.index >= connections_.size()) return;
    connection& c = *connections_[ticket.index];
    if (c.generation() != ticket.generation || c.state() != connection_state::pending) return;
    c.complete(answer);
}

void connection_pool::sweep() {
    const auto now = clock_.now();
    for (auto& owned : connections_) {
        connection& c = *owned;
        if (c.state() == connection_state::free || c.state() == connection_state::pending) continue;
        if (now >= c.deadline()) c.expire();
    }
}

void connection_pool::begin_shutdown() {
    shutting_down_ = true;
    for (auto& owned : connections_)
        if (owned->state() != connection_state::free) owned->stop_keep_alive();
}

void connection_pool::close_all() {
    for (auto& owned : connections_)
        if (owned->state() != connection_state::free) owned->close();
}

}  // namespace percore::net
