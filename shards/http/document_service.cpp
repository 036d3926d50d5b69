#include "shards/http/document_service.hpp"

#include "shards/base/limits.hpp"
#include "shards/feed/replication_page.hpp"

#include <chrono>

#include "net/byte_range.hpp"
#include "shards/base/http_decisions.hpp"
#include "shards/base/metrics.hpp"
#include "shards/feed/replication_page.hpp"
#include "shards/base/write_ticket.hpp"
#include "store/document.hpp"
#include "store/segment_file.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {

constexpr std::string_view document_methods = "GET, HEAD, PUT, DELETE, OPTIONS";
constexpr std::string_view read_methods = "GET, HEAD";
constexpr std::string_view server_methods = document_methods;  // OPTIONS *: every method some target allows
constexpr std::string_view default_content_type = "application/octet-stream";

// The answer to OPTIONS (RFC 9110 §9.3.7, SPEC §4): 204 with Allow, no body.
void allow_answer(net::response& res, std::string_view allow) {
    res.start(204);
    res.header("Allow", allow);
    res.end_head();
}

void release_document(void* doc) { static_cast<const store::document*>(doc)->release(); }
void release_segment_file(void* file) { static_cast<const store::segment_file*>(file)->release(); }

// A GET's Range, honoured only when If-Range (if any) names the current version with a strong
// ETag (RFC 9110 §13.1.5: a date or a weak tag never matches here: documents carry no dates).
net::byte_range requested_range(const net::request_head& head, std::uint64_t version, std::uint64_t length) {
    std::string_view value;
    if (head.verb != net::method::get || !head.find("range", value)) return {};
    net::byte_range range = net::parse_byte_range(value, length);
    std::string_view if_range;
    if (range.what != net::byte_range::kind::whole && head.find("if-range", if_range)) {
        std::uint64_t v;
        if (!net::parse_etag(if_range, false, v) || v != version) return {};
    }
    return range;
}

}  // namespace

document_service::document_service(store_client& stores, const server_view& server, shard_metrics& metrics,
                                   app_registry& apps, const auth_config& auth)
    : stores_(stores),
      metrics_(metrics),
      apps_(apps),
      admin_(server, &feed_),
      access_(stores, apps, auth),
      admission_(stores, apps, access_),
      erasures_(stores, server),
      admin_api_(stores, apps, access_, server, erasures_),
      cursors_(stores.shard_count()),
      feed_(stores, server.data_identity()),
      deliveries_(stores, apps, feed_),
      waits_(feed_, stores, metrics, apps),
      backups_(stores.self(), stores.shard_count()) {
    key_.reserve(net::max_app_bytes + 1 + net::max_key_bytes);
}

void document_service::answered(net::method verb, int status, std::uint64_t latency_ns) {
    metrics_.record_request(verb, status, latency_ns);
}

void document_service::closed(net::answer_ticket ticket) {
    waits_.closed(ticket);
    backups_.closed(ticket);
    access_.closed(ticket);
    admission_.closed(ticket);
}

// The route of a request: parsed once by admit(), and reused by handle() when nothing was parsed
// into the scratch in between (a request without a body: handle() follows at once).
const net::route& document_service::route_of(const net::request_head& head, net::answer_ticket ticket, bool admitting) {
    if (!admitting && parsed_.valid && parsed_.ticket.index == ticket.index &&
        parsed_.ticket.generation == ticket.generation && parsed_.target == head.target.data() &&
        parsed_.size == head.target.size()) {
        parsed_.valid = false;
        return parsed_.r;
    }
    parsed_.r = net::parse_route(head.target, scratch_);
    parsed_.valid = admitting;
    parsed_.ticket = ticket;
    parsed_.target = head.target.data();
    parsed_.size = head.target.size();
    return parsed_.r;
}

net::admission document_service::admit(const net::request_head& head, net::response& res, net::answer_ticket ticket) {
    return admission_.admit(head, route_of(head, ticket, true), res, ticket);
}

void document_service::attach(net::answer_sink* sink, feed_signal* signal, backup_captures* captures,
                              backup_source source) {
    waits_.attach(sink, signal);
    backups_.attach(sink, captures, std::move(source));
}

net::request_handler::result document_service::note_waiter(result how, net::answer_ticket ticket, write_waiter who) {
    if (how != result::pending) return how;
    if (ticket.index >= waiters_.size()) waiters_.resize(ticket.index + 1, write_waiter::none);
    waiters_[ticket.index] = who;
    return how;
}

std::optional<net::simple_answer> document_service::write_done(const store::write_result& result) {
    const write_ticket t = write_ticket::decode(result.tag);
    PERCORE_REQUIRES(t.from() == issuer::connection && t.answer.index < waiters_.size());
    const write_waiter who = waiters_[t.answer.index];
    PERCORE_ASSERT(who != write_waiter::none);
    if (who == write_waiter::apps) return admin_api_.write_done(result);
    if (who == write_waiter::deliveries) return deliveries_.write_done(result);  // none: retried
    if (result.outcome == store::write_outcome::quota_exceeded)
        return net::simple_answer{507, false, 0,
                                  result.refusal == static_cast<std::uint8_t>(quota_verdict::documents)
                                      ? "quota exceeded: documents"
                                      : "quota exceeded: bytes"};
    return write_answer(result.outcome, result.version, result.current_exists);
}

void document_service::build_key(std::string_view app, std::string_view key) {
    key_.assign(app);
    key_.push_back('\0');
    key_.append(key);
}

net::request_handler::result document_service::handle(net::request& req, net::response& res, net::answer_ticket ticket) {
    const net::route& r = route_of(req.head, ticket, false);
    net::method verb = req.head.verb;
    bool read = verb == net::method::get || verb == net::method::head;
    const principal& who = access_.principal_of(ticket);
    switch (r.kind) {
    case net::target_kind::apps:
    case net::target_kind::app:
    case net::target_kind::app_tokens:
    case net::target_kind::app_token:
        return note_waiter(admin_api_.handle(req, res, r, who, ticket), ticket, write_waiter::apps);
    case net::target_kind::app_deliveries:
    case net::target_kind::app_delivery:
        return note_waiter(deliveries_.handle(req, res, r, who, ticket), ticket, write_waiter::deliveries);
    case net::target_kind::not_found:
        res.error(404, "not found");
        return result::answered;
    case net::target_kind::bad:
        res.error(400, r.reason);
        return result::answered;
    case net::target_kind::health:
    case net::target_kind::metrics:
    case net::target_kind::stats:
        if (!read) res.error(405, "method not allowed", read_methods);
        else if (r.kind == net::target_kind::health) admin_.health(res);
        else if (r.kind == net::target_kind::metrics) admin_.metrics(res);
        else admin_.stats(res);
        return result::answered;
    case net::target_kind::list:
        if (!read) {
            res.error(405, "method not allowed", read_methods);
        } else {
            bool empty = false;
            std::string_view prefix = list_prefix(who, r, empty);
            if (empty) res.json(200, "{\"keys\":[],\"next\":null}");
            else list_documents(res, r, prefix);
        }
        return result::answered;
    case net::target_kind::changes:
        if (!read) {
            res.error(405, "method not allowed", read_methods);
            return result::answered;
        }
        return list_changes(req, res, r, who, ticket);
    case net::target_kind::replication:
        if (!read) {
            res.error(405, "method not allowed", read_methods);
            return result::answered;
        }
        return replication_page(res, r, ticket);
    case net::target_kind::backup:
        return begin_backup(res, verb, ticket);
    case net::target_kind::asterisk:
        // The connection lets `*` through only for OPTIONS (RFC 9112 §3.2.4).
        if (verb == net::method::options) allow_answer(res, server_methods);
        else res.error(400, "malformed target");
        return result::answered;
    case net::target_kind::document:
        if (read) return read_document(req, res, r);
        if (verb == net::method::put || verb == net::method::del)
            return note_waiter(write_document(req, res, r, ticket), ticket, write_waiter::documents);
        if (verb == net::method::options) allow_answer(res, document_methods);
        else res.error(405, "method not allowed", document_methods);
        return result::answered;
    }
    res.error(500, "internal error");
    return result::answered;
}

net::request_handler::result document_service::read_document(const net::request& req, net::response& res,
                                                             const net::route& r) {
    auto pre = preconditions_of(req.head);
    if (!pre) {
        res.error(400, pre.error());
        return result::answered;
    }
    build_key(r.app, r.key);
    const store::snapshot* snap = stores_.current(stores_.owner_of(key_));
    const store::document* doc = snap ? snap->find(key_) : nullptr;
    switch (read_precondition_status(*pre, doc)) {
    case 412:
        if (doc) res.error_with_etag(412, "precondition failed", doc->version());
        else res.error(412, "precondition failed");
        return result::answered;
    case 304:
        res.start(304);
        res.etag(doc->version());
        res.end_head();
        return result::answered;
    default:
        break;
    }
    if (!doc) res.error(404, "not found");
    else send_document(res, req.head, *snap, *doc);
    return result::answered;
}

// 200 with the whole value, or 206 / 416 for a GET's Range (RFC 9110 §14; SPEC §4).
void document_service::send_document(net::response& res, const net::request_head& head, const store::snapshot& snap,
                                     const store::document& doc) {
    net::byte_range range = requested_range(head, doc.version(), doc.value_size());
    if (range.what == net::byte_range::kind::unsatisfiable) {
        char bytes[net::content_range_bytes];
        res.start(416);
        res.header("Content-Range", net::format_unsatisfied_range(doc.value_size(), bytes));
        res.header("Content-Type", "application/json");
        constexpr std::string_view body = "{\"error\":\"range not satisfiable\"}";
        res.content_length(body.size());
        res.end_head();
        res.body(body);
        return;
    }
    if (range.what != net::byte_range::kind::part) {
        res.document_head(200, doc.content_type(), doc.version(), doc.value_size());
        send_value(res, snap, doc, 0, doc.value_size());
        return;
    }
    char bytes[net::content_range_bytes];
    res.start(206);
    res.header("Content-Type", doc.content_type());
    res.etag(doc.version());
    res.header("Accept-Ranges", "bytes");
    res.header("Content-Range", net::format_content_range(range.first, range.last, doc.value_size(), bytes));
    res.content_length(range.size());
    res.end_head();
    send_value(res, snap, doc, range.first, range.size());
}

void document_service::send_value(net::response& res, const store::snapshot& snap, const store::document& doc,
                                  std::uint64_t offset, std::uint64_t size) {
    if (doc.in_file()) {
        // sent from the log segment with sendfile; the snapshot's handle stays open until sent
        const store::segment_file* file = snap.segment(doc.segment());
        PERCORE_ASSERT(file != nullptr);   // a snapshot names every segment it uses
        file->retain();
        res.body_file(file->descriptor(), doc.file_offset() + offset, size, release_segment_file,
                      const_cast<store::segment_file*>(file));
        return;
    }
    std::string_view value = doc.value().substr(offset, size);
    if (value.size() >= zero_copy_min_bytes) {
        doc.retain();
        res.body_reference(value, release_document, const_cast<store::document*>(&doc));
    } else {
        res.body(value);
    }
}

net::request_handler::result document_service::write_document(net::request& req, net::response& res,
                                                              const net::route& r, net::answer_ticket ticket) {
    auto pre = preconditions_of(req.head);
    if (!pre) {
        res.error(400, pre.error());
        return result::answered;
    }
    build_key(r.app, r.key);
    const net::request_head& head = req.head;
    app_entry* app = admission_.app_named(r.app, ticket);
    if (app && head.verb == net::method::put && req.body().size() > app->max_document_bytes()) {
        add(app->counters(stores_.self()).refused_quota);  // a chunked body: known only now
        res.error(413, "quota exceeded: max_document_bytes");
        return result::answered;
    }
    const unsigned owner = stores_.owner_of(key_);
    store::write_op op;
    op.tag = write_ticket{stores_.self(), ticket}.encode();
    op.pre = std::move(*pre);
    if (app) {
        op.gate = app;
        op.turn_class = app->index();
    }
    if (head.verb == net::method::put) {
        std::string_view content_type;
        if (!head.find("content-type", content_type) || content_type.empty()) content_type = default_content_type;
        std::size_t size = req.body().size();
        op.kind = store::write_kind::put;
        store::document_pool* own = owner == stores_.self() ? stores_.own_documents() : nullptr;
        if (own && size <= store::document::inline_value_max_bytes) {
            // made in the store's memory at once: no copy when its batch applies it (~380
            // instructions a durable write in callgrind)
            op.doc = store::copy_document(*own, key_, content_type, req.body());
        } else {
            std::unique_ptr<char[]> value = size ? req.take_body() : nullptr;
            op.doc = store::make_document(key_, content_type, std::move(value), size);
        }
    } else {
        op.kind = store::write_kind::erase;
        op.key = key_;
    }
    stores_.submit(owner, std::move(op));
    return result::pending;
}

// A list's prefix within a token's reach: the asked prefix when it lies inside the token's, the
// token's when it lies inside the asked one, and nothing (an empty page) when they part.
std::string_view document_service::list_prefix(const principal& who, const net::route& r, bool& empty) const {
    empty = false;
    if (who.kind != principal_kind::app_token || who.prefix.empty() || r.prefix.starts_with(who.prefix)) return r.prefix;
    if (std::string_view(who.prefix).starts_with(r.prefix)) return who.prefix;
    empty = true;
    return {};
}

void document_service::list_documents(net::response& res, const net::route& r, std::string_view prefix) {
    build_key(r.app, prefix);
    const std::size_t app_bytes = r.app.size() + 1;
    std::string_view prefix_key = key_;
    // seek start: after `after` when it is at or past the prefix, else at the prefix
    std::string start;
    bool exclusive = false;
    if (r.has_after && r.after >= prefix) {
        start.reserve(app_bytes + r.after.size());
        start.assign(r.app);
        start.push_back('\0');
        start.append(r.after);
        exclusive = true;
    }
    std::string_view seek_key = exclusive ? std::string_view(start) : prefix_key;
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        const store::snapshot* snap = stores_.current(i);
        if (snap) cursors_[i].seek(*snap, seek_key, exclusive);
        else cursors_[i] = store::snapshot::cursor();
    }
    text_.assign("{\"keys\":[");
    std::uint32_t emitted = 0;
    std::string_view last;
    bool more = false;
    for (;;) {
        int best = -1;
        for (unsigned i = 0; i < stores_.shard_count(); ++i) {
            auto& c = cursors_[i];
            if (!c.valid()) continue;
            if (!c.doc().key().starts_with(prefix_key)) {
                c = store::snapshot::cursor();
                continue;
            }
            if (best < 0 || c.doc().key() < cursors_[static_cast<unsigned>(best)].doc().key()) best = static_cast<int>(i);
        }
        if (best < 0) break;
        if (emitted == r.limit) {
            more = true;
            break;
        }
        const store::document& doc = cursors_[static_cast<unsigned>(best)].doc();
        if (emitted) text_.push_back(',');
        text_.append("{\"key\":");
        last = doc.key().substr(app_bytes);
        append_json_string(text_, last);
        text_.append(",\"etag\":\"\\\"");
        char etag[net::etag_text_bytes];
        net::format_etag(doc.version(), etag);
        text_.append(etag + 1, 16);
        text_.append("\\\"\",\"size\":");
        append_uint(text_, doc.value_size());
        text_.push_back('}');
        ++emitted;
        cursors_[static_cast<unsigned>(best)].next();
    }
    text_.append("],\"next\":");
    if (more) append_json_string(text_, last);
    else text_.append("null");
    text_.push_back('}');
    res.json(200, text_);
}

namespace {
std::int64_t steady_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

// GET /_changes/{app} (SPEC §8): a page after `since` (feed=normal, or a long poll that has
// changes or no timeout), else a wait (feed_waits.hpp).
net::request_handler::result document_service::list_changes(const net::request& req, net::response& res,
                                                            const net::route& r, const principal& who,
                                                            net::answer_ticket ticket) {
    std::string_view since = r.has_since ? r.since : std::string_view();
    std::string_view last_event_id;
    if (!r.has_since && r.feed == net::feed_mode::eventsource && req.head.find("last-event-id", last_event_id))
        since = last_event_id;
    auto start = feed_.start(since);
    if (!start) return refuse_feed(res, start.error(), apps_.find(r.app));
    feed_cursor pos = std::move(*start);
    bool empty = false;
    std::string_view prefix = list_prefix(who, r, empty);
    build_key(r.app, prefix);
    if (empty) key_.append("\xff\xff");  // a prefix outside the token's: no key of the app starts with it
    if (r.feed == net::feed_mode::continuous || r.feed == net::feed_mode::eventsource)
        return wait_for_changes(r, std::move(pos), ticket, res);
    feed_waits::begin_page(text_);
    std::uint32_t n = feed_.page(pos, key_, r.app.size() + 1, r.limit, change_feed::format::json_array, text_);
    if (r.feed == net::feed_mode::longpoll && n == 0 && r.timeout_s > 0)
        return wait_for_changes(r, std::move(pos), ticket, res);
    add(metrics_.feed_changes_sent, n);
    if (app_entry* app = n ? apps_.find(r.app) : nullptr) add(app->counters(stores_.self()).feed_changes_sent, n);
    feed_waits::end_page(text_, pos);
    res.json(200, text_);
    return result::answered;
}

// A `since` the feed cannot start from: 400, or 410 with the oldest cursor (SPEC §8), counted for
// the server and for `app` when there is one.
net::request_handler::result document_service::refuse_feed(net::response& res, const feed_refusal& why,
                                                           app_entry* app) {
    if (why.status != 410) {
        res.error(why.status, why.error);
        return result::answered;
    }
    add(metrics_.feed_cursors_expired);
    if (app) add(app->counters(stores_.self()).feed_cursors_expired);
    text_.assign("{\"error\":\"cursor expired\",\"oldest\":\"");
    text_.append(why.oldest);
    text_.append("\"}");
    res.json(410, text_);
    return result::answered;
}

// GET /_changes/_all (SPEC §10, replication_page.hpp): a follower's page of every app's changes
// with their values; a long poll with nothing yet waits like a feed's.
net::request_handler::result document_service::replication_page(net::response& res, const net::route& r,
                                                                net::answer_ticket ticket) {
    auto start = feed_.start(r.has_since ? r.since : std::string_view());
    if (!start) return refuse_feed(res, start.error(), nullptr);
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

// GET /_backup (SPEC §11, backup_stream.hpp): answered by the stream, once every shard's capture
// is in.
net::request_handler::result document_service::begin_backup(net::response& res, net::method verb,
                                                            net::answer_ticket ticket) {
    if (verb != net::method::get && verb != net::method::head) {
        res.error(405, "method not allowed", read_methods);
        return result::answered;
    }
    if (!backups_.can_back_up()) {
        res.error(501, "this server cannot stream backups");
        return result::answered;
    }
    if (backups_.full()) {
        res.error(503, "too many backups at once");
        return result::answered;
    }
    backups_.begin(ticket, verb == net::method::head);
    return result::pending;
}

net::request_handler::result document_service::wait_for_changes(const net::route& r, feed_cursor pos,
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
    w.deadline_ns = now + (r.feed == net::feed_mode::longpoll ? static_cast<std::int64_t>(r.timeout_s) * second
                                                              : w.heartbeat_ns);
    waits_.add(std::move(w));
    return result::pending;
}

}  // namespace percore::shards
