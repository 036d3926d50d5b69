// snapshot: one immutable, published state of a shard's documents, ordered by key (byte-wise).
//
// Contract
// - Made and published only by the owning store, after a batch of writes has been applied (and, in
//   the durable store, synced). Never changed afterwards.
// - Any thread may read a snapshot it loaded from store::current() during one reader round (see
//   epoch.hpp); it stays valid until that thread's next begin_round()/quiesce().
// - Lookups and iteration allocate nothing.
// - Besides its documents a snapshot holds the tombstones of deleted keys (the change feed's
//   deletes, changes.hpp): a second tree of zero-length documents, key -> the delete's version.
//   They are not documents: find(), cursor::seek(), document_count() and value_bytes() never see
//   them; find_deleted() and cursor::seek_deleted() do. A key is in at most one of the two trees.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "store/document.hpp"
#include "store/segment_file.hpp"

namespace percore::store {

struct tree_node;     // persistent tree node, defined in tree_node.hpp
struct change_chunk;  // a published batch's changes, defined in recent_changes.hpp

class snapshot {
public:
    static constexpr std::size_t max_tree_height = 64;

    const document* find(std::string_view key) const;

    std::uint64_t document_count() const { return document_count_; }
    std::uint64_t value_bytes() const { return value_bytes_; }
    std::uint64_t sequence() const { return sequence_; }  // 1, 2, 3... per store, one per publication
    // The sequence of the newest publication that may have changed a document or tombstone whose
    // key starts with the store's watched prefix (shard_store::watch_keys): a reader of those keys
    // that saw this value before need not look again. sequence() when the store watches nothing.
    std::uint64_t watched_sequence() const { return watched_sequence_; }

    // The tombstone of a deleted key (value empty, version: the delete's); null unless the key was
    // deleted, not put since, and its tombstone not yet expired (shard_store::expire_changes).
    const document* find_deleted(std::string_view key) const;
    // The highest version whose change (put or delete) is in this snapshot; 0 when none. A feed that
    // has listed every change of this snapshot resumes after it.
    std::uint64_t high_version() const { return high_version_; }
    // The change feed's floor when this snapshot was published: a cursor below it (after_version <
    // feed_floor()) may have missed deletes whose tombstones expired, and must start over. 0: none.
    std::uint64_t feed_floor() const { return feed_floor_; }

    // The window of recent changes (recent_changes.hpp) as of this snapshot: its newest chunk, and
    // the floor after which every change is in the chunks; floor UINT64_MAX when the shard keeps
    // none. ask_for_recent_changes() tells the owner that a reader would have used one.
    const change_chunk* recent_changes() const { return recent_; }
    std::uint64_t recent_floor() const { return recent_floor_; }
    void ask_for_recent_changes() const {
        if (recent_asking_) recent_asking_->store(true, std::memory_order_relaxed);
    }

    // The open log segment `id` (for values that live only in the log); null if none. Retain it to
    // use it past the reader round.
    const segment_file* segment(std::uint64_t id) const { return segments_ ? segments_->find(id) : nullptr; }

    // In-order cursor over documents; fixed-size, allocation-free.
    class cursor {
    public:
        cursor() = default;
        // Positions at the first document whose key is >= key (or > key when `exclusive`).
        void seek(const snapshot& s, std::string_view key, bool exclusive) { seek_in(s.root_, key, exclusive); }
        // The same over the tombstones of deleted keys (doc() is then a tombstone).
        void seek_deleted(const snapshot& s, std::string_view key, bool exclusive) {
            seek_in(s.tombstones_, key, exclusive);
        }
        bool valid() const { return depth_ > 0; }
        const document& doc() const;
        void next();

    private:
        void seek_in(const tree_node* root, std::string_view key, bool exclusive);
        const tree_node* path_[max_tree_height];
        std::size_t depth_ = 0;
    };

private:
    friend class doc_tree;
    friend class shard_store;
    const tree_node* root_ = nullptr;
    const tree_node* tombstones_ = nullptr;  // deleted keys, not documents
    std::uint64_t high_version_ = 0;
    std::uint64_t feed_floor_ = 0;
    std::uint64_t document_count_ = 0;
    std::uint64_t value_bytes_ = 0;
    std::uint64_t sequence_ = 0;
    std::uint64_t watched_sequence_ = 0;
    std::shared_ptr<const segment_table> segments_;
    const change_chunk* recent_ = nullptr;
    std::uint64_t recent_floor_ = UINT64_MAX;
    std::atomic<bool>* recent_asking_ = nullptr;  // the owning store's flag; outlives the snapshot
};

}  // namespace percore::store
