// feed_waits: one shard's change feeds that wait for commits (SPEC §8: feed=longpoll, continuous,
// eventsource) — held as state, not as threads: a wait costs one entry here and its connection.
//
// Contract
// - Owned by one shard's document_service; every call on that shard's thread, inside a round.
// - A wait is woken by the commit that publishes its next change, on whichever shard: a shard that
//   publishes a batch calls feed_signal::published(), which wakes every other shard with waits that
//   sleeps (one eventfd write each; a busy one sees it in its next round). step() then finds that a
//   shard's epoch moved (news()), and pages once every wait whose app's changed_batches count moved since its
//   last page (all of them after a change of no known app): a long poll with changes is answered and
//   ends; a stream writes its changes and goes on. A wait on an app that did not change costs a sum
//   of one counter per shard, not a page (perf: docs/perf/feeds.md).
// - Deadlines are kept to the tick (runtime/limits.hpp, 250 ms): a long poll with nothing is
//   answered with no changes at its timeout; a stream writes its heartbeat (an empty line, or an
//   event-stream comment) every `heartbeat` seconds.
// - A stream whose consumer does not read is cut off by the connection pool at its bound
//   (net/limits.hpp max_stream_unsent_bytes); its wait is dropped, and the cursor it last sent stays
//   valid. closed() drops the wait of a connection that ended; told from inside step() (the pool
//   calls it from stream_write when it cuts a stream off), it marks the wait, and step() drops it.
// - Access: a wait keeps its principal (access_grant) and checks it again every access_recheck_ns;
//   once its token is revoked or expired, or its app deleted, a long poll is answered 401 and a
//   stream ends (SPEC §7).
// - Bounds: at most max_feed_waits_per_shard waits (shards/base/limits.hpp); past it a waiting feed is
//   answered 503 at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/answer_sink.hpp"
#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/apps/access.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/feed/change_feed.hpp"
#include "shards/base/metrics.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/base/store_client.hpp"

namespace percore::shards {

// Which shards have waits, and what each shard published, shared by every shard.
// The owner of a batch, after publishing its snapshot, adds the batch's changes to each changed
// app's counters (app_counters::changed_batches, release), then calls published(): that bumps its epoch
// (release) and wakes the shards with waits that sleep. A waiting shard reads the epochs (acquire)
// before the app counters, and the counters before paging: a counter it saw moved comes with the
// snapshot that holds the changes, and a bump it missed comes with an epoch it has not seen.
class feed_signal {
public:
    explicit feed_signal(unsigned shards) : slots_(std::make_unique<slot[]>(shards)), shards_(shards) {}
    void set_waits(unsigned shard, std::uint32_t n) { slots_[shard].waits.store(n, std::memory_order_relaxed); }
    // Deliveries the shard runs (delivery_engine.hpp): they look for changes as waits do.
    void set_deliveries(unsigned shard, std::uint32_t n) {
        slots_[shard].deliveries.store(n, std::memory_order_relaxed);
    }
    // Called by `self` after it published a snapshot and counted its changes per app; `unattributed`:
    // the batch changed documents of no known app (turn class 0), so every wait must look.
    template <class Wake>
    void published(unsigned self, bool unattributed, Wake&& wake) const {
        slot& own = slots_[self];
        if (unattributed) own.unattributed.store(own.unattributed.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        own.epoch.store(own.epoch.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        std::atomic_thread_fence(std::memory_order_seq_cst);  // the epoch before the waits we read
        for (unsigned i = 0; i < shards_; ++i)
            if (i != self && (slots_[i].waits.load(std::memory_order_relaxed) != 0 ||
                              slots_[i].deliveries.load(std::memory_order_relaxed) != 0))
                wake(i);
    }
    std::uint64_t epoch(unsigned shard) const { return slots_[shard].epoch.load(std::memory_order_acquire); }
    std::uint64_t unattributed(unsigned shard) const {
        return slots_[shard].unattributed.load(std::memory_order_acquire);
    }
    unsigned shard_count() const { return shards_; }

private:
    struct alignas(64) slot {
        std::atomic<std::uint32_t> waits{0};
        std::atomic<std::uint32_t> deliveries{0};
        std::atomic<std::uint64_t> epoch{0};         // one writer: the shard
        std::atomic<std::uint64_t> unattributed{0};  // one writer: the shard
    };
    std::unique_ptr<slot[]> slots_;
    unsigned shards_;
};

// The owner's side once a batch settled (published, or failed): counts its changes per app
// (`classes`: store::shard_store::classes_published(), each an app's index; an index of no app,
// such as 0, makes every wait look), then signals (feed_signal: in that order, after publication).
template <class Wake>
void publish_changes(feed_signal& signal, const app_registry& apps, unsigned self,
                     const std::vector<std::uint32_t>& classes, Wake&& wake) {
    bool unattributed = false;
    for (std::uint32_t turn_class : classes) {
        app_entry* app = apps.at(turn_class);
        if (!app) {
            unattributed = true;
            continue;
        }
        auto& c = app->counters(self).changed_batches;
        c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    signal.published(self, unattributed, std::forward<Wake>(wake));
}

// Never a count of changes: makes a wait page at the next step whatever its app's counters say.
inline constexpr std::uint64_t page_at_next_step = ~std::uint64_t{0};

struct feed_wait {
    net::answer_ticket ticket;
    app_entry* app = nullptr;      // null: no entry yet (--auth off, never written); looked up again each step
    app_entry* counted = nullptr;  // the app whose feeds_open counts this wait (set with app)
    net::feed_mode mode = net::feed_mode::longpoll;
    feed_cursor pos;
    std::string app_prefix;        // app, NUL, key prefix
    std::size_t app_bytes = 0;     // app and NUL
    std::uint32_t limit = 0;
    std::int64_t deadline_ns = 0;  // long poll: its timeout; stream: its next heartbeat
    std::int64_t heartbeat_ns = 0; // stream
    bool begun = false;            // stream: its head was sent
    bool ended = false;            // its connection ended while step() ran (closed() re-entered)
    bool replication = false;      // a follower's long poll of every app (replication_page.hpp): any
                                   // publication is news, and its page carries the values
    std::uint64_t changes_seen = page_at_next_step;  // the app's changes (summed over shards) at its last page
    access_grant grant;            // who opened it: checked again every access_recheck_ns
    std::int64_t grant_checked_ns = 0;
};

// How often a waiting feed's token is checked again: SPEC §7 ends the feeds of a revoked or
// expired token, or of a deleted app, within 1 s; two checks a second leave room for a 250 ms tick.
inline constexpr std::int64_t access_recheck_ns = 500'000'000;

class feed_waits final : public shard_task {
public:
    feed_waits(change_feed& feed, const store_client& stores, shard_metrics& metrics, const app_registry& apps,
               access_control& access)
        : feed_(feed), stores_(stores), metrics_(metrics), apps_(apps), access_(access) {
        set_busy(false);  // busy while a feed waits
    }

    // The shard's pool and the server's signal; without them (in-process tests) nothing waits.
    void attach(net::answer_sink* sink, feed_signal* signal) {
        sink_ = sink;
        signal_ = signal;
        self_ = stores_.self();
    }
    bool can_wait() const { return sink_ != nullptr; }
    bool full() const;

    // A long poll with nothing to answer yet, or a stream whose head was sent.
    void add(feed_wait w);
    // Whether a shard published since the waits were last paged.
    bool news() const;
    void closed(net::answer_ticket ticket);

    // shard_task
    // When there is news, pages the waits whose app changed since their last page (or all of them,
    // after a change of no known app), and keeps their deadlines; returns the waits it served.
    // REQUIRES: attached (the shard's thread).
    std::size_t step(time_point now) override;
    bool has_work(time_point) const override { return news(); }
    // The server stops: every long poll is answered now with what it has (its page may be empty);
    // streams are ended by the pool's shutdown.
    void begin_stop() override;
    std::size_t size() const { return waits_.size(); }

    // The page body of a long poll (also used for feed=normal): {"changes":[…],"last_cursor":"…"}.
    static void begin_page(std::string& out) { out.assign("{\"changes\":["); }
    static void end_page(std::string& out, const feed_cursor& pos);

private:
    bool serve(feed_wait& w, std::int64_t now_ns);
    // Whether the wait's principal still holds (checked again when due); when not, its long poll is
    // answered 401 or its stream ended, and it is to be dropped.
    bool still_allowed(feed_wait& w, std::int64_t now_ns);
    bool serve_replication(feed_wait& w, std::int64_t now_ns);
    bool app_changed(feed_wait& w);
    void count_open(feed_wait& w, std::int64_t delta);
    void count_sent(const feed_wait& w, std::uint32_t n);
    bool stream(feed_wait& w, std::int64_t now_ns);
    bool remember_epochs();
    void drop_ended();
    void publish_count();

    change_feed& feed_;
    const store_client& stores_;
    shard_metrics& metrics_;
    const app_registry& apps_;
    access_control& access_;
    feed_signal* signal_ = nullptr;
    unsigned self_ = 0;
    net::answer_sink* sink_ = nullptr;
    std::vector<feed_wait> waits_;
    bool stepping_ = false;            // closed() can come from inside a stream_write of step()
    std::vector<std::uint64_t> seen_;  // per shard: the epoch (feed_signal) the waits were last paged at
    std::uint64_t unattributed_seen_ = 0;  // the sum of the shards' unattributed counts then
    std::string text_;
};

}  // namespace percore::shards
