// change_retention: one shard's change-feed upkeep — how long a deleted key's tombstone is kept,
// and the feed floor below which a feed cursor may have missed a delete.
//
// Contract
// - Owned by the shard's store (shard_store.hpp), which holds the tombstones themselves in its
//   snapshots' tombstone trees (snapshot.hpp; changes.hpp reads them) and publishes what this
//   decides; owner shard's thread only (the store checks it).
// - Deletions: every tombstone a batch makes is noted (note_deletion, one reference held until it
//   expires); so are the tombstones recovery rebuilt (note_recovered). A deletion's time is the
//   `now` of the first pass_time() after it, so a tombstone stays at least the retention.
// - expire_tombstones() removes, from the tombstone tree given, the tombstones deleted at least the
//   retention ago that are still current there (not put or deleted again since), and raises the
//   floor to the highest version it removed.
// - The time-based floor: pass_time() takes a checkpoint of the shard's high version at most once
//   per max(1 s, retention / feed_checkpoints_per_retention), only while it moves (at most
//   feed_checkpoints_per_retention + 2 held; limits.hpp), and raises the floor to the high version of
//   the newest checkpoint at least the retention old.
// - The floor never goes down. persist_floor() writes it to the shard directory's feed_floor file
//   (feed_floor.hpp; a write and two syncs, only when it rose); persisted_floor() is what the file
//   holds. Compaction drops a tombstone record only at or below the persisted floor
//   (compactor.hpp, keep_tombstone), and recovery rebuilds no tombstone at or below it.
// - REQUIRES (PERCORE_REQUIRES): a retention of zero or more; pass_time() with a `now` that never
//   goes back (a monotonic clock); set_recovered_floor() once, before anything is noted.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "store/doc_tree.hpp"
#include "store/document.hpp"
#include "store/env.hpp"
#include "store/snapshot.hpp"

namespace percore::store {

class change_retention {
public:
    using clock = std::chrono::steady_clock;

    explicit change_retention(std::chrono::seconds retention);
    ~change_retention();  // releases the tombstones held
    change_retention(const change_retention&) = delete;
    change_retention& operator=(const change_retention&) = delete;

    // The floor read from the feed_floor file at recovery (0: none): both floors start there.
    void set_recovered_floor(std::uint64_t floor);
    // A tombstone made by a batch being formed (retained here). If the batch fails, its entry names a
    // tombstone no snapshot holds and expires without effect.
    void note_deletion(const document* tomb);
    // The tombstones of a recovered snapshot count as deleted now.
    void note_recovered(const snapshot& snap);

    // The time is `now` and the shard's published high version `high_version`: stamps the deletions
    // since the last call and takes a checkpoint (contract above).
    void pass_time(clock::time_point now, std::uint64_t high_version);
    // Removes the tombstones past their retention from `tombs` (contract above); whether it removed any.
    bool expire_tombstones(doc_tree& tombs);
    // Writes the floor to `directory`'s feed_floor file if it rose. A failed write leaves the file's
    // older floor: compaction keeps the records it does not cover, and the next call tries again.
    void persist_floor(env& e, const std::string& directory);

    std::uint64_t floor() const { return floor_; }
    std::uint64_t persisted_floor() const { return persisted_floor_; }
    std::size_t checkpoints() const { return checkpoints_.size(); }
    std::size_t deletions_held() const { return deletions_.size(); }

private:
    struct deletion {
        const document* tomb;  // one reference; still current while the tombstone tree holds it
        clock::time_point when{};
        bool stamped = false;  // `when` is set: by the first pass_time() after the delete
    };
    struct checkpoint {
        clock::time_point when;
        std::uint64_t high_version;
    };
    void note_checkpoint(clock::time_point now, std::uint64_t high_version);

    std::chrono::seconds retention_;
    std::deque<deletion> deletions_;      // in deletion order
    std::deque<checkpoint> checkpoints_;  // oldest first; bounded (limits.hpp)
    clock::time_point now_{};             // of the last pass_time()
    std::uint64_t floor_ = 0;
    std::uint64_t persisted_floor_ = 0;
};

}  // namespace percore::store
