#include "shards/feed/changes_endpoint.hpp"

#include <algorithm>
#include <chrono>

#include "shards/base/limits.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/feed/replication_page.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {

constexpr std::string_view read_methods = "GET, HEAD";

std::int64_t steady_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

changes_endpoint::changes_endpoint(change_feed& feed, feed_waits& waits, app_registry& apps, shard_metrics& metrics,
                                   unsigned self)
    : feed_(feed), waits_(waits), apps_(apps), metrics_(metrics), self_(self) {}

net::request_handler::result changes_endpoint::handle(net::request& req, net::response& res, const net::route& r,
                                                      const principal& who, net::answer_ticket ticket) {
    PERCORE_REQUIRES(on_shard_thread(self_));
    PERCORE_REQUIRES(r.kind == net::target_kind::changes || r.kind == net::target_kind::replication);
    if (req.head.verb != net::method::get && req.head.verb != net::method::head) {
        res.error(405, "method not allowed", read_methods);
        return result::answered;
    }
    if (r.kind == net::target_kind::replication) {
        std::string_view board;  // --cluster's followers name themselves (sync_acks.hpp's sync set)
        (void)req.head.find("percore-board", board);
        return replication_page(res, r, ticket, board);
    }
    return list_changes(req, res, r, who, ticket);
}

// GET /_changes/{app} (SPEC §8): from `since` (or an event stream's Last-Event-ID), within the
// token's prefix.
net::request_handler::result changes_endpoint::list_changes(const net::request& req, net::response& res,
                                                            const net::route& r, const principal& who,
                                                            net::answer_ticket ticket) {
    std::string_view since = r.has_since ? r.since : std::string_view();
    std::string_view last_event_id;
    if (!r.has_since && r.feed == net::feed_mode::eventsource && req.head.find("last-event-id", last_event_id))
        since = last_event_id;
    auto start = feed_.start(since);
    if (!start) return refuse_feed(res, start.error(), apps_.find(r.app));
    const std::optional<std::string_view> prefix = reachable_prefix(who, r.prefix);
    key_.assign(r.app);
    key_.push_back('\0');
    key_.append(prefix.value_or(std::string_view()));
    if (!prefix) key_.append("\xff\xff");  // a prefix outside the token's: no key of the app starts with it
    return send_changes(res, r, std::move(*start), ticket);
}

// A page after `pos` (feed=normal, or a long poll that has changes or no timeout), else a wait
// (feed_waits.hpp): a stream always waits, its changes written as they come.
net::request_handler::result changes_endpoint::send_changes(net::response& res, const net::route& r, feed_cursor pos,
                                                            net::answer_ticket ticket) {
    if (r.feed == net::feed_mode::continuous || r.feed == net::feed_mode::eventsource)
        return wait_for_changes(r, std::move(pos), ticket, res);
    feed_waits::begin_page(text_);
    const std::uint32_t n = feed_.page(pos, key_, r.app.size() + 1, r.limit, change_feed::format::json_array, text_);
    if (r.feed == net::feed_mode::longpoll && n == 0 && r.timeout_s > 0)
        return wait_for_changes(r, std::move(pos), ticket, res);
    add(metrics_.feed_changes_sent, n);
    if (app_entry* app = n ? apps_.find(r.app) : nullptr) add(app->counters(self_).feed_changes_sent, n);
    feed_waits::end_page(text_, pos);
    res.json(200, text_);
    return result::answered;
}

// GET /_changes/_all (SPEC §10, replication_page.hpp): a follower's page of every app's changes
// with their values; a long poll with nothing yet waits like a feed's.
net::request_handler::result changes_endpoint::replication_page(net::response& res, const net::route& r,
                                                                net::answer_ticket ticket, std::string_view board) {
    auto start = feed_.start(r.has_since ? r.since : std::string_view());
    if (!start) return refuse_feed(res, start.error(), nullptr);
    // A cursor of this directory and layout: what the follower holds durable (sync_acks.hpp).
    if (acks_ && r.has_since) {
        const std::int64_t now_ns = steady_now_ns();
        acks_->acknowledge(start->versions, now_ns);
        if (is_board_name(board)) acks_->note_board(board, now_ns);  // --cluster's followers name themselves
    }
    feed_cursor pos = std::move(*start);
    const std::uint32_t limit = std::min(r.limit, max_replication_page_changes);
    auto page = make_replication_page(feed_, pos, limit, text_);
    if (!page) {
        res.error(500, "cannot read a value");
        return result::answered;
    }
    if (r.feed == net::feed_mode::longpoll && page->changes == 0 && r.timeout_s > 0) {
        key_.clear();
        return wait_for_changes(r, std::move(pos), ticket, res);
    }
    add(metrics_.feed_changes_sent, page->changes);
    res.json(200, text_);
    return result::answered;
}

// A `since` the feed cannot start from: 400, or 410 with the oldest cursor (SPEC §8), counted for
// the server and for `app` when there is one.
net::request_handler::result changes_endpoint::refuse_feed(net::response& res, const problem& why,
                                                           app_entry* app) {
    if (why.status != 410) {
        res.error(why.status, why.reason);
        return result::answered;
    }
    add(metrics_.feed_cursors_expired);
    if (app) add(app->counters(self_).feed_cursors_expired);
    text_.assign("{\"error\":\"cursor expired\",\"oldest\":\"");
    text_.append(cursor_text(feed_.oldest()));
    text_.append("\"}");
    res.json(410, text_);
    return result::answered;
}

// The feed waits from `pos` for its app prefix (key_), until a change, its timeout or its end.
net::request_handler::result changes_endpoint::wait_for_changes(const net::route& r, feed_cursor pos,
                                                                net::answer_ticket ticket, net::response& res) {
    if (!waits_.can_wait()) {
        res.error(501, "this server cannot hold waiting feeds");
        return result::answered;
    }
    if (waits_.full()) {
        res.error_with_header(503, "too many waiting feeds", "Retry-After", "1");
        return result::answered;
    }
    feed_wait w;
    w.ticket = ticket;
    w.mode = r.feed;
    w.pos = std::move(pos);
    w.replication = r.kind == net::target_kind::replication;
    w.app = w.replication ? nullptr : apps_.find(r.app);
    w.app_prefix = key_;
    w.app_bytes = r.app.size() + 1;
    w.limit = w.replication ? std::min(r.limit, max_replication_page_changes) : r.limit;
    const std::int64_t now = steady_now_ns();
    constexpr std::int64_t second = 1'000'000'000;
    w.heartbeat_ns = static_cast<std::int64_t>(r.heartbeat_s) * second;
    w.grant_checked_ns = now;
    w.deadline_ns = now + (r.feed == net::feed_mode::longpoll ? static_cast<std::int64_t>(r.timeout_s) * second
                                                              : w.heartbeat_ns);
    waits_.add(std::move(w));
    return result::pending;
}

}  // namespace percore::shards
