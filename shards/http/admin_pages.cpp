#include "shards/http/admin_pages.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "net/connection_stats.hpp"
#include "shards/base/build_info.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/deliveries/deliveries_admin.hpp"
#include "shards/follower/follower.hpp"
#include "shards/http/process_stats.hpp"
#include "shards/http/prometheus_writer.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

net::request_handler::result admin_pages::handle(net::request& req, net::response& res, const net::route& r,
                                                 const principal&, net::answer_ticket) {
    PERCORE_REQUIRES(on_shard_thread(self_));
    PERCORE_REQUIRES(r.kind == net::target_kind::health || r.kind == net::target_kind::metrics ||
                     r.kind == net::target_kind::stats);
    if (req.head.verb != net::method::get && req.head.verb != net::method::head)
        res.error(405, "method not allowed", "GET, HEAD");
    else if (r.kind == net::target_kind::health && r.probe != net::health_probe::status) probe(res, r);
    else if (r.kind == net::target_kind::health) health(res);
    else if (r.kind == net::target_kind::metrics) metrics(res);
    else stats(res);
    return result::answered;
}

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
        append_role();
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

// HAProxy's checks (SPEC §12): /_health/primary is 200 on a serving primary whose stores all sync
// (without --cluster there is no lease: a primary holds its role alone); /_health/replica is 200 on
// a serving follower connected to its primary and, with `lag`, within that many changes of it.
void admin_pages::probe(net::response& res, const net::route& r) {
    const follower_status* f = server_.follower();
    const bool serving = server_.serving() && !server_.any_store_failed();
    bool healthy = false;
    if (r.probe == net::health_probe::primary) {
        healthy = serving && server_.role().may_acknowledge_now();
    } else {
        const bool connected = f && f->connected.load(std::memory_order_relaxed);
        healthy = serving && connected && (!r.has_lag || f->lag_changes.load(std::memory_order_relaxed) <= r.lag);
    }
    text_.assign(healthy ? "{\"status\":\"ok\"" : "{\"status\":\"unavailable\"");
    append_role();
    text_.push_back('}');
    res.json(healthy ? 200 : 503, text_);
}

// ,"role":"primary", or a follower's role, primary and lag (SPEC §10).
void admin_pages::append_role() {
    const follower_status* f = server_.follower();
    if (!f) {
        text_.append(",\"role\":\"primary\"");
        return;
    }
    text_.append(",\"role\":\"follower\",\"primary\":");
    append_json_string(text_, server_.role().leader_url());
    text_.append(",\"connected\":");
    text_.append(f->connected.load(std::memory_order_relaxed) ? "true" : "false");
    text_.append(",\"lag\":{\"changes\":");
    append_uint(text_, f->lag_changes.load(std::memory_order_relaxed));
    text_.append(",\"seconds\":");
    const double seconds = f->lag_seconds(unix_now_ms());
    append_ratio(text_, static_cast<std::uint64_t>(seconds * 1000), 1000);
    text_.append("}");
}

void admin_pages::metrics_follower() {
    const follower_status* f = server_.follower();
    prometheus_writer w{text_};
    w.family("percore_follower", "gauge", "1 on a read-only follower (SPEC 10), 0 on a primary.");
    w.plain("percore_follower", std::uint64_t{f ? 1u : 0u});
    // SPEC §12 "A returning primary": what this board held that the new primary did not
    w.family("percore_diverged_documents_total", "counter",
             "Documents this board held that its new primary did not, kept in DATA/diverged-{epoch}.tar.");
    w.plain("percore_diverged_documents_total", f ? f->diverged_documents.load(std::memory_order_relaxed) : 0);
    w.family("percore_diverged_files_total", "counter", "DATA/diverged-{epoch}.tar files written.");
    w.plain("percore_diverged_files_total", f ? f->diverged_files.load(std::memory_order_relaxed) : 0);
    if (!f) return;
    w.family("percore_follower_lag_changes", "gauge", "Changes the primary holds that this follower has not applied.");
    w.plain("percore_follower_lag_changes", f->lag_changes.load(std::memory_order_relaxed));
    w.family("percore_follower_lag_seconds", "gauge", "Seconds since this follower was last known to be caught up.");
    w.plain_ratio("percore_follower_lag_seconds", static_cast<std::uint64_t>(f->lag_seconds(unix_now_ms()) * 1000), 1000);
    w.family("percore_follower_connected", "gauge", "1 when the last exchange with the primary succeeded.");
    w.plain("percore_follower_connected", std::uint64_t{f->connected.load(std::memory_order_relaxed) ? 1u : 0u});
    w.family("percore_follower_applied_changes_total", "counter", "Changes copied from the primary and made durable.");
    w.plain("percore_follower_applied_changes_total", f->applied_changes.load(std::memory_order_relaxed));
    w.family("percore_follower_pages_total", "counter", "Replication pages applied.");
    w.plain("percore_follower_pages_total", f->pages.load(std::memory_order_relaxed));
    w.family("percore_follower_resyncs_total", "counter", "Full copies begun (no cursor, or the primary answered 410).");
    w.plain("percore_follower_resyncs_total", f->resyncs.load(std::memory_order_relaxed));
    w.family("percore_follower_failed_exchanges_total", "counter", "Exchanges with the primary that failed.");
    w.plain("percore_follower_failed_exchanges_total", f->failed_exchanges.load(std::memory_order_relaxed));
    w.family("percore_follower_rejected_pages_total", "counter",
             "Replication pages refused as malformed, too large or against the rules; the first stops the copy.");
    w.plain("percore_follower_rejected_pages_total", f->rejected_pages.load(std::memory_order_relaxed));
}

void admin_pages::metrics(net::response& res) {
    text_.clear();
    metrics_requests();
    metrics_writes();
    metrics_connections();
    metrics_store();
    metrics_process();
    metrics_apps();
    metrics_follower();
    if (feed_) metrics_deliveries(*feed_);
    res.start(200);
    res.header("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    res.content_length(text_.size());
    res.end_head();
    res.body(text_);
}

namespace {

struct app_row {
    std::string_view name;
    std::uint64_t requests = 0, quota = 0, rate = 0, auth = 0, connections = 0;
    std::uint64_t feeds_open = 0, feed_changes_sent = 0, feed_cursors_expired = 0;
    std::int64_t documents = 0, bytes = 0;

    void add(const app_row& o) {
        feeds_open += o.feeds_open;
        feed_changes_sent += o.feed_changes_sent;
        feed_cursors_expired += o.feed_cursors_expired;
        requests += o.requests;
        quota += o.quota;
        rate += o.rate;
        auth += o.auth;
        connections += o.connections;
        documents += o.documents;
        bytes += o.bytes;
    }
};

// Every existing app's figures, the `labelled` with the most requests first and the rest summed
// into one row named "_other" (no app name starts with '_').
std::vector<app_row> top_app_rows(const app_registry& apps, std::size_t labelled, std::uint64_t& existing) {
    std::vector<app_row> rows;
    existing = 0;
    for (const app_entry* e : apps.entries()) {
        if (!e->exists()) continue;
        ++existing;
        app_row r{e->name()};
        for (unsigned s = 0; s < e->shard_count(); ++s) {
            const app_counters& c = e->counters(s);
            r.requests += c.requests.load(std::memory_order_relaxed);
            r.quota += c.refused_quota.load(std::memory_order_relaxed);
            r.rate += c.refused_rate.load(std::memory_order_relaxed);
            r.auth += c.refused_auth.load(std::memory_order_relaxed);
            r.feeds_open += c.feeds_open.load(std::memory_order_relaxed);
            r.feed_changes_sent += c.feed_changes_sent.load(std::memory_order_relaxed);
            r.feed_cursors_expired += c.feed_cursors_expired.load(std::memory_order_relaxed);
        }
        r.connections = e->connections();
        r.documents = e->documents();
        r.bytes = e->bytes();
        rows.push_back(r);
    }
    std::sort(rows.begin(), rows.end(), [](const app_row& a, const app_row& b) {
        return a.requests != b.requests ? a.requests > b.requests : a.name < b.name;
    });
    if (rows.size() > labelled) {
        app_row other{"_other"};
        for (std::size_t i = labelled; i < rows.size(); ++i) other.add(rows[i]);
        rows.resize(labelled);
        rows.push_back(other);
    }
    return rows;
}

std::uint64_t non_negative(std::int64_t v) { return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v)); }

}  // namespace

// Per-app series (SPEC §7), bounded: the metrics_labelled_apps apps with the most requests get their
// own `app` label; every other app is summed under app="_other", so the page's size does not grow
// with the number of apps.
void admin_pages::metrics_apps() {
    std::uint64_t existing = 0;
    const std::vector<app_row> rows = top_app_rows(server_.apps(), metrics_labelled_apps, existing);
    prometheus_writer w{text_};
    w.family("percore_apps", "gauge", "Apps that exist.");
    w.plain("percore_apps", existing);
    auto series = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
        w.family(name, type, help);
        for (const app_row& r : rows) {
            text_.append(name).append("{app=");
            append_json_string(text_, r.name);  // a valid app name needs no escaping; quoted the same
            text_.append("} ");
            append_uint(text_, value(r));
            text_.push_back('\n');
        }
    };
    series("percore_app_requests_total", "counter", "Requests admitted, by app (top apps by requests; the rest as _other).",
           [](const app_row& r) { return r.requests; });
    series("percore_app_documents", "gauge", "Documents, by app.", [](const app_row& r) { return non_negative(r.documents); });
    series("percore_app_bytes", "gauge", "Bytes of document values, by app.",
           [](const app_row& r) { return non_negative(r.bytes); });
    series("percore_app_connections", "gauge", "Connections counted against each app's connections quota.",
           [](const app_row& r) { return r.connections; });
    series("percore_app_feeds_open", "gauge", "Change feeds (long polls and streams) waiting, by app.",
           [](const app_row& r) { return r.feeds_open; });
    series("percore_app_feed_changes_sent_total", "counter", "Changes listed by the app's feeds (pages, long polls, streams).",
           [](const app_row& r) { return r.feed_changes_sent; });
    series("percore_app_feed_cursors_expired_total", "counter",
           "The app's feed cursors answered 410 (expired, foreign or pre-reshard).",
           [](const app_row& r) { return r.feed_cursors_expired; });
    w.family("percore_app_refused_total", "counter", "Requests refused, by app and cause (quota, rate, auth).");
    for (const app_row& r : rows) {
        const std::pair<std::string_view, std::uint64_t> causes[] = {{"quota", r.quota}, {"rate", r.rate}, {"auth", r.auth}};
        for (const auto& [cause, v] : causes) {
            text_.append("percore_app_refused_total{app=");
            append_json_string(text_, r.name);
            text_.append(",cause=\"").append(cause).append("\"} ");
            append_uint(text_, v);
            text_.push_back('\n');
        }
    }
}

void admin_pages::metrics_requests() {
    prometheus_writer w{text_};
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
        for (std::size_t mi = 0; mi < metric_methods.size(); ++mi) {
            std::string labels = "method=\"" + std::string(metric_methods[mi]) + "\"";
            w.histogram("percore_request_duration_seconds", s, server_.metrics_of(s).latency_ns[mi],
                              latency_bounds_seconds, 1e-9, labels);
        }
}

void admin_pages::metrics_writes() {
    prometheus_writer w{text_};
    const unsigned n = server_.shard_count();
    w.family("percore_write_batch_writes", "histogram", "Writes applied per batch.");
    for (unsigned s = 0; s < n; ++s)
        w.histogram("percore_write_batch_writes", s, server_.metrics_of(s).batch_writes, batch_size_bounds, 1.0);
    w.family("percore_write_batch_bytes_total", "counter", "Value bytes written in batches.");
    for (unsigned s = 0; s < n; ++s) w.sample("percore_write_batch_bytes_total", s, "", read(server_.metrics_of(s).batch_bytes));
    w.family("percore_sync_duration_seconds", "histogram",
             "Duration of each batch's fdatasync (none while the store is in memory).");
    for (unsigned s = 0; s < n; ++s)
        w.histogram("percore_sync_duration_seconds", s, server_.metrics_of(s).sync_ns, latency_bounds_seconds, 1e-9);
}

void admin_pages::metrics_connections() {
    prometheus_writer w{text_};
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
    prometheus_writer w{text_};
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
    per_shard(w, "percore_cross_shard_messages_total", "counter", "Messages sent to other shards.",
              &shard_metrics::messages_sent);
    per_shard(w, "percore_feeds_open", "gauge", "Change feeds (long polls and streams) waiting on the shard.",
              &shard_metrics::feeds_open);
    per_shard(w, "percore_feed_changes_sent_total", "counter",
              "Changes the shard's feeds listed (pages, long polls, streams).", &shard_metrics::feed_changes_sent);
    per_shard(w, "percore_feed_cursors_expired_total", "counter",
              "Feed cursors answered 410 (expired, foreign or pre-reshard).", &shard_metrics::feed_cursors_expired);
    per_shard(w, "percore_sync_acknowledged_total", "counter",
              "Writes answered once a synchronous follower had them (--replication sync).", &shard_metrics::sync_acknowledged);
    per_shard(w, "percore_sync_timeouts_total", "counter",
              "Writes answered 503 no synchronous follower (--replication sync).", &shard_metrics::sync_timeouts);
    per_shard(w, "percore_sync_held_writes", "gauge", "Writes durable here, waiting for a follower's acknowledgement.",
              &shard_metrics::sync_held);
    per_shard(w, "percore_sync_ack_lag", "gauge",
              "Versions of the shard durable here that no follower acknowledged yet (--replication sync).",
              &shard_metrics::sync_ack_lag);
    metrics_delivery_counters(w);
    w.family("percore_recovery_seconds", "gauge", "Time the shard's store took to recover at start.");
    for (unsigned s = 0; s < n; ++s)
        w.sample_double("percore_recovery_seconds", s, server_.metrics_of(s).recovery_seconds.load(std::memory_order_relaxed));
}

// The shards' counters of deliveries (SPEC §9): attempts, batches and changes delivered, failures.
void admin_pages::metrics_delivery_counters(prometheus_writer& w) {
    per_shard(w, "percore_delivery_attempts_total", "counter", "Attempts of delivery batches the shard made (SPEC §9).",
              &shard_metrics::delivery_attempts);
    per_shard(w, "percore_delivery_batches_delivered_total", "counter", "Delivery batches a receiver answered 2xx.",
              &shard_metrics::delivery_batches_delivered);
    per_shard(w, "percore_delivery_changes_sent_total", "counter", "Changes in delivered batches.",
              &shard_metrics::delivery_changes_sent);
    w.family("percore_delivery_failures_total", "counter", "Failed delivery attempts, by cause.");
    for (unsigned s = 0; s < server_.shard_count(); ++s)
        for (std::size_t c = 0; c < delivery_failure_causes.size(); ++c)
            w.sample("percore_delivery_failures_total", s,
                     "cause=\"" + std::string(delivery_failure_causes[c]) + "\"",
                     read(server_.metrics_of(s).delivery_failures[c]));
}

// A family with one sample per shard, read from a counter of its shard_metrics.
void admin_pages::per_shard(prometheus_writer& w, std::string_view name, std::string_view type, std::string_view help,
                            const counter shard_metrics::*field) {
    w.family(name, type, help);
    for (unsigned s = 0; s < server_.shard_count(); ++s) w.sample(name, s, "", read(server_.metrics_of(s).*field));
}

// The process metrics every Prometheus client library exports (their names and units), and the
// build. Process-wide: no shard label.
void admin_pages::metrics_process() {
    prometheus_writer w{text_};
    const std::uint64_t ticks = clock_ticks_per_second();
    const process_stat st = read_process_stat();
    w.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    w.plain_ratio("process_cpu_seconds_total", st.cpu_ticks, ticks);
    w.family("process_open_fds", "gauge", "Number of open file descriptors.");
    w.plain("process_open_fds", open_fds());
    w.family("process_max_fds", "gauge", "Maximum number of open file descriptors.");
    w.plain("process_max_fds", max_open_fds());
    w.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
    w.plain("process_virtual_memory_bytes", st.vsize);
    w.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    w.plain("process_resident_memory_bytes", st.rss_pages * page_bytes());
    w.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
    w.plain_ratio("process_start_time_seconds", boot_time_seconds() * ticks + st.start_ticks, ticks);
    w.family("percore_build_info", "gauge", "The build: a constant 1 labelled with version, compiler and build type.");
    text_.append("percore_build_info{version=\"").append(build_info::version);
    text_.append("\",compiler=\"").append(build_info::compiler);
    text_.append("\",buildtype=\"").append(build_info::buildtype);
    text_.append("\"} 1\n");
}

void admin_pages::stats(net::response& res) {
    text_.assign("{\"serving\":");
    text_.append(server_.serving() ? "true" : "false");
    text_.append(",\"shards\":[");
    for (unsigned s = 0; s < server_.shard_count(); ++s) {
        if (s) text_.push_back(',');
        append_shard_stats(s);
    }
    text_.append("]}");
    res.json(200, text_);
}

// One shard's object of /_stats.
void admin_pages::append_shard_stats(unsigned s) {
    const shard_metrics& m = server_.metrics_of(s);
    const net::connection_stats& c = server_.connections_of(s);
    const store::snapshot* snap = server_.snapshot_of(s);
    std::uint64_t requests = 0;
    for (const auto& row : m.requests)
        for (const auto& v : row) requests += read(v);
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
    field("feeds_open", read(m.feeds_open));
    field("feed_changes_sent", read(m.feed_changes_sent));
    field("feed_cursors_expired", read(m.feed_cursors_expired));
    text_.append(",\"recovery_seconds\":");
    append_decimal(text_, m.recovery_seconds.load(std::memory_order_relaxed));
    text_.push_back('}');
}

}  // namespace percore::shards
