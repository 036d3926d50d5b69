// change_feed: the pages of SPEC §8's change feed, composed from every shard's current snapshot
// (store/changes.hpp reads one shard; this merges the shards and keeps the cursor).
//
// Contract
// - Runs on any shard's thread inside a reader round (it reads snapshots through store_client).
// - start() turns the request's `since` into a cursor: absent or "0" = every retained change,
//   "now" = after every change published so far, else a cursor percore made (400 if not). A
//   cursor of another data directory, of another layout (a resharding happened since) or below a
//   shard's feed floor (store/changes.hpp) is 410 with the oldest cursor a consumer can resume from
//   after resyncing with a list (never a silent gap).
// - page() appends up to `limit` changes after `pos`, each as SPEC §8's JSON object with the cursor
//   that stands after it, and moves `pos` past them; a shard whose changes were all listed moves to
//   its snapshot's high version, so the next page does not list them again. Per shard, changes come
//   in version (commit) order; between shards, lowest version first.
// - visit() is page()'s walk without the text: each change with the snapshot it was read from (whose
//   documents hold its value) and the cursor after it; the visitor may refuse a change, which then
//   stays after `pos` (a delivery's batch is full, delivery_batch.hpp).
// - Which snapshot of each shard it reads: the one clients are shown (store_client::current), or,
//   inside a durable_reads scope, the newest durable one (store_client::durable): a follower's
//   replication page (replication_page.hpp) must copy a write before --replication sync shows it
//   (SPEC §12). The same snapshot without --replication sync.
// - Keys live in the store as `app \0 key`; `app_prefix` is that form (app, NUL, the key prefix) and
//   keys are shown without the app.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "shards/base/board_role.hpp"
#include "shards/feed/feed_cursor.hpp"
#include "shards/base/result.hpp"
#include "shards/base/store_client.hpp"
#include "shards/runtime/check.hpp"
#include "store/changes.hpp"

namespace percore::shards {

class change_feed {
public:
    change_feed(const store_client& stores, feed_identity identity) : stores_(stores), identity_(identity) {}

    // A problem 400 (not a cursor), or 410 (expired, of another directory or layout): the client
    // resumes from oldest().
    result<feed_cursor> start(std::string_view since) const;

    // How each change is written: in a JSON array (comma-separated objects), one JSON object per
    // line (feed=continuous), or one event with the cursor as its id (feed=eventsource).
    enum class format : std::uint8_t { json_array, ndjson, event_stream };

    // Returns the number of changes appended.
    std::uint32_t page(feed_cursor& pos, std::string_view app_prefix, std::size_t app_bytes, std::uint32_t limit,
                       format f, std::string& out);

    // Returns false to leave the change (and every later one) for the next page.
    using change_visitor =
        std::function<bool(const store::change& c, const store::snapshot& snap, const feed_cursor& after)>;
    // Returns the number of changes the visitor took.
    std::uint32_t visit(feed_cursor& pos, std::string_view app_prefix, std::uint32_t limit, const change_visitor& visit);

    feed_identity identity() const { return identity_; }
    // The group's epoch as this board knows it (SPEC §12), carried on replication pages; 0 without
    // a role (no --cluster, or in-process tests). `role` outlives the feed; set before the shards run.
    void set_role(const board_role& role) { role_ = &role; }
    std::uint64_t epoch() const { return role_ ? role_->epoch() : 0; }

    // While it lives, the feed reads the durable snapshots (contract above); not nested.
    class durable_reads {
    public:
        explicit durable_reads(change_feed& feed) : feed_(feed) {
            PERCORE_REQUIRES(!feed.durable_);
            feed_.durable_ = true;
        }
        ~durable_reads() { feed_.durable_ = false; }
        durable_reads(const durable_reads&) = delete;
        durable_reads& operator=(const durable_reads&) = delete;

    private:
        change_feed& feed_;
    };
    // The oldest cursor the feed holds changes after (what a 410 tells the client to resume from).
    feed_cursor oldest() const;

private:
    const store::snapshot* snapshot_of(unsigned shard) const {
        return durable_ ? stores_.durable(shard) : stores_.current(shard);
    }
    feed_cursor now() const;
    void append_change(std::string& out, const store::change& c, std::size_t app_bytes, const feed_cursor& pos, format f,
                       bool first);

    const store_client& stores_;
    feed_identity identity_;
    const board_role* role_ = nullptr;
    bool durable_ = false;                           // inside a durable_reads scope
    std::vector<std::vector<store::change>> lists_;  // per shard, kept from page to page
    std::vector<std::size_t> next_;                  // per shard: the first change not yet appended
    std::vector<const store::snapshot*> snapshots_;  // per shard: the one this page reads
    std::vector<std::uint8_t> more_;                 // per shard: changes past the list
};

}  // namespace percore::shards
