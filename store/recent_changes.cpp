#include "store/recent_changes.hpp"

#include <cstring>
#include <new>

#include "shards/runtime/check.hpp"
#include "store/limits.hpp"

namespace percore::store {

void change_notes::note(std::uint64_t version, std::string_view key, bool deleted) {
    PERCORE_REQUIRES(key.size() <= max_key_bytes);
    PERCORE_REQUIRES(entries_.empty() || entries_.back().version < version);
    entries_.push_back({version, static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint16_t>(key.size()), deleted});
    keys_.append(key);
}

void change_notes::clear() {
    entries_.clear();
    keys_.clear();
}

namespace {

change_chunk* make_chunk(const change_notes_view& notes, std::uint64_t after_version, std::uint64_t high_version,
                         const change_chunk* older) {
    const std::size_t entry_bytes = notes.entries.size() * sizeof(change_chunk::entry);
    const std::size_t bytes = sizeof(change_chunk) + entry_bytes + notes.keys.size();
    PERCORE_ASSERT(bytes <= UINT32_MAX);
    void* memory = ::operator new(bytes);
    auto* c = new (memory) change_chunk();
    c->after_version = after_version;
    c->high_version = high_version;
    c->older = older;
    c->count = static_cast<std::uint32_t>(notes.entries.size());
    c->bytes = static_cast<std::uint32_t>(bytes);
    std::memcpy(static_cast<void*>(c + 1), notes.entries.data(), entry_bytes);
    if (!notes.keys.empty()) std::memcpy(reinterpret_cast<char*>(c + 1) + entry_bytes, notes.keys.data(), notes.keys.size());
    return c;
}

}  // namespace

recent_changes::~recent_changes() {
    while (!chunks_.empty()) free_front();
}

void recent_changes::free_front() {
    change_chunk* c = chunks_.front();
    chunks_.pop_front();
    c->~change_chunk();
    ::operator delete(c);
}

recent_changes::window recent_changes::advance(const change_notes* notes, std::uint64_t after_version,
                                               std::uint64_t high_version) {
    if (!kept_) {
        if (!notes) return {};
        kept_ = true;
        floor_ = after_version;
        window_first_ = chunks_.size();
    }
    PERCORE_REQUIRES(notes || after_version == high_version);
    if (notes && !notes->empty()) {
        PERCORE_REQUIRES(after_version < notes->entries_.front().version && notes->entries_.back().version <= high_version);
        change_chunk* c = make_chunk({notes->entries_, notes->keys_}, after_version, high_version,
                                     chunks_.empty() ? nullptr : chunks_.back());
        chunks_.push_back(c);
        entries_ += c->count;
        bytes_ += c->bytes;
        // past a bound the floor rises over the oldest chunks, keeping at least the newest
        while ((entries_ > max_recent_changes || bytes_ > max_recent_change_bytes) && window_first_ + 1 < chunks_.size()) {
            const change_chunk* gone = chunks_[window_first_++];
            entries_ -= gone->count;
            bytes_ -= gone->bytes;
            floor_ = gone->high_version;
        }
    }
    return {chunks_.empty() ? nullptr : chunks_.back(), floor_};
}

void recent_changes::reclaim(std::uint64_t oldest_live_floor) {
    while (window_first_ > 0 && chunks_.front()->high_version <= oldest_live_floor) {
        free_front();
        --window_first_;
    }
}

}  // namespace percore::store
