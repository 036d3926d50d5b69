#include "shards/feed_waits.hpp"

#include <algorithm>
#include <limits>

#include "shards/limits.hpp"
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
    waits_.push_back(std::move(w));
    // its first page was read before this call: page it again at the next step (a publish in between
    // would otherwise go unseen)
    seen_.clear();
    publish_count();
}

void feed_waits::publish_count() {
    metrics_.feeds_open.store(waits_.size(), std::memory_order_relaxed);
    if (signal_) signal_->set_waits(self_, static_cast<std::uint32_t>(waits_.size()));
}

bool feed_waits::news() const {
    if (waits_.empty()) return false;
    if (seen_.size() != stores_.shard_count()) return true;
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        const store::snapshot* s = stores_.current(i);
        if (s && s->sequence() != seen_[i]) return true;
    }
    return false;
}

// Read before paging: a snapshot published after this is one the next news() reports.
void feed_waits::remember_sequences() {
    seen_.resize(stores_.shard_count());
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        const store::snapshot* s = stores_.current(i);
        seen_[i] = s ? s->sequence() : 0;
    }
}

std::size_t feed_waits::step(std::int64_t now_ns) {
    if (waits_.empty()) return 0;
    const bool paged = news();
    if (paged) remember_sequences();
    std::size_t served = 0;
    stepping_ = true;
    for (feed_wait& w : waits_) {
        if (w.ended || (!paged && now_ns < w.deadline_ns)) continue;
        ++served;
        const bool keep = w.mode == net::feed_mode::longpoll ? serve(w, now_ns) : stream(w, now_ns);
        if (!keep) w.ended = true;
    }
    stepping_ = false;
    std::erase_if(waits_, [](const feed_wait& w) { return w.ended; });
    publish_count();
    return served;
}

// A long poll: answered once it has a change or its timeout passed; false when it ended.
bool feed_waits::serve(feed_wait& w, std::int64_t now_ns) {
    begin_page(text_);
    std::uint32_t n = feed_.page(w.pos, w.app_prefix, w.app_bytes, w.limit, change_feed::format::json_array, text_);
    if (n == 0 && now_ns < w.deadline_ns) return true;
    shards::add(metrics_.feed_changes_sent, n);
    end_page(text_, w.pos);
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
    if (n == max_feed_page_changes) seen_.clear();  // more after this page: page again next round
    shards::add(metrics_.feed_changes_sent, n);
    if (n == 0 && now_ns >= w.deadline_ns)
        text_.assign(w.mode == net::feed_mode::eventsource ? event_heartbeat : ndjson_heartbeat);
    if (text_.empty()) return true;
    w.deadline_ns = now_ns + w.heartbeat_ns;  // a change written is as good as a heartbeat
    return sink_->stream_write(w.ticket, text_) == net::stream_status::sent;
}

void feed_waits::end_all() {
    if (!sink_) return;
    stepping_ = true;
    for (feed_wait& w : waits_) {
        if (w.ended || w.mode != net::feed_mode::longpoll) continue;
        w.deadline_ns = std::numeric_limits<std::int64_t>::min();
        serve(w, std::numeric_limits<std::int64_t>::min() + 1);
        w.ended = true;
    }
    stepping_ = false;
    std::erase_if(waits_, [](const feed_wait& w) { return w.ended; });
    publish_count();
}

void feed_waits::closed(net::answer_ticket ticket) {
    for (feed_wait& w : waits_)
        if (w.ticket.index == ticket.index && w.ticket.generation == ticket.generation) w.ended = true;
    if (stepping_) return;  // step() drops it once its loop is done
    std::erase_if(waits_, [](const feed_wait& w) { return w.ended; });
    publish_count();
}

}  // namespace percore::shards
