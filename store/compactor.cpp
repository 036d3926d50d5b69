#include "store/compactor.hpp"

#include <algorithm>

#include "store/limits.hpp"
#include "shards/runtime/check.hpp"

namespace percore::store {

std::uint32_t compaction_victim(const segment_set& segments) {
    std::uint32_t best = 0;
    std::uint64_t best_dead = 0;
    for (const auto& [id, u] : segments.usage()) {
        // Only sealed segments: the log may still write to the one it is in (reading the log's
        // current id here raced with a roll in flight), and a retired one is already copied.
        if (!segments.sealed(id) || segments.is_retiring(id) || u.bytes <= segment_header_bytes) continue;
        std::uint64_t dead = u.bytes - std::min(u.bytes, u.live_bytes + segment_header_bytes);
        if (dead * 2 >= u.bytes && dead > best_dead) {
            best = id;
            best_dead = dead;
        }
    }
    return best;
}

bool keep_tombstone(const snapshot& snap, const record_view& rec, bool oldest, std::uint64_t persisted_floor) {
    if (snap.find(rec.key)) return false;  // put since: that newer record decides
    if (!oldest) return true;
    const document* tomb = snap.find_deleted(rec.key);
    if (tomb) return tomb->version() <= rec.version;
    return rec.version > persisted_floor;
}

std::size_t compactor::step(shard_log& log, const snapshot& snap, std::uint64_t persisted_floor, bool batch_in_flight,
                            std::vector<relocation>& queue) {
    if (compacting_ == 0 && !start(log)) return 0;
    std::size_t queued = read_victim(snap, persisted_floor, queue);
    if (reader_->end() != segment_reader::end_state::none || reader_->error() != 0) {
        bool complete = reader_->end() == segment_reader::end_state::clean;
        reader_.reset();
        if (complete) draining_ = compacting_;
        compacting_ = 0;
        finish(log, batch_in_flight);
    }
    return queued;
}

// Chooses the next victim and opens it; false when there is none (or none may start now).
bool compactor::start(shard_log& log) {
    // one victim at a time, and none while the retired ones wait at their bound
    if (draining_ != 0 || segments_.retirement_full(log.segment_target_bytes())) return false;
    if (searched_at_ == segments_.usage_changes()) return false;
    std::uint32_t victim = compaction_victim(segments_);
    if (victim == 0) {
        searched_at_ = segments_.usage_changes();
        return false;
    }
    PERCORE_REQUIRES(segments_.file_env());
    auto reader = segment_reader::open(*segments_.file_env(), segments_.path(victim));
    if (!reader) return false;
    reader_ = std::make_unique<segment_reader>(std::move(*reader));
    compacting_ = victim;
    copy_lost_ = false;
    return true;
}

// Reads the victim on from where the last step stopped, queueing the records that must survive.
std::size_t compactor::read_victim(const snapshot& snap, std::uint64_t persisted_floor,
                                   std::vector<relocation>& queue) {
    const bool oldest = segments_.oldest() == compacting_;
    std::size_t queued = 0;
    const std::uint64_t start = reader_->valid_bytes();
    record_view rec;
    std::uint64_t offset;
    while (reader_->valid_bytes() - start < compaction_read_bytes_per_step && reader_->next(rec, offset)) {
        if (rec.kind == record_kind::segment_list) continue;
        relocation r;
        r.version = rec.version;
        if (rec.holds_document()) {
            const document* cur = snap.find(rec.key);
            if (!cur || cur->version() != rec.version || cur->segment() != compacting_) continue;
            r.doc = copy_document(documents_, rec.key, rec.content_type, rec.value, rec.copied_version);
            r.doc->set_version(rec.version);
        } else {
            if (!keep_tombstone(snap, rec, oldest, persisted_floor)) continue;
            r.key = std::string(rec.key);
        }
        queue.push_back(std::move(r));
        ++outstanding_;
        ++queued;
    }
    return queued;
}

void compactor::finish(shard_log& log, bool batch_in_flight) {
    if (draining_ == 0 || outstanding_ != 0 || batch_in_flight) return;
    std::uint32_t victim = draining_;
    draining_ = 0;
    if (copy_lost_) {
        copy_lost_ = false;
        return;  // some copies never became durable: keep the segment, try again later
    }
    // A segment list that leaves the victim out must be durable before the file goes, or recovery
    // would report it missing: the next segment the log starts has one. It starts one when the
    // current one is full, or when the retired segments reach their bound; not for each victim (a
    // new segment per victim made a small segment that soon became the next victim: a segment per
    // batch). Until then the victim stays listed and is replayed after a crash, before the newer
    // copies of its records.
    PERCORE_ASSERT(!log.busy());
    log.retire(victim);
    segments_.retire(victim, log.current_segment_id());
    if (segments_.retirement_full(log.segment_target_bytes())) {
        log.request_roll();
        segments_.set_roll_due();
    }
}

}  // namespace percore::store
