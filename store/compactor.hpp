// compactor: one shard's compaction — picks the sealed segment with the most garbage, reads it a
// bounded amount per step, queues copies of the records that must survive it, and retires it once
// every copy is durable (the segment_set deletes it after the log started a segment whose list
// leaves it out).
//
// Contract
// - Owned by the shard's store, beside the segment_set it reads and retires segments of (given at
//   construction, it outlives the compactor); owner shard's thread only (the store checks it).
//   The copies are documents of the store's document_pool (given at construction too).
// - One victim at a time (compaction_victim()), none while a drained one waits for its copies or
//   the retired segments are at their bound (segment_set::retirement_full). step() reads at most
//   compaction_read_bytes_per_step of it (limits.hpp; plus the record it ends inside) and appends a
//   copy to the store's queue for every record that must survive: a put still current with the
//   victim's version, and a tombstone keep_tombstone() keeps. The copies keep their versions (a
//   copy record's ETag version too: log_format.hpp, kind 5).
// - The store carries the copies through its batches (shard_store.hpp: a batch takes some before its
//   client writes) and tells how they went: copy_dropped() for a copy superseded by a write before
//   its batch, copies_settled() after each batch with the copies it held and whether any of them (or
//   a dropped one, needed after all) was lost with a failed batch.
// - finish(): once the victim was read to its clean end, no copy is outstanding and no batch is in
//   flight, retires it (shard_log::retire, segment_set::retire); at the retirement bound it asks the
//   log for a new segment (segment_set::roll_due: the store makes it with an empty append). A victim
//   whose read ended early (torn, corrupt, an I/O error) or whose copies were lost stays, and may be
//   chosen again later.
// - REQUIRES (PERCORE_REQUIRES): step() and finish() with the store's log, after the segment_set
//   was attached (recovery); finish() while the log is not busy unless a batch is in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/document.hpp"
#include "store/document_pool.hpp"
#include "store/log_format.hpp"
#include "store/segment_reader.hpp"
#include "store/segment_set.hpp"
#include "store/shard_log.hpp"
#include "store/snapshot.hpp"

namespace percore::store {

// A compaction copy: re-log `version` of `key` (doc: a put's copy; null: a tombstone's) if it is
// still current. No result.
struct relocation {
    document* doc = nullptr;  // one reference, held by the queue
    std::string key;          // tombstones (for puts, the document's key)
    std::uint64_t version = 0;
};

// The sealed segment, not retiring, with the most dead bytes, at least half of its bytes dead; 0
// when none is.
std::uint32_t compaction_victim(const segment_set& segments);

// Whether compaction copies the tombstone record `rec` forward. A tombstone record hides older puts
// of its key (only the oldest segment has none older), and rebuilds its key's tombstone at recovery
// while the change feed lists it (change_retention.hpp). From the oldest segment it is dropped only
// once superseded (by a newer tombstone of the key), or removed by retention and covered by the
// persisted feed floor (a restart then neither lists it nor misses it).
bool keep_tombstone(const snapshot& snap, const record_view& rec, bool oldest, std::uint64_t persisted_floor);

class compactor {
public:
    // Copies are made in `documents`, the store's pool (document_pool.hpp).
    compactor(segment_set& segments, document_pool& documents) : segments_(segments), documents_(documents) {}
    compactor(const compactor&) = delete;
    compactor& operator=(const compactor&) = delete;

    // A bounded step (contract above) against the published state `snap`; appends the copies to
    // `queue` and returns how many. `persisted_floor`: the floor in the feed_floor file.
    std::size_t step(shard_log& log, const snapshot& snap, std::uint64_t persisted_floor, bool batch_in_flight,
                     std::vector<relocation>& queue);
    // Retires the drained victim when its copies are all durable (contract above).
    void finish(shard_log& log, bool batch_in_flight);

    // Nothing to copy and nothing to look at: no victim is being read, and none was found since the
    // segments' usage last changed (a step would scan every segment's usage again: ~135
    // instructions of every loop round, callgrind, get64).
    bool idle() const { return compacting_ == 0 && searched_at_ == segments_.usage_changes(); }

    void copy_dropped() { --outstanding_; }
    void copies_settled(std::uint64_t copies, bool lost) {
        outstanding_ -= copies;
        if (lost) copy_lost_ = true;
    }

private:
    bool start(shard_log& log);
    std::size_t read_victim(const snapshot& snap, std::uint64_t persisted_floor, std::vector<relocation>& queue);

    segment_set& segments_;
    document_pool& documents_;
    std::uint32_t compacting_ = 0;  // segment being copied forward
    std::unique_ptr<segment_reader> reader_;
    std::uint64_t outstanding_ = 0;  // copies queued or in flight, for compacting_ or draining_
    std::uint32_t draining_ = 0;     // read to the end; retire once its copies are durable
    bool copy_lost_ = false;         // a copy of this victim never became durable
    // segments_.usage_changes() when compaction_victim() last found none; none yet: never equal
    std::uint64_t searched_at_ = ~std::uint64_t{0};
};

}  // namespace percore::store
