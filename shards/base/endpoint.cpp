#include "shards/base/endpoint.hpp"

#include <algorithm>

#include "shards/base/write_ticket.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

// Only writing endpoints are noted as a connection's waiter (endpoint_table::dispatch), so a result
// reaching any other is a routing error.
std::optional<net::simple_answer> endpoint::write_done(const store::write_result&) {
    PERCORE_ASSERT(!"a write result reached an endpoint that submits no writes");
    return net::simple_answer{500, false, 0, "internal error"};
}

void endpoint_table::set(net::target_kind kind, endpoint& e) {
    const auto slot = static_cast<std::size_t>(kind);
    PERCORE_REQUIRES(slot < by_kind_.size() && by_kind_[slot] == nullptr);
    by_kind_[slot] = &e;
    writes_[slot] = e.submits_writes();
    if (e.submits_writes() && std::find(holders_.begin(), holders_.end(), &e) == holders_.end()) holders_.push_back(&e);
}

bool endpoint_table::complete() const {
    for (const endpoint* e : by_kind_)
        if (!e) return false;
    return true;
}

endpoint& endpoint_table::at(net::target_kind kind) const {
    const auto slot = static_cast<std::size_t>(kind);
    PERCORE_REQUIRES(slot < by_kind_.size() && by_kind_[slot] != nullptr);
    return *by_kind_[slot];
}

void endpoint_table::note_waiting(net::answer_ticket ticket, endpoint& e) {
    if (ticket.index >= waiting_.size()) waiting_.resize(ticket.index + 1);
    waiting_[ticket.index] = waiter{ticket.generation, &e};
}

std::optional<net::simple_answer> endpoint_table::write_done(const store::write_result& result) const {
    const write_ticket t = write_ticket::decode(result.tag);
    PERCORE_REQUIRES(t.from() == issuer::connection && t.answer.index < waiting_.size());
    const waiter& w = waiting_[t.answer.index];
    PERCORE_ASSERT(w.by != nullptr);
    if (w.generation == t.answer.generation) return w.by->write_done(result);
    for (endpoint* e : holders_)
        if (e->holds(result.tag)) return e->write_done(result);
    return std::nullopt;
}

}  // namespace percore::shards
