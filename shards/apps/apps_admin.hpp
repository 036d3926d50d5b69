// apps_admin: the administration of apps and tokens (SPEC §7's table) on one shard — catalog
// writes (catalog.hpp) sent to their owners like document writes, the registry brought up to date
// when they are durable, and the background erasure of deleted apps.
//
// Contract
// - One per shard, on that shard's thread; the document service calls it for /_apps routes after
//   access control allowed them (access.hpp).
// - A change (app created, quota set, app deleted, token made or revoked) is answered only after
//   its catalog record is durable and published, and after the registry shows it: from then on
//   every shard's next request sees it.
// - write_done(tag) answers the catalog writes this shard sent (null for any other tag), whether or
//   not the client is still connected: the registry follows the catalog either way.
// - DELETE /_apps/{app}: a "deleted" record is written first (the commit point: a restart resumes
//   from it), then this shard erases, a bounded number of writes in flight at a time, the app's
//   token records, its delivery records, its documents, its app record and last the "deleted"
//   record; only then may the name be created again (409 until then). Erasures are conditional on the version seen, so a
//   write that raced them is never lost silently: it is erased on the next pass.
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
#include "shards/apps/app_registry.hpp"
#include "shards/base/server_view.hpp"
#include "shards/base/store_client.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

// Erasing a deleted app: writes in flight at once per shard (a batch's worth; the erasure must
// never crowd the shard's own clients out of its batches).
inline constexpr std::size_t max_erase_writes_in_flight = 64;

class apps_admin {
public:
    apps_admin(store_client& stores, app_registry& apps, access_control& access, const server_view& server);

    net::request_handler::result handle(net::request& req, net::response& res, const net::route& r,
                                        const principal& who, net::answer_ticket ticket);
    // The answer to a catalog write of this shard (its side effects done), or nullopt when the tag
    // is not one of them.
    std::optional<net::simple_answer> write_done(std::uint64_t tag, const store::write_result& result);

    // A bounded step of background erasure; the writes it sent.
    std::size_t step();
    bool has_work() const { return !erasing_.empty() && server_.serving(); }

    // At start, on this shard's thread, with its recovered snapshot.
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
    };
    // The phases of an erasure, in order; past the last it is done.
    enum erase_phase : int { erase_tokens, erase_deliveries, erase_documents, erase_app_record, erase_deleted_record };
    struct erasure {
        explicit erasure(app_entry* a) : app(a) {}
        app_entry* app = nullptr;
        int phase = erase_tokens;
        std::string after;       // the scan's position (a store key)
        bool after_set = false;
        std::size_t in_flight = 0;
        bool rescan = false;     // an erase lost its precondition: scan the phase again
        bool sent_in_pass = false;
    };

    void app_info(net::response& res, app_entry& app);
    void list_apps(net::response& res);
    net::request_handler::result put_app(net::request& req, net::response& res, const net::route& r,
                                         net::answer_ticket ticket);
    net::request_handler::result delete_app(net::response& res, const net::route& r, net::answer_ticket ticket);
    net::request_handler::result make_token(net::request& req, net::response& res, const net::route& r,
                                            const principal& who, net::answer_ticket ticket);
    void list_tokens(net::response& res, const net::route& r);
    net::request_handler::result revoke_token(net::response& res, const net::route& r, net::answer_ticket ticket);
    void submit(std::string key, std::string value, store::precondition pre, pending_op op, net::answer_ticket ticket);
    std::uint64_t tag_of(net::answer_ticket ticket) const;

    net::simple_answer finish(pending_op& op, const store::write_result& result);
    bool erase_step(erasure& e);
    bool next_key(std::string_view prefix, erasure& e, std::string& key, std::uint64_t& version, bool tokens_of_app);
    void send_erase(erasure& e, const std::string& key, std::uint64_t version);

    store_client& stores_;
    app_registry& apps_;
    access_control& access_;
    const server_view& server_;
    std::vector<pending_op> pending_;
    std::vector<erasure> erasing_;
    std::vector<std::pair<std::uint64_t, app_entry*>> erase_tags_;  // background writes in flight
    std::uint32_t erase_sequence_ = 0;
    std::string text_;
    std::vector<store::snapshot::cursor> cursors_;
};

}  // namespace percore::shards
