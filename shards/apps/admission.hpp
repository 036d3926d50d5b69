// admission: whether a request may go on, decided from its head before any byte of its body is
// read or budgeted (SPEC §7; net/request_handler.hpp's admit()). Five policies, in this order:
//   1. a board that is not an acknowledging primary refuses every write, whoever asks: a follower
//      421 naming its primary (SPEC §10), a fenced or undecided board 503 with Retry-After (§12);
//   2. authentication: the bearer token (401; access.hpp);
//   3. authorization: what the principal may reach (403, or 404 for an app that does not exist);
//   4. the app's `connections` quota (429 with Retry-After: 1);
//   5. the app's requests per second (429 with Retry-After in seconds), then a document write's
//      max_document_bytes by its Content-Length (413) and the documents and bytes it would add to
//      its owner's current snapshot (507).
// Documents, lists and feeds count against their app (3-5); an admitted one gets the app's turn
// class. /_health and malformed targets are always admitted (answered by their endpoint).
//
// Contract
// - One per shard, owned by that shard's document service, on that shard's thread inside a round.
//   It uses the service's access_control and the server's app registry (owns neither), and reads
//   the owners' snapshots through store_client (no hop).
// - A connection counts against one app's connections at a time: bound by its first admitted
//   request of that app, moved by a request of another app, released by closed(). The server
//   admin counts against none, and is not rate-limited.
// - With auth off, an app is made by its first PUT of a document (507 when the registry is full).
// - set_role(): before the shards run; without it the board is a primary that never fences.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/apps/access.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/base/board_role.hpp"
#include "shards/base/store_client.hpp"

namespace percore::shards {

class admission_control {
public:
    admission_control(store_client& stores, app_registry& apps, access_control& access);

    // The five policies above; a refusal is written whole into `res`.
    // REQUIRES: on this shard's thread; `r` is head.target's route.
    net::admission admit(const net::request_head& head, const net::route& r, net::response& res,
                         net::answer_ticket ticket);
    // The registry's entry of `name` (null: none): the app this connection is bound to when it is
    // that one (a keep-alive client of one app pays no hash), else a lookup.
    // REQUIRES: on this shard's thread.
    app_entry* app_named(std::string_view name, net::answer_ticket ticket) const;
    // The board's role (board_role.hpp), read on every write; it outlives this.
    // REQUIRES: before the shards run (on no shard's thread).
    void set_role(const board_role& role);
    // The connection ended: it no longer counts against its app. REQUIRES: on this shard's thread.
    void closed(net::answer_ticket ticket);

private:
    struct binding {  // the app a connection counts against (its `connections` quota)
        std::uint32_t generation = 0;
        app_entry* app = nullptr;
    };
    app_entry* implicit_app(std::string_view name, net::response& res);
    bool within_request_quotas(app_entry& app, net::answer_ticket ticket, net::response& res);
    // Whether a write is refused because this board is not an acknowledging primary (then answered).
    bool refuse_write_here(net::response& res);
    bool refuse_for_quota(const net::request_head& head, const net::route& r, app_entry& app, net::response& res);
    bool bind_connection(app_entry& app, net::answer_ticket ticket);
    // Whether the connection counts against `app` already: bind_connection()'s common case, asked
    // by every admitted request of an app (inline: the call cost ~25 instructions a request, callgrind).
    bool bound_to(const app_entry& app, net::answer_ticket ticket) const {
        return ticket.index < bindings_.size() && bindings_[ticket.index].generation == ticket.generation &&
               bindings_[ticket.index].app == &app;
    }
    void refuse(net::response& res, const refusal& why, app_entry* app);
    void note_auth_failure(const refusal& why);

    store_client& stores_;
    app_registry& apps_;
    access_control& access_;
    const unsigned self_;            // this shard
    std::vector<binding> bindings_;  // by connection index
    std::string key_;                // app '\0' key, reused
    const board_role* role_ = nullptr;  // null: a primary that never fences (unit tests)
    std::string refusal_;            // a 421's body, built when one is answered
    // Authentication failures (401) since the last log line about them; at most one such line a
    // second per shard (auth_log_interval_ns), so a token-guessing flood cannot flood the log.
    std::uint64_t auth_failures_unlogged_ = 0;
    std::int64_t auth_logged_at_ns_ = 0;
};

inline constexpr std::int64_t auth_log_interval_ns = 1'000'000'000;

}  // namespace percore::shards
