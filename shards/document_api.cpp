#include "shards/document_api.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "shards/metrics.hpp"
#include "shards/shard.hpp"
#include "shards/shard_group.hpp"
#include "store/document.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

namespace {

constexpr std::string_view document_methods = "GET, HEAD, PUT, DELETE";
constexpr std::string_view read_methods = "GET, HEAD";
constexpr std::string_view default_content_type = "application/octet-stream";

// Calls f(tag) for every member of the comma-separated entity-tag lists in all fields `name`:
// "*", a quoted tag, or a W/-prefixed quoted tag. Members that are none of these are skipped.
template <class F>
void for_each_etag(const net::request_head& head, std::string_view name, F&& f) {
    for (const net::header_field& field : head.fields) {
        if (!net::iequals(field.name, name)) continue;
        std::string_view v = field.value;
        std::size_t i = 0;
        while (i < v.size()) {
            while (i < v.size() && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) ++i;
            if (i >= v.size()) break;
            std::size_t start = i;
            if (v[i] == '*') {
                f(std::string_view("*"));
                ++i;
            } else {
                if (v.substr(i, 2) == "W/") i += 2;
                if (i < v.size() && v[i] == '"') {
                    std::size_t close = v.find('"', i + 1);
                    if (close == std::string_view::npos) break;
                    f(v.substr(start, close + 1 - start));
                    i = close + 1;
                }
            }
            while (i < v.size() && v[i] != ',') ++i;
        }
    }
}

bool has_field(const net::request_head& head, std::string_view name) {
    std::string_view ignored;
    return head.find(name, ignored);
}

void release_document(void* doc) { static_cast<const store::document*>(doc)->release(); }
void release_segment_file(void* file) { static_cast<const store::segment_file*>(file)->release(); }

void append_uint(std::string& out, std::uint64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, end);
}

// Seconds and bucket bounds as a decimal with up to nine places (nanoseconds), trailing zeros
// dropped. Integer arithmetic only: the shortest-float formatter of libstdc++ would add ~150 KiB
// of tables to the binary and to the idle RSS for the sake of two metrics.
void append_decimal(std::string& out, double v) {
    if (!(v >= 0)) v = 0;
    constexpr double max_seconds = 1e9;
    if (v > max_seconds) v = max_seconds;
    auto nanos = static_cast<std::uint64_t>(v * 1e9 + 0.5);
    append_uint(out, nanos / 1'000'000'000);
    std::uint64_t frac = nanos % 1'000'000'000;
    if (frac == 0) return;
    char digits[10] = {'.'};
    for (int i = 9; i >= 1; --i, frac /= 10) digits[i] = static_cast<char>('0' + frac % 10);
    int len = 10;
    while (digits[len - 1] == '0') --len;
    out.append(digits, static_cast<std::size_t>(len));
}

void append_json_string(std::string& out, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    out.push_back('"');
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(ch);
        } else if (c < 0x20) {
            out.append("\\u00");
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 0xf]);
        } else {
            out.push_back(ch);
        }
    }
    out.push_back('"');
}

}  // namespace

std::uint64_t make_tag(unsigned origin, net::answer_ticket t) {
    return static_cast<std::uint64_t>(origin) << 54 | static_cast<std::uint64_t>(t.index & 0x3fffff) << 32 |
           t.generation;
}
unsigned tag_origin(std::uint64_t tag) { return static_cast<unsigned>(tag >> 54); }
net::answer_ticket tag_ticket(std::uint64_t tag) {
    return {static_cast<std::uint32_t>(tag >> 32 & 0x3fffff), static_cast<std::uint32_t>(tag)};
}

document_api::document_api(shard_group& group, shard& self, shard_metrics& metrics)
    : group_(group), self_(self), metrics_(metrics), cursors_(group.size()) {
    key_.reserve(net::max_app_bytes + 1 + net::max_key_bytes);
}

void document_api::answered(net::method verb, int status, std::uint64_t latency_ns) {
    metrics_.record_request(verb, status, latency_ns);
}

void document_api::build_key(std::string_view app, std::string_view key) {
    key_.assign(app);
    key_.push_back('\0');
    key_.append(key);
}

net::request_handler::result document_api::handle(net::request& req, net::response& res, net::answer_ticket ticket) {
    self_.enter_round();
    net::route r = net::parse_route(req.head.target, scratch_);
    net::method verb = req.head.verb;
    bool read = verb == net::method::get || verb == net::method::head;
    switch (r.kind) {
    case net::target_kind::not_found:
        res.error(404, "not found");
        return result::answered;
    case net::target_kind::bad:
        res.error(400, r.reason);
        return result::answered;
    case net::target_kind::health:
    case net::target_kind::metrics:
    case net::target_kind::stats:
        if (!read) {
            res.error(405, "method not allowed", read_methods);
        } else if (r.kind == net::target_kind::health) {
            health(res);
        } else if (r.kind == net::target_kind::metrics) {
            metrics_text(res);
        } else {
            stats_json(res);
        }
        return result::answered;
    case net::target_kind::list:
        if (!read) res.error(405, "method not allowed", read_methods);
        else list_documents(res, r);
        return result::answered;
    case net::target_kind::document:
        if (read) return get_document(req, res, r);
        if (verb == net::method::put || verb == net::method::del) return write_document(req, res, r, ticket);
        res.error(405, "method not allowed", document_methods);
        return result::answered;
    }
    res.error(500, "internal error");
    return result::answered;
}

net::request_handler::result document_api::get_document(const net::request& req, net::response& res,
                                                        const net::route& r) {
    build_key(r.app, r.key);
    const store::snapshot* snap = group_.at(group_.owner_of(key_)).store().current();
    const store::document* doc = snap ? snap->find(key_) : nullptr;
    const net::request_head& head = req.head;

    if (has_field(head, "if-match")) {
        bool pass = false;
        for_each_etag(head, "if-match", [&](std::string_view tag) {
            std::uint64_t v;
            if (!doc) return;
            if (tag == "*" || (net::parse_etag(tag, false, v) && v == doc->version())) pass = true;
        });
        if (!pass) {
            if (doc) res.error_with_etag(412, "precondition failed", doc->version());
            else res.error(412, "precondition failed");
            return result::answered;
        }
    }
    if (doc && has_field(head, "if-none-match")) {
        bool match = false;
        for_each_etag(head, "if-none-match", [&](std::string_view tag) {
            std::uint64_t v;
            if (tag == "*" || (net::parse_etag(tag, true, v) && v == doc->version())) match = true;
        });
        if (match) {
            res.start(304);
            res.etag(doc->version());
            res.end_head();
            return result::answered;
        }
    }
    if (!doc) {
        res.error(404, "not found");
        return result::answered;
    }
    const store::segment_file* file = doc->in_file() ? snap->segment(doc->segment()) : nullptr;
    if (doc->in_file() && !file) {
        res.error(500, "value unavailable");  // unreachable: a snapshot names every segment it uses
        return result::answered;
    }
    res.start(200);
    res.header("Content-Type", doc->content_type());
    res.etag(doc->version());
    res.content_length(doc->value_size());
    res.end_head();
    if (file) {
        // sent from the log segment with sendfile; the snapshot's handle stays open until sent
        file->retain();
        res.body_file(file->descriptor(), doc->file_offset(), doc->value_size(), release_segment_file,
                      const_cast<store::segment_file*>(file));
        return result::answered;
    }
    std::string_view value = doc->value();
    if (value.size() >= zero_copy_min_bytes) {
        doc->retain();
        res.body_reference(value, release_document, const_cast<store::document*>(doc));
    } else {
        res.body(value);
    }
    return result::answered;
}

net::request_handler::result document_api::write_document(net::request& req, net::response&, const net::route& r,
                                                          net::answer_ticket ticket) {
    build_key(r.app, r.key);
    const net::request_head& head = req.head;
    store::write_op op;
    op.tag = make_tag(self_.id(), ticket);
    for_each_etag(head, "if-match", [&](std::string_view tag) {
        std::uint64_t v;
        if (tag == "*") op.pre.if_match_any = true;
        else if (net::parse_etag(tag, false, v)) op.pre.if_match.push_back(v);
    });
    op.pre.has_if_match = has_field(head, "if-match");
    for_each_etag(head, "if-none-match", [&](std::string_view tag) {
        std::uint64_t v;
        if (tag == "*") op.pre.if_none_match_any = true;
        else if (net::parse_etag(tag, true, v)) op.pre.if_none_match.push_back(v);
    });
    op.pre.has_if_none_match = has_field(head, "if-none-match");

    if (head.verb == net::method::put) {
        std::string_view content_type;
        if (!head.find("content-type", content_type) || content_type.empty()) content_type = default_content_type;
        std::size_t size = req.body().size();
        std::unique_ptr<char[]> value = size ? req.take_body() : nullptr;
        op.kind = store::write_kind::put;
        op.doc = store::make_document(key_, content_type, std::move(value), size);
    } else {
        op.kind = store::write_kind::erase;
        op.key = key_;
    }
    self_.submit(group_.owner_of(key_), std::move(op));
    return result::pending;
}

void document_api::list_documents(net::response& res, const net::route& r) {
    build_key(r.app, r.prefix);
    const std::size_t app_bytes = r.app.size() + 1;
    std::string_view prefix_key = key_;
    // seek start: after `after` when it is at or past the prefix, else at the prefix
    std::string start;
    bool exclusive = false;
    if (r.has_after && r.after >= r.prefix) {
        start.reserve(app_bytes + r.after.size());
        start.assign(r.app);
        start.push_back('\0');
        start.append(r.after);
        exclusive = true;
    }
    std::string_view seek_key = exclusive ? std::string_view(start) : prefix_key;
    for (unsigned i = 0; i < group_.size(); ++i) {
        const store::snapshot* snap = group_.at(i).store().current();
        if (snap) cursors_[i].seek(*snap, seek_key, exclusive);
        else cursors_[i] = store::snapshot::cursor();
    }
    text_.assign("{\"keys\":[");
    std::uint32_t emitted = 0;
    std::string_view last;
    bool more = false;
    for (;;) {
        int best = -1;
        for (unsigned i = 0; i < group_.size(); ++i) {
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

void document_api::health(net::response& res) {
    if (group_.serving() && group_.any_store_failed()) {
        res.start(503);
        std::string_view body = "{\"status\":\"failing\",\"reason\":\"a shard cannot sync its log; writes are refused, reads go on\"}";
        res.header("Content-Type", "application/json");
        res.content_length(body.size());
        res.end_head();
        res.body(body);
    } else if (group_.serving()) {
        text_.assign("{\"status\":\"ok\",\"shards\":");
        append_uint(text_, group_.size());
        text_.push_back('}');
        res.json(200, text_);
    } else {
        res.start(503);
        res.header("Retry-After", "1");
        std::string_view body = group_.stopping() ? "{\"status\":\"stopping\"}" : "{\"status\":\"starting\"}";
        res.header("Content-Type", "application/json");
        res.content_length(body.size());
        res.end_head();
        res.body(body);
    }
}

namespace {

struct metric_writer {
    std::string& out;

    void family(std::string_view name, std::string_view type, std::string_view help) {
        out.append("# HELP ").append(name).push_back(' ');
        out.append(help).push_back('\n');
        out.append("# TYPE ").append(name).push_back(' ');
        out.append(type).push_back('\n');
    }
    void sample(std::string_view name, unsigned shard, std::string_view labels, std::uint64_t v) {
        out.append(name).append("{shard=\"");
        append_uint(out, shard);
        out.push_back('"');
        if (!labels.empty()) out.push_back(',');
        out.append(labels).append("} ");
        append_uint(out, v);
        out.push_back('\n');
    }
    void sample_double(std::string_view name, unsigned shard, double v) {
        out.append(name).append("{shard=\"");
        append_uint(out, shard);
        out.append("\"} ");
        append_decimal(out, v);
        out.push_back('\n');
    }
    template <std::size_t N, class B>
    void write_histogram(std::string_view name, unsigned shard, const shards::histogram<N>& h,
                   const std::array<B, N>& bounds, double sum_scale) {
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= N; ++i) {
            cumulative += read(h.buckets[i]);
            out.append(name).append("_bucket{shard=\"");
            append_uint(out, shard);
            out.append("\",le=\"");
            if (i == N) out.append("+Inf");
            else append_decimal(out, static_cast<double>(bounds[i]));
            out.append("\"} ");
            append_uint(out, cumulative);
            out.push_back('\n');
        }
        out.append(name).append("_sum{shard=\"");
        append_uint(out, shard);
        out.append("\"} ");
        append_decimal(out, static_cast<double>(read(h.sum)) * sum_scale);
        out.push_back('\n');
        out.append(name).append("_count{shard=\"");
        append_uint(out, shard);
        out.append("\"} ");
        append_uint(out, read(h.count));
        out.push_back('\n');
    }
};

}  // namespace

void document_api::metrics_text(net::response& res) {
    text_.clear();
    metric_writer w{text_};
    const unsigned n = group_.size();

    w.family("percore_requests_total", "counter", "Requests answered, by method and status.");
    for (unsigned s = 0; s < n; ++s) {
        const shard_metrics& m = group_.at(s).metrics();
        for (std::size_t mi = 0; mi < metric_methods.size(); ++mi)
            for (std::size_t si = 0; si < metric_statuses.size(); ++si) {
                std::uint64_t v = read(m.requests[mi][si]);
                if (!v) continue;
                std::string labels = "method=\"" + std::string(metric_methods[mi]) + "\",status=\"" +
                                     (metric_statuses[si] ? std::to_string(metric_statuses[si]) : "other") + "\"";
                w.sample("percore_requests_total", s, labels, v);
            }
    }
    w.family("percore_request_duration_seconds", "histogram",
             "Time from a request's head to its answer, measured at loop-round granularity.");
    for (unsigned s = 0; s < n; ++s)
        w.write_histogram("percore_request_duration_seconds", s, group_.at(s).metrics().latency_ns, latency_bounds_seconds, 1e-9);
    w.family("percore_write_batch_writes", "histogram", "Writes applied per batch.");
    for (unsigned s = 0; s < n; ++s)
        w.write_histogram("percore_write_batch_writes", s, group_.at(s).metrics().batch_writes, batch_size_bounds, 1.0);
    w.family("percore_write_batch_bytes_total", "counter", "Value bytes written in batches.");
    for (unsigned s = 0; s < n; ++s) w.sample("percore_write_batch_bytes_total", s, "", read(group_.at(s).metrics().batch_bytes));
    w.family("percore_sync_duration_seconds", "histogram",
             "Duration of each batch's fdatasync (none while the store is in memory).");
    for (unsigned s = 0; s < n; ++s)
        w.write_histogram("percore_sync_duration_seconds", s, group_.at(s).metrics().sync_ns, latency_bounds_seconds, 1e-9);
    w.family("percore_received_bytes_total", "counter", "Bytes read from client connections.");
    for (unsigned s = 0; s < n; ++s) w.sample("percore_received_bytes_total", s, "", read(group_.at(s).connection_stats().bytes_in));
    w.family("percore_sent_bytes_total", "counter", "Bytes written to client connections.");
    for (unsigned s = 0; s < n; ++s) w.sample("percore_sent_bytes_total", s, "", read(group_.at(s).connection_stats().bytes_out));
    w.family("percore_connections", "gauge", "Open client connections.");
    for (unsigned s = 0; s < n; ++s) w.sample("percore_connections", s, "", read(group_.at(s).connection_stats().active));
    w.family("percore_connections_accepted_total", "counter", "Connections accepted.");
    for (unsigned s = 0; s < n; ++s)
        w.sample("percore_connections_accepted_total", s, "", read(group_.at(s).connection_stats().accepted));
    w.family("percore_connections_refused_total", "counter", "Connections refused past --max-connections.");
    for (unsigned s = 0; s < n; ++s)
        w.sample("percore_connections_refused_total", s, "", read(group_.at(s).connection_stats().refused));
    w.family("percore_body_bytes_in_flight", "gauge", "Request body bytes held against the body budget.");
    for (unsigned s = 0; s < n; ++s)
        w.sample("percore_body_bytes_in_flight", s, "", read(group_.at(s).connection_stats().body_bytes_in_flight));
    w.family("percore_documents", "gauge", "Documents owned by the shard (published snapshot).");
    for (unsigned s = 0; s < n; ++s) {
        const store::snapshot* snap = group_.at(s).store().current();
        w.sample("percore_documents", s, "", snap ? snap->document_count() : 0);
    }
    w.family("percore_live_bytes", "gauge", "Value bytes of the documents owned by the shard.");
    for (unsigned s = 0; s < n; ++s) {
        const store::snapshot* snap = group_.at(s).store().current();
        w.sample("percore_live_bytes", s, "", snap ? snap->value_bytes() : 0);
    }
    w.family("percore_cross_shard_messages_total", "counter", "Messages sent to other shards.");
    for (unsigned s = 0; s < n; ++s)
        w.sample("percore_cross_shard_messages_total", s, "", read(group_.at(s).metrics().messages_sent));
    w.family("percore_recovery_seconds", "gauge", "Time the shard's store took to recover at start.");
    for (unsigned s = 0; s < n; ++s)
        w.sample_double("percore_recovery_seconds", s, group_.at(s).metrics().recovery_seconds.load(std::memory_order_relaxed));

    res.start(200);
    res.header("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    res.content_length(text_.size());
    res.end_head();
    res.body(text_);
}

void document_api::stats_json(net::response& res) {
    text_.assign("{\"serving\":");
    text_.append(group_.serving() ? "true" : "false");
    text_.append(",\"shards\":[");
    for (unsigned s = 0; s < group_.size(); ++s) {
        const shard& sh = group_.at(s);
        const shard_metrics& m = sh.metrics();
        const net::connection_stats& c = sh.connection_stats();
        const store::snapshot* snap = sh.store().current();
        std::uint64_t requests = 0;
        for (const auto& row : m.requests)
            for (const auto& v : row) requests += read(v);
        if (s) text_.push_back(',');
        auto field = [&](std::string_view name, std::uint64_t v, bool first = false) {
            if (!first) text_.push_back(',');
            text_.push_back('"');
            text_.append(name).append("\":");
            append_uint(text_, v);
        };
        text_.push_back('{');
        field("shard", s, true);
        field("cpu", static_cast<std::uint64_t>(group_.cpu_of(s)));
        field("documents", snap ? snap->document_count() : 0);
        field("live_bytes", snap ? snap->value_bytes() : 0);
        field("snapshot", snap ? snap->sequence() : 0);
        field("connections", read(c.active));
        field("connections_accepted", read(c.accepted));
        field("connections_refused", read(c.refused));
        field("requests", requests);
        field("bytes_in", read(c.bytes_in));
        field("bytes_out", read(c.bytes_out));
        field("body_bytes_in_flight", read(c.body_bytes_in_flight));
        field("write_batches", read(m.batch_writes.count));
        field("batched_writes", read(m.batch_writes.sum));
        field("remote_writes", read(m.remote_writes));
        field("messages_sent", read(m.messages_sent));
        field("messages_received", read(m.messages_received));
        field("wakeups_sent", read(m.wakeups_sent));
        text_.append(",\"recovery_seconds\":");
        append_decimal(text_, m.recovery_seconds.load(std::memory_order_relaxed));
        text_.push_back('}');
    }
    text_.append("]}");
    res.json(200, text_);
}

}  // namespace percore::shards
