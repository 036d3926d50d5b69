// follower: a read-only copy of a primary (SPEC §10) — runs on shard 0 of a server started with
// --follow URL, copying every app's documents and the catalog (apps, quotas, tokens as hashes,
// deliveries) from the primary's replication feed (replication_page.hpp) into this server's own
// stores, through their group commit.
//
// Contract
// - One per follower server, on shard 0's thread, inside rounds. The shard calls step() every
//   round, asks has_work() before it sleeps, and gives every result of a write whose ticket is a
//   follower's (write_ticket issuer::follower) to write_done() (base/shard_task.hpp).
// - A page at a time: the page's writes are submitted to their owners at once (each key appears
//   once in a page, so their order between keys does not matter, and pages are applied one after
//   the other); once every one of them is durable, the registry takes the page's catalog changes
//   and the next page is asked at once, after this one — that request is what acknowledges the
//   page to a --replication sync primary (SPEC §12), so it waits for one fdatasync, not two. The
//   cursor after a page (follower_records, catalog.hpp) is written with the next page's writes,
//   in the same group commit: a restart resumes at most one page before the last page whose
//   writes were all durable, and applies that page again — harmless: every write is a put of the
//   primary's value with the primary's ETag, or an erase, so applying it again changes nothing a
//   client sees. (Measured: stored before asking, a sync write waited two fdatasyncs a page
//   cycle, ~3.6 ms each here; docs/perf/issue31.md.) During a full copy and a capture the cursor
//   is written before the next ask, as its resync flag must be right when the server restarts.
// - Same versions (SPEC §10): a put keeps the page's etag as the copy's ETag version
//   (write_op::copied_version; shard_store.hpp), so this server serves the primary's ETags, and its
//   own later writes — once promoted — get versions above them. Deletions are plain erases.
// - Resync: with no stored cursor for this primary (a first start, or another primary), or when
//   the primary answers 410 (the cursor fell behind its retention), the copy starts over from the
//   feed's beginning ("0": every live document and the retained deletes), remembering every key it
//   was shown; once caught up it erases the local keys the primary did not show. The stored cursor
//   says when a resync is under way, so a restart in the middle starts it over.
// - A returning primary (SPEC §12; diverged_capture.hpp): when the led-epoch record names an epoch
//   other than config.epoch, the copy is a full one in capture mode whatever the stored cursor
//   says: before a page's writes are submitted, the local documents they would change are kept
//   (and synced) in DATA/diverged-{E}.part, as are, before the resync's last step, the local keys
//   the primary did not show; once the copy is exact, the tar is written (one log line, counted
//   in follower_status), then the led-epoch record is erased, durably, and the copy goes on as
//   any other.
// - Failures never stop it: an exchange that fails (primary down, 5xx, a refused token) or a page
//   whose writes this store refused (disk full) is tried again after min_follow_retry, doubling to
//   max_follow_retry (limits.hpp). One log line per change of state, not per try.
// - A bad page does (SPEC §10, "The follower trusts no page"): every page is read and checked whole
//   by read_replication_page (page_check.hpp) before any of its changes is submitted, and the
//   answer is bounded to max_replication_page_bytes (a larger one is not read). A page that is
//   malformed, too large, or holds a name, key, content type, value or catalog record outside the
//   rules stores nothing, is counted (follower_status::rejected_pages), logged in one line, and
//   stops the copy: nothing more is asked (not the same page again and again) until a restart,
//   and the server goes on serving what it holds. It never asserts on what a page holds.
// - follower_status (any thread) says how far behind the copy is, for /_health and /_metrics.
// - Nothing is written here but the copy: writes from clients are refused before they reach a
//   store (421, document_service), deliveries and the erasure of deleted apps do not run (the
//   primary's erasures arrive as changes).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "net/client_connection.hpp"
#include "net/resolver.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/deliveries/delivery_transports.hpp"
#include "shards/base/json_value.hpp"
#include "shards/base/limits.hpp"
#include "shards/base/metrics.hpp"
#include "shards/base/result.hpp"
#include "shards/base/server_view.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/base/store_client.hpp"
#include "shards/follower/diverged_capture.hpp"
#include "shards/follower/page_check.hpp"
#include "shards/runtime/loop.hpp"

namespace percore::shards {

// How far behind the copy is; written by the follower (shard 0), read by any shard.
struct follower_status {
    std::atomic<std::uint64_t> lag_changes{0};        // changes the primary holds that are not applied yet
    std::atomic<std::int64_t> behind_since_ms{0};     // unix ms: known caught up then (0: caught up now)
    std::atomic<std::uint64_t> applied_changes{0};    // changes applied since the start
    std::atomic<std::uint64_t> pages{0};              // pages applied since the start
    std::atomic<std::uint64_t> resyncs{0};            // full copies begun since the start
    std::atomic<std::uint64_t> failed_exchanges{0};   // exchanges with the primary that failed
    std::atomic<std::uint64_t> rejected_pages{0};     // pages refused (page_check.hpp): the first stops the copy
    std::atomic<bool> connected{false};               // the last exchange with the primary succeeded
    std::atomic<std::uint64_t> diverged_documents{0}; // kept in diverged tars (SPEC §12) since the start
    std::atomic<std::uint64_t> diverged_files{0};     // diverged tars written since the start
    // Where the durable copy stands in the primary's feed (feed_cursor.hpp cursor_position); 0
    // while a full copy is under way (it is not a copy of the primary until it ends).
    std::atomic<std::uint64_t> position{0};

    // Seconds since the copy was last known to be caught up; 0 while it is.
    double lag_seconds(std::int64_t now_unix_ms) const;
};

struct follow_config {
    std::string url;      // the primary's base URL (https://HOST:PORT, or http:// as SPEC §10 allows)
    std::string token;    // a replication token of the primary (SPEC §7)
    std::string ca_pem;   // https: the CA certificates (PEM text) that verify the primary; empty: the system's
    std::uint64_t epoch = 0;  // --cluster: the primary's epoch (SPEC §12); 0 with --follow
    std::string data_root;    // --data: where a diverged tar is written (diverged_capture.hpp)
    std::string board;        // --cluster: this board's name, sent as Percore-Board (the primary's sync set)
};

class follower final : public shard_task, private net::client_events {
public:
    follower(store_client& stores, app_registry& apps, const server_view& server, delivery_transports& transports,
             runtime::loop& loop, follow_config config, follower_status& status, bool auth_on);
    ~follower();
    follower(const follower&) = delete;
    follower& operator=(const follower&) = delete;

    // shard_task (issuer::follower)
    std::size_t step(time_point now) override;
    bool has_work(time_point now) const override;
    // The server stops: the exchange in flight is dropped, nothing new starts.
    void begin_stop() override;
    // One of the follower's copy writes (its ticket's issuer is issuer::follower).
    void write_done(const store::write_result& result) override;
    // None of its writes is in flight: after begin_stop(), it may be destroyed (follower_slot.hpp).
    bool quiet() const { return outstanding_ == 0; }

private:
    // refused: a page was refused (page_check.hpp); nothing more is asked until a restart
    // clearing: the led-epoch record is being erased (a capture is done)
    enum class phase : std::uint8_t { start, waiting, resolving, exchanging, applying, saving, erasing, clearing, refused, stopped };
    struct catalog_change {
        std::string rest;   // the catalog key after "_percore\0"
        bool deleted = false;
        std::string value;
    };
    class copy_gate;

    void load_cursor();
    void send(std::int64_t now_ns);
    // true: connected; false: the primary's address is being looked up.
    result<bool> connect();
    void on_exchange_done(const net::client_outcome& outcome) override;
    void take_page(std::string_view body);
    void submit_change(page_change& change);
    void refuse_page(std::string_view why);
    void page_applied();
    void save_cursor();
    void submit_cursor(std::string_view cursor);
    bool copying_ahead() const;
    void cursor_saved();
    void begin_erasing_extras();
    // Capture (diverged_capture.hpp): false when it failed (logged, retried later).
    bool start_capture(std::uint64_t led);
    bool capture_page(const checked_page& page);
    bool capture_extras();
    void finish_capture();
    void clear_led_epoch();
    void erase_more();
    void apply_catalog(const catalog_change& c);
    void retry_later(std::string_view why);
    void begin_resync(std::string_view why);
    void caught_up();
    std::uint64_t next_tag();
    store::write_gate* gate_of(app_entry* app);

    store_client& stores_;
    app_registry& apps_;
    const server_view& server_;
    delivery_transports& transports_;
    runtime::loop& loop_;
    follow_config config_;
    follower_status& status_;
    bool auth_on_;

    phase now_ = phase::start;
    std::int64_t retry_at_ns_ = 0;
    std::chrono::milliseconds backoff_ = min_follow_retry;
    std::string failing_;                       // why the last try failed (logged once per cause)
    std::optional<net::socket_address> peer_;
    net::resolve_handle resolving_;
    std::unique_ptr<net::client_transport> transport_;
    std::unique_ptr<net::client_connection> client_;
    std::string target_;
    std::string auth_header_;

    std::string cursor_ = "0";                  // after the last page whose writes are durable
    std::string stored_cursor_;                 // the cursor record's durable value ("": none yet)
    bool cursor_in_page_ = false;               // cursor_ is written with the page being applied
    bool resync_ = false;
    std::unordered_set<std::string> seen_;      // resync: every key the primary showed
    std::string page_cursor_;                   // the page being applied: its last_cursor
    std::uint64_t page_pending_ = 0;
    std::uint32_t page_changes_ = 0;
    std::int64_t page_received_ms_ = 0;
    std::vector<catalog_change> page_catalog_;
    std::size_t outstanding_ = 0;               // writes submitted, not answered
    bool page_failed_ = false;
    std::vector<std::string> extras_;           // resync: local keys to erase
    std::size_t extras_next_ = 0;
    std::uint32_t sequence_ = 0;
    std::unordered_map<app_entry*, std::unique_ptr<copy_gate>> gates_;
    std::optional<diverged_capture> capture_;   // a returning primary's copy (see Contract)
    bool clear_led_ = false;                    // the capture is written: the led-epoch record goes next

};

}  // namespace percore::shards
