// feed_waits: one shard's change feeds that wait for commits (SPEC §8: feed=longpoll, continuous,
// eventsource) — held as state, not as threads: a wait costs one entry here and its connection.
//
// Contract
// - Owned by one shard's document_service; every call on that shard's thread, inside a round.
// - A wait is woken by the commit that publishes its next change, on whichever shard: a shard that
//   publishes a batch calls feed_signal::published(), which wakes every other shard with waits that
//   sleeps (one eventfd write each; a busy one sees it in its next round). step() then finds that a
//   snapshot sequence moved (news()), and pages every wait once: a long poll with changes is answered
//   and ends; a stream writes its changes and goes on.
// - Deadlines are kept to the tick (runtime/limits.hpp, 250 ms): a long poll with nothing is
//   answered with no changes at its timeout; a stream writes its heartbeat (an empty line, or an
//   event-stream comment) every `heartbeat` seconds.
// - A stream whose consumer does not read is cut off by the connection pool at its bound
//   (net/limits.hpp max_stream_unsent_bytes); its wait is dropped, and the cursor it last sent stays
//   valid. closed() drops the wait of a connection that ended; told from inside step() (the pool
//   calls it from stream_write when it cuts a stream off), it marks the wait, and step() drops it.
// - Bounds: at most max_feed_waits_per_shard waits (shards/limits.hpp); past it a waiting feed is
//   answered 503 at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/change_feed.hpp"
#include "shards/metrics.hpp"
#include "shards/store_client.hpp"

namespace percore::shards {

// What a wait answers through: the shard's connection pool.
class feed_sink {
public:
    virtual void complete(net::answer_ticket ticket, const net::simple_answer& answer) = 0;
    virtual net::stream_status stream_begin(net::answer_ticket ticket, int status, std::string_view content_type) = 0;
    virtual net::stream_status stream_write(net::answer_ticket ticket, std::string_view bytes) = 0;

protected:
    ~feed_sink() = default;
};

// Which shards have waits, shared by every shard: published() wakes the ones that sleep.
class feed_signal {
public:
    explicit feed_signal(unsigned shards) : waits_(std::make_unique<std::atomic<std::uint32_t>[]>(shards)), shards_(shards) {}
    void set_waits(unsigned shard, std::uint32_t n) { waits_[shard].store(n, std::memory_order_relaxed); }
    // Called by `self` after it published a snapshot; wake(shard) is the loop's wake-up.
    template <class Wake>
    void published(unsigned self, Wake&& wake) const {
        std::atomic_thread_fence(std::memory_order_seq_cst);  // the snapshot before the waits we read
        for (unsigned i = 0; i < shards_; ++i)
            if (i != self && waits_[i].load(std::memory_order_relaxed) != 0) wake(i);
    }

private:
    std::unique_ptr<std::atomic<std::uint32_t>[]> waits_;
    unsigned shards_;
};

struct feed_wait {
    net::answer_ticket ticket;
    net::feed_mode mode = net::feed_mode::longpoll;
    feed_cursor pos;
    std::string app_prefix;        // app, NUL, key prefix
    std::size_t app_bytes = 0;     // app and NUL
    std::uint32_t limit = 0;
    std::int64_t deadline_ns = 0;  // long poll: its timeout; stream: its next heartbeat
    std::int64_t heartbeat_ns = 0; // stream
    bool begun = false;            // stream: its head was sent
    bool ended = false;            // its connection ended while step() ran (closed() re-entered)
};

class feed_waits {
public:
    feed_waits(change_feed& feed, const store_client& stores, shard_metrics& metrics)
        : feed_(feed), stores_(stores), metrics_(metrics) {}

    // The shard's pool and the server's signal; without them (in-process tests) nothing waits.
    void attach(feed_sink* sink, feed_signal* signal) {
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
    // Pages the waits when there is news, and keeps their deadlines; returns the waits it served.
    std::size_t step(std::int64_t now_ns);
    void closed(net::answer_ticket ticket);
    // The server stops: every long poll is answered now with what it has (its page may be empty);
    // streams are ended by the pool's shutdown.
    void end_all();
    std::size_t size() const { return waits_.size(); }

    // The page body of a long poll (also used for feed=normal): {"changes":[…],"last_cursor":"…"}.
    static void begin_page(std::string& out) { out.assign("{\"changes\":["); }
    static void end_page(std::string& out, const feed_cursor& pos);

private:
    bool serve(feed_wait& w, std::int64_t now_ns);
    bool stream(feed_wait& w, std::int64_t now_ns);
    void remember_sequences();
    void publish_count();

    change_feed& feed_;
    const store_client& stores_;
    shard_metrics& metrics_;
    feed_signal* signal_ = nullptr;
    unsigned self_ = 0;
    feed_sink* sink_ = nullptr;
    std::vector<feed_wait> waits_;
    bool stepping_ = false;            // closed() can come from inside a stream_write of step()
    std::vector<std::uint64_t> seen_;  // per shard: the snapshot sequence the waits were paged at
    std::string text_;
};

}  // namespace percore::shards
