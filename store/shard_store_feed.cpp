// shard_store's change-feed upkeep (shard_store.hpp, "Change feed"): deletion times, retention, the
// feed floor and its file. Owner thread only, like the rest of the store's writing side.
#include <algorithm>

#include "store/doc_tree.hpp"
#include "store/feed_floor.hpp"
#include "store/shard_store.hpp"
#include "shards/runtime/check.hpp"

namespace percore::store {

// A tombstone made by a batch being formed (its reference goes to the queue). If the batch fails,
// its entry names a tombstone no snapshot holds and expires without effect.
void shard_store::note_deletion(const document* tomb) {
    tomb->retain();
    deletions_.push_back(deletion{tomb});
}

void shard_store::expire_changes(clock::time_point now) {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    PERCORE_REQUIRES(now >= now_);
    now_ = now;
    // the deletions since the last call (they are at the end of the queue) happened before now
    for (auto it = deletions_.rbegin(); it != deletions_.rend() && !it->stamped; ++it) {
        it->when = now;
        it->stamped = true;
    }
    note_checkpoint(now);
    // the tombstone tree and the floor change only between batches: the batch in flight was formed
    // from the current snapshot and will replace it
    if (in_flight_) {
        refresh_due_ = true;
        return;
    }
    refresh_changes();
}

// The time-based floor: the high_version of the newest checkpoint at least the retention old.
// Checkpoints are taken only when the high version moved since the last one, at most one per
// spacing; the ones older than that newest old one are dropped, so at most
// retention / spacing + 2 are held.
void shard_store::note_checkpoint(clock::time_point now) {
    const std::uint64_t high = current()->high_version_;
    if (high == 0) return;  // nothing written yet: nothing allocated
    const auto spacing = std::max(std::chrono::seconds(1),
                                  retention_ / static_cast<std::chrono::seconds::rep>(feed_checkpoints_per_retention));
    if (checkpoints_.empty() ||
        (high != checkpoints_.back().high_version && now - checkpoints_.back().when >= spacing))
        checkpoints_.push_back(checkpoint{now, high});
    while (checkpoints_.size() >= 2 && now - checkpoints_[1].when >= retention_) checkpoints_.pop_front();
    if (now - checkpoints_.front().when >= retention_) floor_ = std::max(floor_, checkpoints_.front().high_version);
    PERCORE_DEBUG_ASSERT(checkpoints_.size() <= feed_checkpoints_per_retention + 2);
}

// Removes the tombstones deleted at least the retention ago (that are still current: not put or
// deleted again since) and publishes the result with the floor; then persists the floor.
void shard_store::refresh_changes() {
    PERCORE_DEBUG_ASSERT(!in_flight_);
    refresh_due_ = false;
    const snapshot* old = current();
    doc_tree tombs(pool_, old->tombstones_);
    bool removed = false;
    while (!deletions_.empty() && deletions_.front().stamped && now_ - deletions_.front().when >= retention_) {
        const document* t = deletions_.front().tomb;
        if (tombs.find(t->key()) == t) {
            tombs.erase(t->key())->release();
            floor_ = std::max(floor_, t->version());
            removed = true;
        }
        t->release();
        deletions_.pop_front();
    }
    if (removed || floor_ != old->feed_floor_) {
        formed_batch b = same_as_current();
        doc_tree::release(pool_, b.tombstones);
        b.tombstones = tombs.publish();
        publish(b);
    }
    persist_floor();
}

// A failed write leaves the file's older floor: compaction keeps the records it does not cover,
// and the next expire_changes() tries again.
void shard_store::persist_floor() {
    if (!env_ || floor_ <= persisted_floor_) return;
    if (write_feed_floor(*env_, directory_, floor_)) persisted_floor_ = floor_;
}

}  // namespace percore::store
