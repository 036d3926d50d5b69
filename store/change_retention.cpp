#include "store/change_retention.hpp"

#include <algorithm>

#include "store/feed_floor.hpp"
#include "store/limits.hpp"
#include "shards/runtime/check.hpp"

namespace percore::store {

change_retention::change_retention(std::chrono::seconds retention) : retention_(retention) {
    PERCORE_REQUIRES(retention.count() >= 0);
}

change_retention::~change_retention() {
    for (const deletion& d : deletions_) d.tomb->release();
}

void change_retention::set_recovered_floor(std::uint64_t floor) {
    PERCORE_REQUIRES(deletions_.empty() && checkpoints_.empty());
    floor_ = persisted_floor_ = floor;
}

void change_retention::note_deletion(const document* tomb) {
    tomb->retain();
    deletions_.push_back(deletion{tomb});
}

// Stamped by the next pass_time(), like a deletion made now.
void change_retention::note_recovered(const snapshot& snap) {
    snapshot::cursor c;
    for (c.seek_deleted(snap, {}, false); c.valid(); c.next()) {
        c.doc().retain();
        deletions_.push_back(deletion{&c.doc()});
    }
}

void change_retention::pass_time(clock::time_point now, std::uint64_t high_version) {
    PERCORE_REQUIRES(now >= now_);
    now_ = now;
    // the deletions since the last call (they are at the end of the queue) happened before now
    for (auto it = deletions_.rbegin(); it != deletions_.rend() && !it->stamped; ++it) {
        it->when = now;
        it->stamped = true;
    }
    note_checkpoint(now, high_version);
}

// The time-based floor: the high_version of the newest checkpoint at least the retention old.
// Checkpoints are taken only when the high version moved since the last one, at most one per
// spacing; the ones older than that newest old one are dropped, so at most
// retention / spacing + 2 are held.
void change_retention::note_checkpoint(clock::time_point now, std::uint64_t high) {
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

bool change_retention::expire_tombstones(doc_tree& tombs) {
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
    return removed;
}

void change_retention::persist_floor(env& e, const std::string& directory) {
    if (floor_ <= persisted_floor_) return;
    if (write_feed_floor(e, directory, floor_)) persisted_floor_ = floor_;
}

}  // namespace percore::store
