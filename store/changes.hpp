// changes: the store side of the change feed (SPEC §8): which changes of one shard came after a
// version.
//
// Contract
// - changes_after() is a pure reader of one snapshot: any thread, inside a reader round (epoch.hpp),
//   like every other read of a snapshot. It allocates nothing but the growth of `out` (and of a
//   per-thread list of the window's entries it looks at).
// - A change is the newest version of a key changed after `after_version`: its document, or its
//   tombstone when it was deleted (snapshot.hpp; tombstones expire, see shard_store.hpp's "Change
//   feed"). Only published (durable) changes are in a snapshot, so only those are listed. An older
//   version of a key that changed again is not listed: the newer one is.
// - Versions are per shard and increase with every change, in commit order: a client that lists
//   with after_version = the last version it saw (or snapshot::high_version() once it saw everything)
//   misses nothing, as long as after_version >= snapshot::feed_floor(); below the floor it may have
//   missed deletes and must start over (the HTTP side says so).
// - `key` points into the snapshot: valid until the reader round ends (retain() the document to
//   keep it longer).
// - Cost: the key range of `key_prefix` is scanned in both trees (documents and tombstones),
//   collecting the changes after `after_version` and cutting them to the `limit` smallest versions
//   whenever 2 x limit are held, then sorting: O(n + m log limit) for n keys (documents and
//   tombstones) under the prefix and m changes after the version; O(limit) memory (at most 2 x
//   limit changes), in `out`. Measured before the cut replaced a heap (-O2, one core of a shared
//   2-core build machine): n = 110,000 keys (100,000 documents, 10,000 tombstones), limit 100 or
//   1000: about 12.5 ms per call, i.e. ~115 ns per key scanned; a feed over
//   a large shard pays that per page, so pages should be large and prefixes narrow. A cursor inside
//   the snapshot's window of recent changes (recent_changes.hpp) is listed from the window instead:
//   O(w + k log n) for w recent changes after the cursor and k of them under the prefix (each looked
//   up once); the first listing without a window asks the shard to keep one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "store/snapshot.hpp"

namespace percore::store {

struct change {
    std::string_view key;       // into the snapshot (contract above)
    std::uint64_t version = 0;  // the put's version, or the delete's: the feed's position
    std::uint64_t etag_version = 0;  // what clients see as its ETag (document.hpp): a copy's primary's
    std::uint64_t size = 0;     // the value's bytes; 0 for a delete
    bool deleted = false;
    const document* doc = nullptr;  // the snapshot's document (a put) or tombstone (a delete): its value, no second find
};

// Replaces `out` with the up to `limit` changes of `s` whose version is above `after_version` and
// whose key starts with `key_prefix`, in ascending version; returns whether more such changes exist
// (then list again from out.back().version). REQUIRES 0 < limit <= SIZE_MAX / 2.
[[nodiscard]] bool changes_after(const snapshot& s, std::uint64_t after_version, std::string_view key_prefix,
                                 std::size_t limit, std::vector<change>& out);
// The same answer by scanning the prefix's keys whatever the window holds (what changes_after does
// when the cursor is below the window, or there is none): for tests that compare the two.
[[nodiscard]] bool changes_after_by_scan(const snapshot& s, std::uint64_t after_version, std::string_view key_prefix,
                                         std::size_t limit, std::vector<change>& out);

}  // namespace percore::store
