#include "shards/feed/feed_waits.hpp"

#include <algorithm>
#include <ctime>
#include <limits>

#include "shards/base/limits.hpp"
#include "shards/feed/replication_page.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {
constexpr std::string_view ndjson_heartbeat = "\n";
constexpr std::string_view event_heartbeat = ": heartbeat\n\n";
}  // namespace

void feed_waits::end_page(std::string& out, const feed_cursor& pos) {
    out.append("],\"last_cursor\":\"");
    append_cursor(out, pos);
    out.append("\"}");
}

bool feed_waits::full() const { return waits_.size() >= max_feed_waits_per_shard; }

void feed_waits::add(feed_wait w) {
    PERCORE_REQUIRES(sink_ != nullptr && !full());
    // its first page was read before this call: page it again at the next step (a publish in between
    // would otherwise go unseen)
    w.changes_seen = page_at_next_step;
    w.grant = access_.grant_of(w.ticket);  // the principal of the request that opened it
    count_open(w, 1);
    waits_.push_back(std::move(w));
    set_busy(true);
    seen_.clear();
    publish_count();
}

void feed_waits::publish_count() {
    metrics_.feeds_open.store(waits_.size(), std::memory_order_relaxed);
    if (signal_) signal_->set_waits(self_, static_cast<std::uint32_t>(waits_.size()));
}

// +1 once the wait's app is known (at add, or when its first write made it), -1 on the app it was
// counted on: a wait opened before its app existed never takes back what it did not add.
void feed_waits::count_open(feed_wait& w, std::int64_t delta) {
    if (delta > 0 && w.app && !w.counted) w.counted = w.app;
    else if (delta > 0 || !w.counted) return;
    auto& c = w.counted->counters(self_).feeds_open;
    PERCORE_ASSERT(delta > 0 || c.load(std::memory_order_relaxed) > 0);
    c.store(c.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(delta), std::memory_order_relaxed);
}

void feed_waits::count_sent(const feed_wait& w, std::uint32_t n) {
    shards::add(metrics_.feed_changes_sent, n);
    if (w.app && n) shards::add(w.app->counters(self_).feed_changes_sent, n);
}

bool feed_waits::news() const {
    if (waits_.empty() || !signal_) return false;
    if (seen_.size() != signal_->shard_count()) return true;
    for (unsigned i = 0; i < signal_->shard_count(); ++i)
        if (signal_->epoch(i) != seen_[i]) return true;
    return false;
}

// Read before the app counters and the pages: an epoch bumped after this is news at the next step.
// Returns whether a change of no known app came since the last call.
bool feed_waits::remember_epochs() {
    seen_.resize(signal_->shard_count());
    std::uint64_t unattributed = 0;
    for (unsigned i = 0; i < signal_->shard_count(); ++i) {
        seen_[i] = signal_->epoch(i);
        unattributed += signal_->unattributed(i);
    }
    const bool moved = unattributed != unattributed_seen_;
    unattributed_seen_ = unattributed;
    return moved;
}

// Whether the wait's app published changes since the wait's last page (its count read now is kept:
// a change counted after this read comes with a new epoch, so it is looked at next step).
bool feed_waits::app_changed(feed_wait& w) {
    if (w.replication) return true;
    if (!w.app) {
        w.app = apps_.find(std::string_view(w.app_prefix).substr(0, w.app_bytes - 1));
        if (w.app) count_open(w, 1);
    }
    if (!w.app) {
        // No entry yet: nothing of the app was published (its entry is made before its first
        // write is admitted; that write's publication bumps an epoch read after this lookup).
        if (w.changes_seen != page_at_next_step) return false;
        w.changes_seen = 0;  // once found, any count above 0 is news
        return true;
    }
    std::uint64_t changes = 0;
    for (unsigned s = 0; s < w.app->shard_count(); ++s)
        changes += w.app->counters(s).changed_batches.load(std::memory_order_acquire);
    if (changes == w.changes_seen) return false;
    w.changes_seen = changes;
    return true;
}

std::size_t feed_waits::step(time_point now) {
    if (waits_.empty()) return 0;
    PERCORE_REQUIRES(on_shard_thread(self_));
    const std::int64_t now_ns = nanoseconds_of(now);
    const bool news_now = news();
    const bool all = news_now && remember_epochs();
    std::size_t served = 0;
    stepping_ = true;
    // By index, and waits_[i] again after an answer: answering may run the connection's next request,
    // which may add a wait and move the vector (ASan saw it at SIGTERM: a use after free).
    for (std::size_t i = 0; i < waits_.size(); ++i) {
        feed_wait& w = waits_[i];
        if (w.ended) continue;
        if (!still_allowed(w, now_ns)) {
            waits_[i].ended = true;
            continue;
        }
        bool changed = news_now && (app_changed(w) || all);
        if (!changed && now_ns < w.deadline_ns) continue;
        ++served;
        const bool keep = w.mode == net::feed_mode::longpoll ? serve(w, now_ns) : stream(w, now_ns);
        if (!keep) waits_[i].ended = true;
    }
    stepping_ = false;
    drop_ended();
    return served;
}

void feed_waits::drop_ended() {
    std::erase_if(waits_, [this](feed_wait& w) {
        if (w.ended) count_open(w, -1);
        return w.ended;
    });
    set_busy(!waits_.empty());
    publish_count();
}

bool feed_waits::still_allowed(feed_wait& w, std::int64_t now_ns) {
    if (now_ns - w.grant_checked_ns < access_recheck_ns) return true;
    w.grant_checked_ns = now_ns;
    if (access_.still_holds(w.grant, static_cast<std::int64_t>(std::time(nullptr)))) return true;
    if (w.mode == net::feed_mode::longpoll) {
        sink_->complete(w.ticket, net::simple_answer{401, false, 0, "token revoked or expired, or its app deleted"});
    } else if (w.begun) {
        sink_->stream_end(w.ticket);
    } else {
        sink_->complete(w.ticket, net::simple_answer{401, false, 0, "token revoked or expired, or its app deleted"});
    }
    return false;
}

// A long poll: answered once it has a change or its timeout passed; false when it ended.
bool feed_waits::serve(feed_wait& w, std::int64_t now_ns) {
    if (w.replication) return serve_replication(w, now_ns);
    begin_page(text_);
    std::uint32_t n = feed_.page(w.pos, w.app_prefix, w.app_bytes, w.limit, change_feed::format::json_array, text_);
    if (n == 0 && now_ns < w.deadline_ns) return true;
    count_sent(w, n);
    end_page(text_, w.pos);
    sink_->complete(w.ticket, net::simple_answer{200, false, 0, nullptr, text_});
    return false;
}

bool feed_waits::serve_replication(feed_wait& w, std::int64_t now_ns) {
    auto page = make_replication_page(feed_, w.pos, w.limit, text_);
    if (!page) {
        sink_->complete(w.ticket, net::simple_answer{500, false, 0, "cannot read a value"});
        return false;
    }
    if (page->changes == 0 && now_ns < w.deadline_ns) return true;
    count_sent(w, page->changes);
    sink_->complete(w.ticket, net::simple_answer{200, false, 0, nullptr, text_});
    return false;
}

// A stream: writes what was committed after its cursor, or its heartbeat when due; false once its
// connection is gone or was cut off.
bool feed_waits::stream(feed_wait& w, std::int64_t now_ns) {
    if (!w.begun) {
        const bool events = w.mode == net::feed_mode::eventsource;
        if (sink_->stream_begin(w.ticket, 200, events ? "text/event-stream" : "application/x-ndjson") !=
            net::stream_status::sent)
            return false;
        w.begun = true;
    }
    text_.clear();
    const auto f = w.mode == net::feed_mode::eventsource ? change_feed::format::event_stream : change_feed::format::ndjson;
    std::uint32_t n = feed_.page(w.pos, w.app_prefix, w.app_bytes, max_feed_page_changes, f, text_);
    if (n == max_feed_page_changes) {  // more after this page: page it again next round
        w.changes_seen = page_at_next_step;
        seen_.clear();
    }
    count_sent(w, n);
    if (n == 0 && now_ns >= w.deadline_ns)
        text_.assign(w.mode == net::feed_mode::eventsource ? event_heartbeat : ndjson_heartbeat);
    if (text_.empty()) return true;
    w.deadline_ns = now_ns + w.heartbeat_ns;  // a change written is as good as a heartbeat
    return sink_->stream_write(w.ticket, text_) == net::stream_status::sent;
}

void feed_waits::begin_stop() {
    if (!sink_) return;
    stepping_ = true;
    for (std::size_t i = 0; i < waits_.size(); ++i) {  // by index: see step()
        feed_wait& w = waits_[i];
        if (w.ended || w.mode != net::feed_mode::longpoll) continue;
        w.deadline_ns = std::numeric_limits<std::int64_t>::min();
        serve(w, std::numeric_limits<std::int64_t>::min() + 1);
        waits_[i].ended = true;
    }
    stepping_ = false;
    drop_ended();
}

void feed_waits::closed(net::answer_ticket ticket) {
    for (feed_wait& w : waits_)
        if (w.ticket.index == ticket.index && w.ticket.generation == ticket.generation) w.ended = true;
    if (stepping_) return;  // step() drops it once its loop is done
    drop_ended();
}

}  // namespace percore::shards
