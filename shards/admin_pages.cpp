#include "shards/admin_pages.hpp"

#include <charconv>

#include "net/connection_stats.hpp"

namespace percore::shards {

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

void admin_pages::health(net::response& res) {
    if (server_.serving() && server_.any_store_failed()) {
        res.start(503);
        std::string_view body = "{\"status\":\"failing\",\"reason\":\"a shard cannot sync its log; writes are refused, reads go on\"}";
        res.header("Content-Type", "application/json");
        res.content_length(body.size());
        res.end_head();
        res.body(body);
    } else if (server_.serving()) {
        text_.assign("{\"status\":\"ok\",\"shards\":");
        append_uint(text_, server_.shard_count());
        text_.push_back('}');
        res.json(200, text_);
    } else {
        res.start(503);
        res.header("Retry-After", "1");
        std::string_view body = server_.stopping() ? "{\"status\":\"stopping\"}" : "{\"status\":\"starting\"}";
        res.header("Content-Type", "application/json");
        res.content_length(body.size());
        res.end_head();
        res.body(body);
    }
}

void admin_pages::metrics(net::response& res) {
    text_.clear();
    metrics_requests();
    metrics_writes();
    metrics_connections();
    metrics_store();
    res.start(200);
    res.header("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    res.content_length(text_.size());
    res.end_head();
    res.body(text_);
}

void admin_pages::metrics_requests() {
    metric_writer w{text_};
    const unsigned n = server_.shard_count();
    w.family("percore_requests_total", "counter", "Requests answered, by method and status.");
    for (unsigned s = 0; s < n; ++s) {
        const shard_metrics& m = server_.metrics_of(s);
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
        w.write_histogram("percore_request_duration_seconds", s, server_.metrics_of(s).latency_ns, latency_bounds_seconds, 1e-9);
}

void admin_pages::metrics_writes() {
    metric_writer w{text_};
    const unsigned n = server_.shard_count();
    w.family("percore_write_batch_writes", "histogram", "Writes applied per batch.");
    for (unsigned s = 0; s < n; ++s)
        w.write_histogram("percore_write_batch_writes", s, server_.metrics_of(s).batch_writes, batch_size_bounds, 1.0);
    w.family("percore_write_batch_bytes_total", "counter", "Value bytes written in batches.");
    for (unsigned s = 0; s < n; ++s) w.sample("percore_write_batch_bytes_total", s, "", read(server_.metrics_of(s).batch_bytes));
    w.family("percore_sync_duration_seconds", "histogram",
             "Duration of each batch's fdatasync (none while the store is in memory).");
    for (unsigned s = 0; s < n; ++s)
        w.write_histogram("percore_sync_duration_seconds", s, server_.metrics_of(s).sync_ns, latency_bounds_seconds, 1e-9);
}

void admin_pages::metrics_connections() {
    metric_writer w{text_};
    const unsigned n = server_.shard_count();
    w.family("percore_received_bytes_total", "counter", "Bytes read from client connections.");
    for (unsigned s = 0; s < n; ++s) w.sample("percore_received_bytes_total", s, "", read(server_.connections_of(s).bytes_in));
    w.family("percore_sent_bytes_total", "counter", "Bytes written to client connections.");
    for (unsigned s = 0; s < n; ++s) w.sample("percore_sent_bytes_total", s, "", read(server_.connections_of(s).bytes_out));
    w.family("percore_connections", "gauge", "Open client connections.");
    for (unsigned s = 0; s < n; ++s) w.sample("percore_connections", s, "", read(server_.connections_of(s).active));
    w.family("percore_connections_accepted_total", "counter", "Connections accepted.");
    for (unsigned s = 0; s < n; ++s)
        w.sample("percore_connections_accepted_total", s, "", read(server_.connections_of(s).accepted));
    w.family("percore_connections_refused_total", "counter", "Connections refused past --max-connections.");
    for (unsigned s = 0; s < n; ++s)
        w.sample("percore_connections_refused_total", s, "", read(server_.connections_of(s).refused));
    w.family("percore_body_bytes_in_flight", "gauge", "Request body bytes held against the body budget.");
    for (unsigned s = 0; s < n; ++s)
        w.sample("percore_body_bytes_in_flight", s, "", read(server_.connections_of(s).body_bytes_in_flight));
}

void admin_pages::metrics_store() {
    metric_writer w{text_};
    const unsigned n = server_.shard_count();
    w.family("percore_documents", "gauge", "Documents owned by the shard (published snapshot).");
    for (unsigned s = 0; s < n; ++s) {
        const store::snapshot* snap = server_.snapshot_of(s);
        w.sample("percore_documents", s, "", snap ? snap->document_count() : 0);
    }
    w.family("percore_live_bytes", "gauge", "Value bytes of the documents owned by the shard.");
    for (unsigned s = 0; s < n; ++s) {
        const store::snapshot* snap = server_.snapshot_of(s);
        w.sample("percore_live_bytes", s, "", snap ? snap->value_bytes() : 0);
    }
    w.family("percore_cross_shard_messages_total", "counter", "Messages sent to other shards.");
    for (unsigned s = 0; s < n; ++s)
        w.sample("percore_cross_shard_messages_total", s, "", read(server_.metrics_of(s).messages_sent));
    w.family("percore_recovery_seconds", "gauge", "Time the shard's store took to recover at start.");
    for (unsigned s = 0; s < n; ++s)
        w.sample_double("percore_recovery_seconds", s, server_.metrics_of(s).recovery_seconds.load(std::memory_order_relaxed));

}

void admin_pages::stats(net::response& res) {
    text_.assign("{\"serving\":");
    text_.append(server_.serving() ? "true" : "false");
    text_.append(",\"shards\":[");
    for (unsigned s = 0; s < server_.shard_count(); ++s) {
                const shard_metrics& m = server_.metrics_of(s);
        const net::connection_stats& c = server_.connections_of(s);
        const store::snapshot* snap = server_.snapshot_of(s);
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
        field("cpu", static_cast<std::uint64_t>(server_.cpu_of(s)));
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
