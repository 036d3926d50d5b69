// apps_admin: the administration of apps and tokens (SPEC §7's table) on one shard — catalog
// writes (catalog.hpp) sent to their owners like document writes, and the registry brought up to
// date when they are durable. A deleted app is erased by app_erasures (app_erasures.hpp).
//
// Contract
// - One per shard, on that shard's thread; the endpoint (base/endpoint.hpp) of the /_apps routes
//   (target_kind apps, app, app_tokens, app_token) and of /_replication/tokens (replication_tokens,
//   replication_token: tokens of no app, scope replicate, catalog.hpp), called after access control
//   allowed them (access.hpp).
// - An app's admin token with a prefix manages only tokens within it (SPEC §7, manages() in
//   access.hpp): it makes only those (403), lists only those, and revoking another is 403.
// - Per app at most max_app_tokens tokens (limits.hpp): a POST past them is 507
//   {"error":"limit: tokens"}; its place is reserved in the app's entry before the record is
//   written (app_entry::reserve), so concurrent POSTs on several shards never pass it together.
// - A change (app created, quota set, app deleted, token made or revoked) is answered only after
//   its catalog record is durable and published, and after the registry shows it: from then on
//   every shard's next request sees it.
// - write_done(result) answers a catalog write this shard sent for a connection (the route table
//   routes it here: write_ticket issuer::connection, this endpoint waiting), whether or not the
//   client is still connected: the registry follows the catalog either way.
// - DELETE /_apps/{app}: a "deleted" record is written first (the commit point: a restart resumes
//   from it), then this shard's app_erasures erases the app; only then may the name be created
//   again (409 until then).
// - recovered(): at start, this shard's slice of the catalog and of the documents goes into the
//   registry (apps, quotas, usage; deletions to resume).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/apps/access.hpp"
#include "shards/apps/app_erasures.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/base/endpoint.hpp"
#include "shards/base/server_view.hpp"
#include "shards/base/store_client.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

class apps_admin final : public endpoint {
public:
    apps_admin(store_client& stores, app_registry& apps, access_control& access, const server_view& server,
               app_erasures& erasures);

    // REQUIRES: on this shard's thread; r.kind is apps, app, app_tokens or app_token.
    result handle(net::request& req, net::response& res, const net::route& r, const principal& who,
                  net::answer_ticket ticket) override;
    bool submits_writes() const override { return true; }
    bool holds(std::uint64_t tag) const override;
    // The answer to a catalog write this shard sent for a connection (its side effects done).
    // REQUIRES: on this shard's thread; the write is one of this endpoint's (its request is
    // pending here).
    std::optional<net::simple_answer> write_done(const store::write_result& result) override;

    // At start, with this shard's recovered snapshot. REQUIRES: on this shard's thread.
    void recovered(const store::snapshot& snap, bool auth_on);

private:
    enum class op_kind : std::uint8_t { put_app, delete_app, make_token, revoke_token };
    struct pending_op {
        std::uint64_t tag = 0;
        op_kind kind = op_kind::put_app;
        app_entry* app = nullptr;
        app_quota quota;
        std::string id;
        std::string token;  // make_token: shown once, when durable
        std::string by;     // who asked (acting_as), for the change's log line
    };
    // The change's one log line once it is durable (SPEC §7's administration; never a secret).
    void log_change(const pending_op& op, const store::write_result& result) const;
    void app_info(net::response& res, app_entry& app);
    void list_apps(net::response& res);
    net::request_handler::result put_app(net::request& req, net::response& res, const net::route& r,
                                         net::answer_ticket ticket);
    net::request_handler::result delete_app(net::response& res, const net::route& r, net::answer_ticket ticket);
    net::request_handler::result make_token(net::request& req, net::response& res, const net::route& r,
                                            const principal& who, net::answer_ticket ticket);
    void list_tokens(net::response& res, const net::route& r, const principal& who);
    net::request_handler::result revoke_token(net::response& res, const net::route& r, const principal& who,
                                              net::answer_ticket ticket);
    result replication_tokens(net::request& req, net::response& res, const net::route& r, const principal& who,
                              net::answer_ticket ticket);
    void submit(std::string key, std::string value, store::precondition pre, pending_op op, net::answer_ticket ticket);
    app_entry* catalog_app(std::string_view name, std::uint64_t& skipped);
    void count_recovered_token(std::string_view value);
    void count_recovered_delivery(std::string_view app_and_name);
    std::uint64_t tag_of(net::answer_ticket ticket) const;

    net::simple_answer finish(pending_op& op, const store::write_result& result);

    store_client& stores_;
    app_registry& apps_;
    access_control& access_;
    const server_view& server_;
    std::vector<pending_op> pending_;
    app_erasures& erasures_;
    std::string text_;
};

}  // namespace percore::shards
