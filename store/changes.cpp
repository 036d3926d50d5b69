#include "store/changes.hpp"

#include <algorithm>

#include "shards/runtime/check.hpp"

namespace percore::store {

namespace {

// A max-heap on version: the front is the largest of the `limit` smallest versions seen so far.
bool later(const change& a, const change& b) { return a.version < b.version; }

// Offers every key under `prefix` of one tree (documents, or tombstones when `deleted`) to the
// heap in `out`; counts the matching changes in `matched`.
void scan(const snapshot& s, bool deleted, std::uint64_t after_version, std::string_view prefix, std::size_t limit,
          std::vector<change>& out, std::size_t& matched) {
    snapshot::cursor c;
    if (deleted) c.seek_deleted(s, prefix, false);
    else c.seek(s, prefix, false);
    for (; c.valid() && c.doc().key().starts_with(prefix); c.next()) {
        const document& d = c.doc();
        if (d.version() <= after_version) continue;
        ++matched;
        if (out.size() == limit) {
            if (d.version() >= out.front().version) continue;
            std::pop_heap(out.begin(), out.end(), later);
            out.pop_back();
        }
        out.push_back(change{d.key(), d.version(), deleted ? 0 : d.value_size(), deleted, &d});
        std::push_heap(out.begin(), out.end(), later);
    }
}

}  // namespace

bool changes_after(const snapshot& s, std::uint64_t after_version, std::string_view key_prefix, std::size_t limit,
                   std::vector<change>& out) {
    PERCORE_REQUIRES(limit > 0);
    out.clear();
    std::size_t matched = 0;
    scan(s, false, after_version, key_prefix, limit, out, matched);
    scan(s, true, after_version, key_prefix, limit, out, matched);
    std::sort_heap(out.begin(), out.end(), later);
    return matched > out.size();
}

}  // namespace percore::store
