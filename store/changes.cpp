#include "store/changes.hpp"

#include <algorithm>

#include "shards/runtime/check.hpp"
#include "store/recent_changes.hpp"

namespace percore::store {

namespace {

bool earlier(const change& a, const change& b) { return a.version < b.version; }

// Keeps the `limit` smallest versions of `out` (versions are unique within a shard); returns the
// largest kept, above which nothing offered later can be kept.
std::uint64_t keep_smallest(std::vector<change>& out, std::size_t limit) {
    std::nth_element(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(limit - 1), out.end(), earlier);
    out.resize(limit);
    return std::max_element(out.begin(), out.end(), earlier)->version;
}

// Offers every key under `prefix` of one tree (documents, or tombstones when `deleted`) to `out`;
// counts the matching changes in `matched`. `out` holds at most 2 x limit: past that it is cut to
// the `limit` smallest (linear on average) and `ceiling` drops to the largest kept. Sorting once
// at the end, rather than keeping a heap per key, measured ~3x fewer instructions per listed change
// (a delivery batch of 3,300 changes out of 10,000 keys: sort_heap alone was ~360 a change).
void scan(const snapshot& s, bool deleted, std::uint64_t after_version, std::string_view prefix, std::size_t limit,
          std::vector<change>& out, std::size_t& matched, std::uint64_t& ceiling) {
    snapshot::cursor c;
    if (deleted) c.seek_deleted(s, prefix, false);
    else c.seek(s, prefix, false);
    for (; c.valid() && c.doc().key().starts_with(prefix); c.next()) {
        const document& d = c.doc();
        if (d.version() <= after_version) continue;
        ++matched;
        if (d.version() > ceiling) continue;
        out.push_back(change{d.key(), d.version(), d.etag_version(), deleted ? 0 : d.value_size(), deleted, &d});
        if (out.size() == 2 * limit) ceiling = keep_smallest(out, limit);
    }
}

// Lists from the window of recent changes (recent_changes.hpp) when the cursor is inside it:
// gathers the window's entries after the cursor under the prefix, newest first, then takes them
// oldest first, each only if it is still its key's state in this snapshot (a key changed again is
// listed at its newer version; an expired tombstone is gone), until `limit`; `more` is exact: it
// looks on for one more that stands. Returns false, listing nothing, when there is no window or
// the cursor is below it.
bool from_window(const snapshot& s, std::uint64_t after_version, std::string_view prefix, std::size_t limit,
                 std::vector<change>& out, bool& more) {
    if (after_version < s.recent_floor()) return false;
    thread_local std::vector<std::pair<const change_chunk*, const change_chunk::entry*>> found;
    found.clear();
    for (const change_chunk* c = s.recent_changes(); c && c->high_version > after_version;
         c = c->after_version > after_version ? c->older : nullptr) {
        for (std::uint32_t i = c->count; i-- > 0;) {
            const change_chunk::entry& e = c->entries()[i];
            if (e.version <= after_version) break;
            if (c->key(e).starts_with(prefix)) found.emplace_back(c, &e);
        }
    }
    more = false;
    for (auto it = found.rbegin(); it != found.rend(); ++it) {
        const auto& [chunk, e] = *it;
        const std::string_view key = chunk->key(*e);
        const document* d = e->deleted ? s.find_deleted(key) : s.find(key);
        if (!d || d->version() != e->version) continue;  // changed again since, or expired
        if (out.size() == limit) {
            more = true;
            break;
        }
        out.push_back(
            change{d->key(), d->version(), d->etag_version(), e->deleted ? 0 : d->value_size(), e->deleted, d});
    }
    return true;
}

}  // namespace

bool changes_after_by_scan(const snapshot& s, std::uint64_t after_version, std::string_view key_prefix,
                           std::size_t limit, std::vector<change>& out) {
    PERCORE_REQUIRES(limit > 0 && limit <= SIZE_MAX / 2);
    out.clear();
    std::size_t matched = 0;
    std::uint64_t ceiling = UINT64_MAX;
    scan(s, false, after_version, key_prefix, limit, out, matched, ceiling);
    scan(s, true, after_version, key_prefix, limit, out, matched, ceiling);
    if (out.size() > limit) keep_smallest(out, limit);
    std::sort(out.begin(), out.end(), earlier);
    return matched > out.size();
}

bool changes_after(const snapshot& s, std::uint64_t after_version, std::string_view key_prefix, std::size_t limit,
                   std::vector<change>& out) {
    PERCORE_REQUIRES(limit > 0 && limit <= SIZE_MAX / 2);
    out.clear();
    bool more = false;
    if (from_window(s, after_version, key_prefix, limit, out, more)) return more;
    if (s.recent_floor() == UINT64_MAX) s.ask_for_recent_changes();
    return changes_after_by_scan(s, after_version, key_prefix, limit, out);
}

}  // namespace percore::store
