#include "shards/feed/replication_page.hpp"

#include "net/response.hpp"
#include "shards/base/json_text.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/base/document_value.hpp"
#include "shards/base/encoding.hpp"
#include "shards/base/limits.hpp"

namespace percore::shards {

namespace {

void append_change(std::string& out, const store::change& c, std::string_view value, std::string_view content_type,
                   bool first) {
    const std::size_t nul = c.key.find('\0');
    if (!first) out.push_back(',');
    out.append("{\"app\":");
    append_json_string(out, c.key.substr(0, nul));
    out.append(",\"key\":");
    append_json_string(out, c.key.substr(nul + 1));
    out.append(",\"etag\":\"\\\"");
    char etag[net::etag_text_bytes];
    net::format_etag(c.etag_version, etag);
    out.append(etag + 1, net::etag_text_bytes - 2);
    if (c.deleted) {
        out.append("\\\"\",\"deleted\":true,\"content_type\":null,\"value_base64\":null}");
        return;
    }
    out.append("\\\"\",\"deleted\":false,\"content_type\":");
    append_json_string(out, content_type);
    out.append(",\"value_base64\":\"");
    const std::size_t at = out.size();
    out.resize(at + base64_bytes(value.size()));
    put_base64(out.data() + at, bytes_of(value));
    out.append("\"}");
}

// The changes after `pos`, counted up to the bound (a copy of the cursor: `pos` does not move).
std::uint64_t count_pending(change_feed& feed, feed_cursor pos) {
    std::uint64_t n = 0;
    feed.visit(pos, std::string_view(), static_cast<std::uint32_t>(max_replication_pending_count),
               [&](const store::change& c, const store::snapshot&, const feed_cursor&) {
        if (!c.key.starts_with(follower_records)) ++n;
        return true;
    });
    return n;
}

}  // namespace

result<replication_page_stats> make_replication_page(change_feed& feed, feed_cursor& pos,
                                                                        std::uint32_t limit, std::string& out) {
    const change_feed::durable_reads durable(feed);  // a follower copies a write before sync shows it
    out.assign("{\"changes\":[");
    replication_page_stats stats;
    std::uint64_t value_bytes = 0;
    bool full = false;
    std::string scratch;
    std::string error;
    const std::uint32_t visited = feed.visit(pos, std::string_view(), limit,
                                             [&](const store::change& c, const store::snapshot& snap, const feed_cursor&) {
        if (c.key.starts_with(follower_records) || c.key.find('\0') == std::string_view::npos) return true;
        std::string_view value;
        std::string_view content_type;
        if (!c.deleted) {
            if (stats.changes > 0 && value_bytes + c.size > max_replication_page_value_bytes) {
                full = true;
                return false;
            }
            if (!c.doc) {
                error = "a listed change has no document";
                return false;
            }
            auto v = document_value(snap, *c.doc, scratch);
            if (!v) {
                error = std::move(v.error().reason);
                return false;
            }
            value = *v;
            content_type = c.doc->content_type();
            value_bytes += value.size();
        }
        append_change(out, c, value, content_type, stats.changes == 0);
        ++stats.changes;
        return true;
    });
    if (!error.empty()) return std::unexpected(std::move(error));
    if (full || visited == limit) stats.pending = count_pending(feed, pos);
    out.append("],\"last_cursor\":\"");
    append_cursor(out, pos);
    out.append("\",\"pending\":");
    append_uint(out, stats.pending);
    out.append(",\"epoch\":");
    append_uint(out, feed.epoch());
    out.push_back('}');
    return stats;
}

}  // namespace percore::shards
