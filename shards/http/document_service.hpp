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
// - Apps (SPEC §7): admit() runs before a request's body is read: the token (access.hpp), then the
//   app's quotas — connections, requests per second, max_document_bytes, and documents and bytes
//   estimated from the owner's snapshot — and gives the connection the app's turn class. A write
//   carries the app as its write_gate, so documents and bytes are also checked, exactly, when the
//   owner applies it. The administration (/_apps) is apps_admin's, deliveries deliveries_admin's.
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

    std::optional<net::simple_answer> write_done(std::uint64_t tag, const store::write_result& result);
    apps_admin& administration() { return admin_api_; }

    // The change feeds that wait (SPEC §8): the shard attaches its pool and the server's signal,
    // asks feeds_news() before it sleeps, and runs feeds_step() every round.
    void attach_feeds(feed_sink* sink, feed_signal* signal) { waits_.attach(sink, signal); }
    // --follow (SPEC §10): every write is answered 421 naming the primary; before the shards run.
    void set_follower(std::string_view primary_url);
    bool feeds_news() const { return waits_.news(); }
    std::size_t feeds_step();
    void end_feeds() { waits_.end_all(); }

    // Backups (SPEC §11, backup_stream.hpp): the shard attaches itself and the data directory, hands
    // over the captures other shards send, asks backups_ready() before it sleeps, runs
    // backups_step() every round, sleeps no later than backups_wake_by() (their pace), and ends
    // them all when it stops.
    void attach_backups(backup_host* host, backup_source source) { backups_.attach(host, std::move(source)); }
    void backup_captured(std::uint64_t tag, std::unique_ptr<backup_part> part) { backups_.captured(tag, std::move(part)); }
    bool backups_ready() const { return backups_.ready(); }
    std::chrono::steady_clock::time_point backups_wake_by() const { return backups_.wake_by(); }
    std::size_t backups_step() { return backups_.step(); }
    void end_backups() { backups_.end_all(); }

private:
    struct binding {  // the app a connection counts against (its `connections` quota)
        std::uint32_t generation = 0;
        app_entry* app = nullptr;
    };
    struct parsed_route {
        bool valid = false;
        net::answer_ticket ticket;
        const char* target = nullptr;
        std::size_t size = 0;
        net::route r;
    };
    // Valid until the next call.
    const net::route& route_of(const net::request_head& head, net::answer_ticket ticket, bool admitting);
    app_entry* app_named(std::string_view name, net::answer_ticket ticket) const;
    bool refuse_for_quota(const net::request_head& head, const net::route& r, app_entry& app, net::response& res);
    bool bind_connection(app_entry& app, net::answer_ticket ticket);
    void unbind(net::answer_ticket ticket);
    void refuse(net::response& res, const refusal& why, app_entry* app);
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
    apps_admin admin_api_;
    std::vector<binding> bindings_;                   // by connection index
    net::route_scratch scratch_;
    parsed_route parsed_;                             // the last route parsed into scratch_
    std::string key_;                                 // app '\0' key, reused
    std::string text_;                                // list bodies, reused
    std::vector<store::snapshot::cursor> cursors_;    // one per shard, for list pages
    change_feed feed_;                                // /_changes pages
    deliveries_admin deliveries_;                     // /_apps/{app}/deliveries (reads feed_)
    feed_waits waits_;                                // the feeds that wait for commits
    backup_streams backups_;                          // GET /_backup
    std::string follower_refusal_;  // a follower's 421 body (SPEC §10); empty on a primary
};

}  // namespace percore::shards
