#include "store/segment_set.hpp"

#include <algorithm>

#include "store/limits.hpp"
#include "shards/runtime/check.hpp"

namespace percore::store {

void segment_set::attach(env& e, std::string directory) {
    PERCORE_REQUIRES(!env_);
    env_ = &e;
    directory_ = std::move(directory);
}

void segment_set::keep_only(const std::vector<std::uint64_t>& ids) {
    std::erase_if(segments_, [&](const auto& entry) {
        return std::find(ids.begin(), ids.end(), entry.first) == ids.end();
    });
    ++usage_changes_;
}

void segment_set::note_appended(std::uint32_t id, std::uint64_t end_bytes, std::uint64_t live_bytes) {
    segment_usage& u = segments_[id];
    // Counting batches only (not the header and list before the first one) left a segment that
    // holds nothing but its list at 0 bytes, never a compaction victim (the segment leak).
    u.bytes = std::max(u.bytes, end_bytes);
    u.live_bytes += live_bytes;
    ++usage_changes_;
}

// Readers find the handles in the snapshot's table, which is replaced (never changed) when a
// segment comes or goes.
bool segment_set::open(std::uint32_t id) {
    if (!env_) return false;
    if (table_ && table_->find(id)) return true;
    auto file = env_->open_readable(path(id));
    if (!file) return false;  // its values then stay in memory
    auto next = std::make_shared<segment_table>();
    if (table_)
        for (const segment_file* f : table_->files) {
            f->retain();
            next->files.push_back(f);
        }
    next->files.push_back(new segment_file(id, std::move(*file)));
    table_ = std::move(next);
    return true;
}

void segment_set::close(std::uint32_t id) {
    if (!table_ || !table_->find(id)) return;
    auto next = std::make_shared<segment_table>();
    for (const segment_file* f : table_->files) {
        if (f->id() == id) continue;
        f->retain();
        next->files.push_back(f);
    }
    table_ = std::move(next);
    // the current snapshot still names the old table (and the handle) until the next publication
    table_changed_ = true;
}

void segment_set::retire(std::uint32_t id, std::uint64_t after_segment) {
    PERCORE_REQUIRES(!is_retiring(id));
    auto it = segments_.find(id);
    std::uint64_t bytes = it != segments_.end() ? it->second.bytes : 0;
    retiring_.push_back(retiring_segment{id, bytes, after_segment});
    retiring_bytes_ += bytes;
    ++usage_changes_;
}

bool segment_set::retirement_full(std::uint64_t byte_bound) const {
    return retiring_.size() >= max_retired_segments || retiring_bytes_ >= byte_bound;
}

bool segment_set::is_retiring(std::uint32_t id) const {
    return std::any_of(retiring_.begin(), retiring_.end(), [id](const retiring_segment& r) { return r.id == id; });
}

// An append that went to a segment started after a segment was retired: that segment's list, which
// leaves the retired one out, was durable before the append.
void segment_set::delete_retired(const append_result& r) {
    if (retiring_.empty() || r.error != 0 || r.segment_id == 0) return;
    PERCORE_REQUIRES(env_);
    bool removed = false;
    std::erase_if(retiring_, [&](const retiring_segment& v) {
        if (r.segment_id <= v.after_segment) return false;
        if (env_->remove(path(v.id))) {
            removed = true;
            ++segments_deleted_;
        }
        segments_.erase(v.id);
        ++usage_changes_;
        close(v.id);
        retiring_bytes_ -= v.bytes;
        return true;
    });
    if (removed) (void)env_->sync_directory(directory_);
    if (retiring_.empty()) roll_due_ = false;
}

}  // namespace percore::store
