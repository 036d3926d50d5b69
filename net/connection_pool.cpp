#include "net/connection_pool.hpp"

#include <cstring>
#include <utility>

#include "shards/runtime/check.hpp"

namespace percore::net {

std::unique_ptr<char[]> request::take_body() {
    if (owned_ && *owned_) return std::move(*owned_);
    auto copy = std::make_unique_for_overwrite<char[]>(body_.size() ? body_.size() : 1);
    if (!body_.empty()) std::memcpy(copy.get(), body_.data(), body_.size());
    return copy;
}

connection_pool::connection_pool(const runtime::round_clock& clock, request_handler& handler, connection_limits limits)
    : shared_(clock, handler, limits) {
    PERCORE_REQUIRES(limits.max_connections <= max_connections_limit);
    PERCORE_REQUIRES(limits.max_body_bytes <= max_body_limit);
    PERCORE_REQUIRES(limits.class_body_share_percent > 0 && limits.class_body_share_percent <= 100);
}

connection_pool::~connection_pool() { close_all(); }

connection* connection_pool::open(transport& io) {
    if (full()) return nullptr;
    connection* c;
    auto& free = shared_.free_slots();
    if (!free.empty()) {
        c = connections_[free.back()].get();
        free.pop_back();
    } else {
        connections_.push_back(std::make_unique<connection>(shared_, static_cast<std::uint32_t>(connections_.size())));
        c = connections_.back().get();
    }
    shared_.opened();
    c->open(io);
    return c;
}

connection* connection_pool::find(answer_ticket ticket, connection_state state) {
    return const_cast<connection*>(std::as_const(*this).find(ticket, state));
}

const connection* connection_pool::find(answer_ticket ticket, connection_state state) const {
    if (ticket.index >= connections_.size()) return nullptr;
    const connection& c = *connections_[ticket.index];
    if (c.generation() != ticket.generation || c.state() != state) return nullptr;
    return &c;
}

void connection_pool::complete(answer_ticket ticket, const simple_answer& answer) {
    if (connection* c = find(ticket, connection_state::pending)) c->complete(answer);
}

stream_status connection_pool::stream_begin(answer_ticket ticket, int status, std::string_view content_type,
                                            std::string_view extra_name, std::string_view extra_value) {
    connection* c = find(ticket, connection_state::pending);
    return c ? c->stream_begin(status, content_type, extra_name, extra_value) : stream_status::gone;
}

stream_status connection_pool::stream_write(answer_ticket ticket, std::string_view bytes) {
    connection* c = find(ticket, connection_state::streaming);
    return c ? c->stream_write(bytes) : stream_status::gone;
}

void connection_pool::stream_end(answer_ticket ticket) {
    if (connection* c = find(ticket, connection_state::streaming)) c->stream_end();
}

void connection_pool::stream_abort(answer_ticket ticket) {
    if (connection* c = find(ticket, connection_state::streaming)) c->close();
}

std::size_t connection_pool::stream_room(answer_ticket ticket) const {
    const connection* c = find(ticket, connection_state::streaming);
    return c ? c->stream_room() : 0;
}

void connection_pool::sweep() {
    const auto now = shared_.now();
    for (auto& owned : connections_) {
        connection& c = *owned;
        if (c.state() == connection_state::free || c.state() == connection_state::pending) continue;
        if (now >= c.deadline()) c.expire();
    }
}

void connection_pool::begin_shutdown() {
    shared_.begin_shutdown();
    for (auto& owned : connections_)
        if (owned->state() != connection_state::free) owned->stop_keep_alive();
}

void connection_pool::close_all() {
    for (auto& owned : connections_)
        if (owned->state() != connection_state::free) owned->close();
}

}  // namespace percore::net
