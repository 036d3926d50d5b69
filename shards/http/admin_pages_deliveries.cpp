// admin_pages' member file: /_metrics' deliveries' series (SPEC §9) — each delivery's state, lag
// and attempts, read from the delivery records in every shard's snapshot (the records are the
// truth: the engine writes every attempt's outcome into them).
#include <algorithm>
#include <tuple>

#include "shards/http/admin_pages.hpp"
#include "shards/http/prometheus_writer.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/deliveries/deliveries_admin.hpp"
#include "shards/deliveries/delivery_record.hpp"

namespace percore::shards {

namespace {

struct delivery_row {
    std::string app, name;
    delivery_record record;
};

// The labelled deliveries (the first in key order over all shards) and how many there are.
std::vector<delivery_row> delivery_rows(const server_view& server, std::size_t& total) {
    std::vector<delivery_row> rows;
    total = 0;
    for (unsigned s = 0; s < server.shard_count(); ++s) {
        const store::snapshot* snap = server.snapshot_of(s);
        if (!snap) continue;
        store::snapshot::cursor c;
        for (c.seek(*snap, delivery_records, false); c.valid() && c.doc().key().starts_with(delivery_records);
             c.next()) {
            ++total;
            std::string_view rest = c.doc().key().substr(delivery_records.size());
            const std::size_t slash = rest.find('/');
            if (c.doc().in_file() || slash == std::string_view::npos) continue;
            auto d = decode_delivery_record(c.doc().value());
            if (!d) continue;
            rows.push_back({std::string(rest.substr(0, slash)), std::string(rest.substr(slash + 1)), std::move(*d)});
        }
    }
    std::sort(rows.begin(), rows.end(),
              [](const delivery_row& a, const delivery_row& b) { return std::tie(a.app, a.name) < std::tie(b.app, b.name); });
    if (rows.size() > metrics_labelled_deliveries) rows.resize(metrics_labelled_deliveries);
    return rows;
}

void labels(std::string& out, const delivery_row& r) {
    out.append("{app=");
    append_json_string(out, r.app);
    out.append(",delivery=");
    append_json_string(out, r.name);
}

}  // namespace

void admin_pages::metrics_deliveries(change_feed& feed) {
    std::size_t total = 0;
    const std::vector<delivery_row> rows = delivery_rows(server_, total);
    const std::int64_t now_ms = unix_now_ms();
    prometheus_writer w{text_};
    w.family("percore_deliveries", "gauge", "Deliveries that exist (the first 20 by app and name are labelled below).");
    w.plain("percore_deliveries", std::uint64_t{total});
    std::vector<std::uint64_t> lags;
    for (const delivery_row& r : rows) lags.push_back(delivery_lag_changes(feed, r.record, r.app, scratch_));
    auto series = [&](std::string_view name, std::string_view help, auto value) {
        w.family(name, "gauge", help);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            text_.append(name);
            labels(text_, rows[i]);
            text_.append("} ");
            append_uint(text_, value(rows[i], lags[i]));
            text_.push_back('\n');
        }
    };
    series("percore_delivery_lag_changes", "Changes after the delivery's cursor (counted up to 10,000).",
           [](const delivery_row&, std::uint64_t lag) { return lag; });
    series("percore_delivery_lag_seconds", "Seconds the delivery has waited with changes to send.",
           [&](const delivery_row& r, std::uint64_t lag) {
               return static_cast<std::uint64_t>(delivery_lag_seconds(r.record, lag, now_ms));
           });
    series("percore_delivery_batch_attempts", "Attempts of the batch in flight.",
           [](const delivery_row& r, std::uint64_t) { return std::uint64_t{r.record.attempts}; });
    w.family("percore_delivery_state", "gauge", "1 for the delivery's state (active, retrying, failed, disabled).");
    for (const delivery_row& r : rows) {
        text_.append("percore_delivery_state");
        labels(text_, r);
        text_.append(",state=\"").append(state_name(r.record.state)).append("\"} 1\n");
    }
}

}  // namespace percore::shards
