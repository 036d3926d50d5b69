// endpoint: what serves one family of HTTP targets for the document service's route table
// (http/document_service.hpp) — the documents and their lists, the change feed, a backup, the
// administration of apps and of deliveries, the server's own pages. Each lives with its capability.
//
// Contract
// - One of each per shard, owned by that shard's composition, called on the shard's thread inside
//   a round, after admission (apps/admission.hpp) admitted the request and access control found
//   its principal (apps/access.hpp).
// - handle(req, res, route, who, ticket): a request whose route's kind the table gave this
//   endpoint. It answers into `res` (result::answered), or returns result::pending and answers
//   later: through the shard's answer sink (a waiting feed, a backup: net/answer_sink.hpp), or
//   with the result of a write it submitted for the connection, tagged write_ticket{shard, ticket}.
// - submits_writes(): true for an endpoint that submits writes for connections; the table asks it
//   once, when it is filled. write_done(result) then gets the result of each such write, on the
//   same shard: its answer, or none when the endpoint wrote again (the connection stays pending
//   and write_done comes again). The default (an endpoint that submits none) is a failed check.
//
// endpoint_table: the route table — the endpoint of every target_kind, filled once, and per
// connection the writing endpoint whose write it waits for. One per shard, on its thread.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <vector>

#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/runtime/check.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

struct principal;  // apps/access.hpp: who a request comes from

class endpoint {
public:
    using result = net::request_handler::result;

    virtual result handle(net::request& req, net::response& res, const net::route& r, const principal& who,
                          net::answer_ticket ticket) = 0;
    virtual bool submits_writes() const { return false; }
    // REQUIRES: submits_writes(), and the write is one this endpoint submitted for a connection.
    virtual std::optional<net::simple_answer> write_done(const store::write_result& result);
    // Whether the write `tag` is one this endpoint submitted and still waits for (one whose result
    // carries side effects beyond the answer: apps_admin, deliveries_admin). Asked only for the
    // result of a connection that is gone and whose slot another connection took meanwhile.
    virtual bool holds(std::uint64_t) const { return false; }

protected:
    ~endpoint() = default;
};

class endpoint_table {
public:
    // REQUIRES: `kind` has no endpoint yet.
    void set(net::target_kind kind, endpoint& e);
    // Whether every target_kind has its endpoint.
    bool complete() const;
    // REQUIRES: set(kind, …) was called.
    endpoint& at(net::target_kind kind) const;

    // The request to its route's endpoint; a pending answer of a writing endpoint is noted as the
    // one the connection (ticket.index: one request of a connection is pending at a time) waits for.
    // REQUIRES: complete().
    endpoint::result dispatch(net::request& req, net::response& res, const net::route& r, const principal& who,
                              net::answer_ticket ticket) {
        const auto kind = static_cast<std::size_t>(r.kind);
        PERCORE_REQUIRES(by_kind_[kind] != nullptr);
        const endpoint::result how = by_kind_[kind]->handle(req, res, r, who, ticket);
        if (how == endpoint::result::pending && writes_[kind]) note_waiting(ticket, *by_kind_[kind]);
        return how;
    }
    // A write a connection's request submitted (write_ticket issuer::connection) was settled: its
    // answer, from the endpoint that submitted it (none: written again, answered later, or its
    // connection is gone). The waiter is noted by connection slot and generation: a result whose
    // connection ended and whose slot was taken by another goes to the endpoint that holds() its
    // tag (its side effects still happen), or nowhere (a document write: nobody waits).
    // REQUIRES: that connection's request was pending on a write of an endpoint of this table.
    std::optional<net::simple_answer> write_done(const store::write_result& result) const;

private:
    void note_waiting(net::answer_ticket ticket, endpoint& e);

    std::array<endpoint*, net::target_kind_count> by_kind_{};
    std::array<bool, net::target_kind_count> writes_{};  // by kind: its endpoint submits_writes()
    struct waiter {
        std::uint32_t generation = 0;
        endpoint* by = nullptr;
    };
    std::vector<waiter> waiting_;                        // by connection index
    std::vector<endpoint*> holders_;                     // endpoints whose writes have side effects
};

}  // namespace percore::shards
