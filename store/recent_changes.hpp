// recent_changes: a shard's latest changes in version order — a window that lets the change feed
// list what changed after a recent cursor without scanning every key under its prefix
// (changes.hpp). Without it a delivery batch of 3,000 changes of an app of 10,000 keys visited all
// 10,000 (~860 instructions a listed change); with it a listing costs its own changes.
//
// Shape
// - Each published batch that changed something becomes one change_chunk: the batch's changes as
//   (version, key, deleted) in ascending version, the keys copied into the chunk (a key's document
//   may be gone by the time a reader looks; the key is what it looks it up by). Chunks link from the
//   newest to older ones. A chunk covers every change with a version in (after_version,
//   high_version]: the batches of a shard take consecutive version ranges.
//
//     change_chunk (one allocation):  header | entry[count] | key bytes
//     entry:  version u64 | key_offset u32 | key_bytes u16 | deleted u8 | pad
//
// - A snapshot holds the newest chunk as of its publication and the window's floor: every change
//   after the floor is in the chunks from that newest one back to the one whose after_version is
//   the floor. A listing after a cursor at or above the floor reads chunks only while
//   after_version > cursor, so it never looks past the window of its snapshot.
// - The window is bounded (limits.hpp: max_recent_changes entries, max_recent_change_bytes bytes):
//   when a publication would pass a bound, the floor rises past the oldest chunks. A chunk is freed
//   once no live snapshot's window holds it (reclaim(), after the snapshots before it are gone:
//   snapshots are reclaimed in publication order, and floors only rise).
// - Kept only once asked for: a shard keeps no window until a reader found a snapshot without one
//   (wanted()), so a server without feeds or deliveries pays nothing. Once kept, it stays.
//
// Contract
// - Owner thread only (the store's): note(), make_chunk(), advance(), reclaim(), the destructor.
// - Readers (any thread, inside a reader round) read chunks through a snapshot: a published chunk
//   never changes, and lives while a snapshot that holds it in its window does.
// - wanted() and ask() are the one field both sides touch: a relaxed atomic flag.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace percore::store {

struct change_chunk {
    struct entry {
        std::uint64_t version;
        std::uint32_t key_offset;  // into the chunk's key bytes
        std::uint16_t key_bytes;   // keys are at most max_key_bytes (0xFFFF)
        bool deleted;
    };

    std::uint64_t after_version = 0;  // covers the versions (after_version, high_version]
    std::uint64_t high_version = 0;
    const change_chunk* older = nullptr;
    std::uint32_t count = 0;
    std::uint32_t bytes = 0;  // of the whole allocation

    const entry* entries() const { return reinterpret_cast<const entry*>(this + 1); }
    std::string_view key(const entry& e) const {
        return {reinterpret_cast<const char*>(entries() + count) + e.key_offset, e.key_bytes};
    }
};

struct change_notes_view {
    const std::vector<change_chunk::entry>& entries;
    std::string_view keys;
};

// The changes of the batch being formed, in the order they were applied (ascending versions).
class change_notes {
public:
    void note(std::uint64_t version, std::string_view key, bool deleted);
    bool empty() const { return entries_.empty(); }
    std::size_t size() const { return entries_.size(); }
    void clear();

private:
    friend class recent_changes;
    std::vector<change_chunk::entry> entries_;
    std::string keys_;
};

class recent_changes {
public:
    recent_changes() = default;
    ~recent_changes();
    recent_changes(const recent_changes&) = delete;
    recent_changes& operator=(const recent_changes&) = delete;

    // Whether the owner keeps a window; readers ask for one when they find none.
    bool kept() const { return kept_; }
    bool wanted() const { return wanted_.load(std::memory_order_relaxed); }
    std::atomic<bool>* asking_flag() { return &wanted_; }

    // The next publication's window. `notes`: the changes of the batch published, with versions in
    // (after_version, high_version], or null when the publication has no noted changes (the batch
    // was formed while no window was kept or wanted; or it changed no version: compaction, expired
    // tombstones, a new segment table). A noted batch starts the window when none is kept, with the
    // floor at after_version. Returns the newest chunk and the floor for the snapshot to carry;
    // floor UINT64_MAX: no window. REQUIRES: once kept, every publication that adds versions is noted.
    struct window {
        const change_chunk* newest = nullptr;
        std::uint64_t floor = UINT64_MAX;
    };
    window advance(const change_notes* notes, std::uint64_t after_version, std::uint64_t high_version);

    // Frees the chunks no live snapshot can reach: those at or below `oldest_live_floor`, the floor
    // of the oldest snapshot still alive.
    void reclaim(std::uint64_t oldest_live_floor);

    std::size_t chunks() const { return chunks_.size(); }
    std::size_t entries() const { return entries_; }
    std::size_t bytes() const { return bytes_; }

private:
    void free_front();

    std::atomic<bool> wanted_{false};
    bool kept_ = false;
    std::deque<change_chunk*> chunks_;  // oldest first; the newest is the window's newest
    std::size_t window_first_ = 0;      // index in chunks_ of the oldest chunk inside the window
    std::uint64_t floor_ = UINT64_MAX;
    std::size_t entries_ = 0;  // inside the window
    std::size_t bytes_ = 0;    // inside the window
};

}  // namespace percore::store
