#include "shards/http/documents_endpoint.hpp"

#include "net/byte_range.hpp"
#include "shards/base/http_decisions.hpp"
#include "shards/base/json_text.hpp"
#include "shards/base/metrics.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/base/write_ticket.hpp"
#include "shards/runtime/check.hpp"
#include "store/document.hpp"
#include "store/segment_file.hpp"

namespace percore::shards {

namespace {

constexpr std::string_view read_methods = "GET, HEAD";
constexpr std::string_view default_content_type = "application/octet-stream";

void release_document(void* doc) { static_cast<const store::document*>(doc)->release(); }
void release_segment_file(void* file) { static_cast<const store::segment_file*>(file)->release(); }

// A GET's Range, honoured only when If-Range (if any) names the current ETag version with a strong
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

void allow_answer(net::response& res, std::string_view allow) {
    res.start(204);
    res.header("Allow", allow);
    res.end_head();
}

documents_endpoint::documents_endpoint(store_client& stores, const admission_control& admission)
    : stores_(stores), admission_(admission), self_(stores.self()), cursors_(stores.shard_count()) {
    key_.reserve(net::max_app_bytes + 1 + net::max_key_bytes);
}

net::request_handler::result documents_endpoint::handle(net::request& req, net::response& res, const net::route& r,
                                                        const principal& who, net::answer_ticket ticket) {
    PERCORE_REQUIRES(on_shard_thread(self_));
    PERCORE_REQUIRES(r.kind == net::target_kind::document || r.kind == net::target_kind::list);
    const net::method verb = req.head.verb;
    const bool read = verb == net::method::get || verb == net::method::head;
    if (r.kind == net::target_kind::list) {
        if (read) list_page(res, r, who);
        else res.error(405, "method not allowed", read_methods);
        return result::answered;
    }
    if (read) return read_document(req, res, r);
    if (verb == net::method::put || verb == net::method::del) return write_document(req, res, r, ticket);
    if (verb == net::method::options) allow_answer(res, document_methods);
    else res.error(405, "method not allowed", document_methods);
    return result::answered;
}

std::optional<net::simple_answer> documents_endpoint::write_done(const store::write_result& result) {
    PERCORE_REQUIRES(on_shard_thread(self_));
    if (result.outcome == store::write_outcome::quota_exceeded)
        return net::simple_answer{507, false, 0,
                                  result.refusal == static_cast<std::uint8_t>(quota_verdict::documents)
                                      ? "quota exceeded: documents"
                                      : "quota exceeded: bytes"};
    return write_answer(result.outcome, result.version, result.current_exists);
}

// app '\0' key, written in one pass (every GET and PUT builds one: ~150 instructions as assign,
// push_back and append, callgrind).
void documents_endpoint::build_key(std::string_view app, std::string_view key) {
    key_.resize_and_overwrite(app.size() + 1 + key.size(), [&](char* p, std::size_t n) {
        app.copy(p, app.size());
        p[app.size()] = '\0';
        key.copy(p + app.size() + 1, key.size());
        return n;
    });
}

net::request_handler::result documents_endpoint::read_document(const net::request& req, net::response& res,
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
        if (doc) res.error_with_etag(412, "precondition failed", doc->etag_version());
        else res.error(412, "precondition failed");
        return result::answered;
    case 304:
        res.start(304);
        res.etag(doc->etag_version());
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
void documents_endpoint::send_document(net::response& res, const net::request_head& head,
                                       const store::snapshot& snap, const store::document& doc) {
    net::byte_range range = requested_range(head, doc.etag_version(), doc.value_size());
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
        res.document_head(200, doc.content_type(), doc.etag_version(), doc.value_size());
        send_value(res, snap, doc, 0, doc.value_size());
        return;
    }
    char bytes[net::content_range_bytes];
    res.start(206);
    res.header("Content-Type", doc.content_type());
    res.etag(doc.etag_version());
    res.header("Accept-Ranges", "bytes");
    res.header("Content-Range", net::format_content_range(range.first, range.last, doc.value_size(), bytes));
    res.content_length(range.size());
    res.end_head();
    send_value(res, snap, doc, range.first, range.size());
}

void documents_endpoint::send_value(net::response& res, const store::snapshot& snap, const store::document& doc,
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

net::request_handler::result documents_endpoint::write_document(net::request& req, net::response& res,
                                                                const net::route& r, net::answer_ticket ticket) {
    auto pre = preconditions_of(req.head);
    if (!pre) {
        res.error(400, pre.error());
        return result::answered;
    }
    build_key(r.app, r.key);
    const bool put = req.head.verb == net::method::put;
    app_entry* app = admission_.app_named(r.app, ticket);
    if (app && put && req.body().size() > app->max_document_bytes()) {
        add(app->counters(self_).refused_quota);  // a chunked body: known only now
        res.error(413, "quota exceeded: max_document_bytes");
        return result::answered;
    }
    const unsigned owner = stores_.owner_of(key_);
    store::write_op op;
    op.tag = write_ticket{self_, ticket}.encode();
    op.pre = std::move(*pre);
    if (app) {
        op.gate = app;
        op.turn_class = app->index();
    }
    if (put) {
        put_document(op, req, owner);
    } else {
        op.kind = store::write_kind::erase;
        op.key = key_;
    }
    stores_.submit(owner, std::move(op));
    return result::pending;
}

// The PUT's document, made for the store of `owner`.
void documents_endpoint::put_document(store::write_op& op, net::request& req, unsigned owner) {
    std::string_view content_type;
    if (!req.head.find("content-type", content_type) || content_type.empty()) content_type = default_content_type;
    const std::size_t size = req.body().size();
    op.kind = store::write_kind::put;
    store::document_pool* own = owner == self_ ? stores_.own_documents() : nullptr;
    if (own && size <= store::document::inline_value_max_bytes) {
        // made in the store's memory at once: no copy when its batch applies it (~380
        // instructions a durable write in callgrind)
        op.doc = store::copy_document(*own, key_, content_type, req.body());
    } else {
        std::unique_ptr<char[]> value = size ? req.take_body() : nullptr;
        op.doc = store::make_document(key_, content_type, std::move(value), size);
    }
}

// A list page within the token's reach: an empty page when the asked prefix and the token's part.
void documents_endpoint::list_page(net::response& res, const net::route& r, const principal& who) {
    const std::optional<std::string_view> prefix = reachable_prefix(who, r.prefix);
    if (!prefix) res.json(200, "{\"keys\":[],\"next\":null}");
    else list_documents(res, r, *prefix);
}

// {"keys":[{"key","etag","size"}…],"next":key or null}: every shard's keys of the app under
// `prefix`, merged in byte order, after r.after when it is at or past the prefix, up to r.limit.
void documents_endpoint::list_documents(net::response& res, const net::route& r, std::string_view prefix) {
    build_key(r.app, prefix);
    const std::size_t app_bytes = r.app.size() + 1;
    const bool exclusive = r.has_after && r.after >= prefix;
    if (exclusive) {
        after_.assign(r.app);
        after_.push_back('\0');
        after_.append(r.after);
    }
    seek_cursors(exclusive ? std::string_view(after_) : std::string_view(key_), exclusive);
    text_.assign("{\"keys\":[");
    std::uint32_t emitted = 0;
    std::string_view last;
    bool more = false;
    for (int best; (best = smallest_cursor(key_)) >= 0;) {
        if (emitted == r.limit) {
            more = true;
            break;
        }
        store::snapshot::cursor& c = cursors_[static_cast<unsigned>(best)];
        last = c.doc().key().substr(app_bytes);
        append_listed(c.doc(), last, emitted++ == 0);
        c.next();
    }
    text_.append("],\"next\":");
    if (more) append_json_string(text_, last);
    else text_.append("null");
    text_.push_back('}');
    res.json(200, text_);
}

// Every shard's cursor at `key` (past it when exclusive); none for a shard without a snapshot.
void documents_endpoint::seek_cursors(std::string_view key, bool exclusive) {
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        const store::snapshot* snap = stores_.current(i);
        if (snap) cursors_[i].seek(*snap, key, exclusive);
        else cursors_[i] = store::snapshot::cursor();
    }
}

// The shard whose cursor stands at the smallest key under `prefix_key` (-1: none); cursors past
// the prefix are ended.
int documents_endpoint::smallest_cursor(std::string_view prefix_key) {
    int best = -1;
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        store::snapshot::cursor& c = cursors_[i];
        if (!c.valid()) continue;
        if (!c.doc().key().starts_with(prefix_key)) {
            c = store::snapshot::cursor();
            continue;
        }
        if (best < 0 || c.doc().key() < cursors_[static_cast<unsigned>(best)].doc().key()) best = static_cast<int>(i);
    }
    return best;
}

// {"key":…,"etag":"\"…\"","size":N}, after a comma unless first.
void documents_endpoint::append_listed(const store::document& doc, std::string_view key, bool first) {
    if (!first) text_.push_back(',');
    text_.append("{\"key\":");
    append_json_string(text_, key);
    text_.append(",\"etag\":\"\\\"");
    char etag[net::etag_text_bytes];
    net::format_etag(doc.etag_version(), etag);
    text_.append(etag + 1, 16);
    text_.append("\\\"\",\"size\":");
    append_uint(text_, doc.value_size());
    text_.push_back('}');
}

}  // namespace percore::shards
