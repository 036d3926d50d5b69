// segment_set: one shard's log segment files as its store sees them — each segment's bytes and live
// bytes, the read handles that snapshots carry, and the compacted segments waiting to be deleted.
//
// Contract
// - Owned by the shard's store (shard_store.hpp) and called on the owner shard's thread only, like
//   the rest of the store's writing side (the store checks the thread).
// - Accounting: a segment's bytes are its valid bytes as in its file, header and segment list
//   included (as recovery counts them); its live bytes are those of its records that still hold a
//   current document or a tombstone (tombstones stay live until compaction drops them). What is
//   neither header nor live is dead: what compaction (compactor.hpp) reclaims.
// - Sealed: every segment below sealed_below() is sealed, the log never writes to it again.
// - Handles: open() keeps a read handle on a segment whose values readers read from the file. The
//   handles are in a table that the next publication carries (table_for_publication()); the table
//   is replaced, never changed. A handle that left it (a deleted segment) makes table_changed() true
//   until the next table is taken, so that the store publishes again and readers drop it.
// - Retirement: retire(id, after) holds a compacted segment until an append returned ok in a segment
//   above `after` (the log's segment when it was retired: the next one starts with a segment list
//   that leaves it out, durable before its first batch). delete_retired() then unlinks its file,
//   forgets its accounting and drops its handle. A failed unlink is forgotten too: the next start's
//   recovery removes the file as a leftover (no segment list names it anymore).
// - The empty roll: when the retired segments reach their bound, the compactor asks the log for a
//   new segment and the store appends nothing to make it (roll_due()); delete_retired() clears it
//   once no segment is retiring.
// - REQUIRES (PERCORE_REQUIRES): attach() at most once, before the segments are recovered; retire()
//   of a segment not retiring already; delete_retired() with a segment retiring only after attach().
//   Without attach() open() opens nothing (false: the values stay in memory).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/env.hpp"
#include "store/segment_file.hpp"
#include "store/shard_log.hpp"

namespace percore::store {

// Bytes of a segment and how many of them still hold current documents (or tombstones).
struct segment_usage {
    std::uint64_t bytes = 0;
    std::uint64_t live_bytes = 0;
};

class segment_set {
public:
    segment_set() = default;
    segment_set(const segment_set&) = delete;
    segment_set& operator=(const segment_set&) = delete;

    // The shard directory the segment files are in, and the env that reaches them.
    void attach(env& e, std::string directory);
    env* file_env() const { return env_; }
    std::string path(std::uint32_t id) const { return directory_ + "/" + segment_file_name(id); }

    // Accounting (contract above). A segment named for the first time starts at zero.
    const std::map<std::uint32_t, segment_usage>& usage() const { return segments_; }
    // Moves whenever what compaction_victim() reads does: a segment's bytes or live bytes, the
    // seal, retirement. A compactor that found no victim looks again only once it moved.
    std::uint64_t usage_changes() const { return usage_changes_; }
    void set_valid_bytes(std::uint32_t id, std::uint64_t bytes) {
        segments_[id].bytes = bytes;
        ++usage_changes_;
    }
    // Recovery: forgets every segment not in `ids` (those it did not keep).
    void keep_only(const std::vector<std::uint64_t>& ids);
    void add_live_bytes(std::uint32_t id, std::uint64_t bytes) {
        segments_[id].live_bytes += bytes;
        ++usage_changes_;
    }
    void remove_live_bytes(std::uint32_t id, std::uint64_t bytes) {
        segments_[id].live_bytes -= bytes;
        ++usage_changes_;
    }
    // A batch appended ok to `id`, ending at `end_bytes` of the file, `live_bytes` of it still live.
    void note_appended(std::uint32_t id, std::uint64_t end_bytes, std::uint64_t live_bytes);
    // The lowest segment id; 0 when there is none.
    std::uint32_t oldest() const { return segments_.empty() ? 0 : segments_.begin()->first; }

    // The log started segment `id` after sealing every segment below it.
    void seal_below(std::uint64_t id) {
        if (id <= sealed_below_) return;
        sealed_below_ = id;
        ++usage_changes_;
    }
    bool sealed(std::uint32_t id) const { return id < sealed_below_; }

    // Keeps a read handle on `id` (contract above); false: none (no env, or the open failed).
    [[nodiscard]] bool open(std::uint32_t id);
    const segment_file* find_open(std::uint64_t id) const { return table_ ? table_->find(id) : nullptr; }
    std::shared_ptr<const segment_table> table_for_publication() {
        table_changed_ = false;
        return table_;
    }
    bool table_changed() const { return table_changed_; }

    // Retirement (contract above).
    void retire(std::uint32_t id, std::uint64_t after_segment);
    // At the bound: max_retired_segments, or `byte_bound` (the log's segment target) of bytes.
    bool retirement_full(std::uint64_t byte_bound) const;
    bool is_retiring(std::uint32_t id) const;
    std::size_t retiring() const { return retiring_.size(); }
    // After the append `r`: deletes the retired segments its segment's list leaves out.
    void delete_retired(const append_result& r);
    std::uint64_t deleted() const { return segments_deleted_; }

    void set_roll_due() { roll_due_ = true; }
    bool roll_due() const { return roll_due_; }
    void roll_started() { roll_due_ = false; }

private:
    struct retiring_segment {
        std::uint32_t id;
        std::uint64_t bytes;
        std::uint64_t after_segment;  // the log's segment when retired: delete after an append above it
    };
    void close(std::uint32_t id);

    env* env_ = nullptr;
    std::string directory_;
    std::map<std::uint32_t, segment_usage> segments_;
    std::uint64_t usage_changes_ = 0;             // usage_changes()
    std::shared_ptr<const segment_table> table_;  // open segments, for the next publication
    bool table_changed_ = false;                  // a handle left table_ since the last publication
    std::uint64_t sealed_below_ = 0;              // every segment below this id is sealed
    std::vector<retiring_segment> retiring_;      // left out of the next segment list; deleted after it
    std::uint64_t retiring_bytes_ = 0;
    bool roll_due_ = false;                       // a roll was asked for: append nothing to make it
    std::uint64_t segments_deleted_ = 0;
};

}  // namespace percore::store
