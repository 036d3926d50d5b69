// document_service: percore's HTTP API (SPEC §2, §5) on one shard — net's request_handler over a
// store_client. Reads are answered at once from the owners' snapshots; writes become tickets
// answered when their batch is durable; the server's own endpoints are admin_pages.
//
// Contract
// - One per shard, called by that shard's connection_pool on the shard's thread, inside a round.
// - Reads never hop: GET, HEAD and list pages are answered from the owners' current snapshots
//   (any shard's). Writes go to the owner's store through store_client::submit() and handle()
//   returns pending; the shard completes the ticket (write_ticket.hpp) with http_decisions'
//   write_answer().
// - Large values are sent by reference to the snapshot's document or its log segment (kept alive
//   with a reference until sent); small ones are copied into the output.
// - Apps (SPEC §7): admit() is admission_control's (apps/admission.hpp), before a request's body
//   is read: a follower's 421, the token, its reach, then the app's quotas; it gives the connection
//   the app's turn class. A write carries the app as its write_gate, so documents and bytes are
//   also checked, exactly, when the owner applies it. The administration (/_apps) is apps_admin's, deliveries deliveries_admin's.
// - Backups (GET /_backup, server admin only: access.hpp) are backup_streams'.
// - write_done() turns a write's result into its answer (null: a background write nobody waits for).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/apps/access.hpp"
#include "shards/apps/admission.hpp"
#include "shards/http/admin_pages.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/apps/apps_admin.hpp"
#include "shards/backup/backup_stream.hpp"
#include "shards/feed/change_feed.hpp"
#include "shards/deliveries/deliveries_admin.hpp"
#include "shards/feed/feed_waits.hpp"
#include "shards/base/store_client.hpp"
#include "store/snapshot.hpp"

namespace percore::shards {

struct shard_metrics;

// Values at least this large are sent by reference (retained document) instead of copied: a copy
// of 16 KiB costs about what the reference's atomic retain and release do.
inline constexpr std::size_t zero_copy_min_bytes = 16 * 1024;

class document_service final : public net::request_handler {
public:
    document_service(store_client& stores, const server_view& server, shard_metrics& metrics, app_registry& apps,
                     const auth_config& auth);

    net::admission admit(const net::request_head& head, net::response& res, net::answer_ticket ticket) override;
    result handle(net::request& req, net::response& res, net::answer_ticket ticket) override;
    void answered(net::method verb, int status, std::uint64_t latency_ns) override;
    void closed(net::answer_ticket ticket) override;

    // A write a connection's request submitted (write_ticket issuer::connection) was settled: its
    // answer, from the endpoint that submitted it (none: written again, answered later).
    // REQUIRES: that connection's request is pending on a write here.
    std::optional<net::simple_answer> write_done(const store::write_result& result);

    // The shard attaches the answers' sink (its pool), the server's feed signal and the backups'
    // captures (without them, in-process tests, feeds do not wait and backups are refused).
    void attach(net::answer_sink* sink, feed_signal* signal, backup_captures* captures, backup_source source);
    // --follow (SPEC §10): every write is answered 421 naming the primary; before the shards run.
    void set_follower(std::string_view primary_url) { admission_.set_follower(primary_url); }

    // The tasks this service's capabilities run in the shard's rounds (base/shard_task.hpp): the
    // change feeds that wait (SPEC §8), backups (SPEC §11), the erasure of deleted apps (SPEC §7).
    feed_waits& waits() { return waits_; }
    backup_streams& backups() { return backups_; }
    app_erasures& erasures() { return erasures_; }
    // At start, with this shard's recovered snapshot (the registry's apps, quotas, erasures).
    void recovered(const store::snapshot& snap, bool auth_on) { admin_api_.recovered(snap, auth_on); }

private:
    // Which endpoint a connection's pending write answers through (by connection index: one
    // request of a connection is pending at a time).
    enum class write_waiter : std::uint8_t { none, documents, apps, deliveries };
    result note_waiter(result how, net::answer_ticket ticket, write_waiter who);
    struct parsed_route {
        bool valid = false;
        net::answer_ticket ticket;
        const char* target = nullptr;
        std::size_t size = 0;
        net::route r;
    };
    // Valid until the next call.
    const net::route& route_of(const net::request_head& head, net::answer_ticket ticket, bool admitting);
    std::string_view list_prefix(const principal& who, const net::route& r, bool& empty) const;
    result list_changes(const net::request& req, net::response& res, const net::route& r, const principal& who,
                        net::answer_ticket ticket);
    result wait_for_changes(const net::route& r, feed_cursor pos, net::answer_ticket ticket, net::response& res);
    result replication_page(net::response& res, const net::route& r, net::answer_ticket ticket);
    result begin_backup(net::response& res, net::method verb, net::answer_ticket ticket);
    result refuse_feed(net::response& res, const feed_refusal& why, app_entry* app);
    result read_document(const net::request& req, net::response& res, const net::route& r);
    result write_document(net::request& req, net::response& res, const net::route& r, net::answer_ticket ticket);
    void send_document(net::response& res, const net::request_head& head, const store::snapshot& snap,
                       const store::document& doc);
    void send_value(net::response& res, const store::snapshot& snap, const store::document& doc,
                    std::uint64_t offset, std::uint64_t size);
    void list_documents(net::response& res, const net::route& r, std::string_view prefix);
    void build_key(std::string_view app, std::string_view key);

    store_client& stores_;
    shard_metrics& metrics_;
    app_registry& apps_;
    admin_pages admin_;
    access_control access_;
    admission_control admission_;
    app_erasures erasures_;
    apps_admin admin_api_;
    std::vector<write_waiter> waiters_;               // by connection index
    net::route_scratch scratch_;
    parsed_route parsed_;                             // the last route parsed into scratch_
    std::string key_;                                 // app '\0' key, reused
    std::string text_;                                // list bodies, reused
    std::vector<store::snapshot::cursor> cursors_;    // one per shard, for list pages
    change_feed feed_;                                // /_changes pages
    deliveries_admin deliveries_;                     // /_apps/{app}/deliveries (reads feed_)
    feed_waits waits_;                                // the feeds that wait for commits
    backup_streams backups_;                          // GET /_backup
};

}  // namespace percore::shards
