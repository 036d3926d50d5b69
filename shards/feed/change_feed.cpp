#include "shards/feed/change_feed.hpp"

#include "net/response.hpp"
#include "shards/base/json_text.hpp"

namespace percore::shards {

feed_cursor change_feed::now() const {
    feed_cursor c{identity_.directory_id, identity_.generation, {}};
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        const store::snapshot* s = snapshot_of(i);
        c.versions.push_back(s ? s->high_version() : 0);
    }
    return c;
}

feed_cursor change_feed::oldest() const {
    feed_cursor c{identity_.directory_id, identity_.generation, {}};
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        const store::snapshot* s = snapshot_of(i);
        c.versions.push_back(s ? s->feed_floor() : 0);
    }
    return c;
}

result<feed_cursor> change_feed::start(std::string_view since) const {
    if (since.empty() || since == "0")
        return feed_cursor{identity_.directory_id, identity_.generation,
                           std::vector<std::uint64_t>(stores_.shard_count(), 0)};
    if (since == "now") return now();
    auto c = parse_cursor(since);
    if (!c) return std::unexpected(problem{400, std::move(c.error().reason)});
    bool gone = c->directory_id != identity_.directory_id || c->generation != identity_.generation ||
                c->versions.size() != stores_.shard_count();
    for (unsigned i = 0; !gone && i < stores_.shard_count(); ++i) {
        const store::snapshot* s = snapshot_of(i);
        gone = s && c->versions[i] < s->feed_floor();
    }
    if (gone) return std::unexpected(problem{410, "cursor expired"});
    return std::move(*c);
}

void change_feed::append_change(std::string& out, const store::change& c, std::size_t app_bytes,
                                const feed_cursor& pos, format f, bool first) {
    if (f == format::json_array && !first) out.push_back(',');
    if (f == format::event_stream) {
        out.append("id: ");
        append_cursor(out, pos);
        out.append("\ndata: ");
    }
    out.append("{\"key\":");
    append_json_string(out, c.key.substr(app_bytes));
    out.append(",\"etag\":\"\\\"");
    char etag[net::etag_text_bytes];
    net::format_etag(c.etag_version, etag);
    out.append(etag + 1, net::etag_text_bytes - 2);
    out.append("\\\"\",\"size\":");
    append_uint(out, c.size);
    out.append(c.deleted ? ",\"deleted\":true,\"cursor\":\"" : ",\"deleted\":false,\"cursor\":\"");
    append_cursor(out, pos);
    out.append("\"}");
    if (f == format::ndjson) out.push_back('\n');
    else if (f == format::event_stream) out.append("\n\n");
}

std::uint32_t change_feed::page(feed_cursor& pos, std::string_view app_prefix, std::size_t app_bytes,
                                std::uint32_t limit, format f, std::string& out) {
    std::uint32_t emitted = 0;
    return visit(pos, app_prefix, limit, [&](const store::change& c, const store::snapshot&, const feed_cursor& after) {
        append_change(out, c, app_bytes, after, f, emitted++ == 0);
        return true;
    });
}

std::uint32_t change_feed::visit(feed_cursor& pos, std::string_view app_prefix, std::uint32_t limit,
                                 const change_visitor& take) {
    const unsigned shards = stores_.shard_count();
    lists_.resize(shards);
    next_.assign(shards, 0);
    // one snapshot per shard for the whole page: a newer one could hold changes not listed here
    snapshots_.assign(shards, nullptr);
    more_.assign(shards, 0);
    for (unsigned i = 0; i < shards; ++i) {
        lists_[i].clear();
        snapshots_[i] = snapshot_of(i);
        if (snapshots_[i]) more_[i] = store::changes_after(*snapshots_[i], pos.versions[i], app_prefix, limit, lists_[i]);
    }
    std::uint32_t taken = 0;
    while (taken < limit) {
        int best = -1;
        for (unsigned i = 0; i < shards; ++i) {
            if (next_[i] == lists_[i].size()) continue;
            if (best < 0 || lists_[i][next_[i]].version < lists_[static_cast<unsigned>(best)][next_[static_cast<unsigned>(best)]].version)
                best = static_cast<int>(i);
        }
        if (best < 0) break;
        const auto b = static_cast<unsigned>(best);
        const store::change& c = lists_[b][next_[b]];
        const std::uint64_t before = pos.versions[b];
        pos.versions[b] = c.version;
        if (!take(c, *snapshots_[b], pos)) {
            pos.versions[b] = before;  // refused: it stays after the cursor, and so does the shard
            break;
        }
        ++next_[b];
        ++taken;
    }
    // a shard whose every change after the cursor was listed: past everything its snapshot holds
    for (unsigned i = 0; i < shards; ++i) {
        const store::snapshot* s = snapshots_[i];
        if (s && !more_[i] && next_[i] == lists_[i].size() && s->high_version() > pos.versions[i])
            pos.versions[i] = s->high_version();
    }
    return taken;
}

}  // namespace percore::shards
