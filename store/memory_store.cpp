#include "store/memory_store.hpp"

#include <cassert>

#include "store/doc_tree.hpp"

namespace percore::store {

memory_store::memory_store(reader_epochs& epochs, std::uint64_t first_version)
    : epochs_(epochs), next_version_(first_version) {
    current_.store(new snapshot(), std::memory_order_seq_cst);
}

memory_store::~memory_store() {
    for (auto& op : pending_)
        if (op.doc) op.doc->release();
    for (auto& r : retired_) drop(r.snap);
    drop(current_.load(std::memory_order_relaxed));
    assert(pool_.live() == 0);
}

void memory_store::drop(const snapshot* snap) {
    doc_tree::release(pool_, snap->root_);
    delete snap;
}

void memory_store::submit(write_op op) {
    assert((op.kind == write_kind::put) == (op.doc != nullptr));
    pending_.push_back(std::move(op));
}

batch_stats memory_store::flush(std::vector<write_result>& done) {
    batch_stats stats;
    if (pending_.empty()) return stats;

    const snapshot* old = current_.load(std::memory_order_relaxed);
    doc_tree work(pool_, old->root_);
    std::uint64_t count = old->document_count_;
    std::uint64_t bytes = old->value_bytes_;
    bool changed = false;
    done.reserve(done.size() + pending_.size());

    for (auto& op : pending_) {
        ++stats.writes;
        write_result result;
        result.tag = op.tag;
        std::string_view key = op.kind == write_kind::put ? op.doc->key() : std::string_view(op.key);
        const document* existing = work.find(key);
        std::uint64_t existing_version = existing ? existing->version() : 0;

        if (!op.pre.holds(existing != nullptr, existing_version)) {
            result.outcome = write_outcome::precondition_failed;
            result.version = existing_version;
            result.current_exists = existing != nullptr;
            if (op.doc) op.doc->release();
        } else if (op.kind == write_kind::put) {
            std::uint64_t size = op.doc->value().size();
            if (existing) {
                bytes -= existing->value().size();
                result.outcome = write_outcome::replaced;
            } else {
                ++count;
                result.outcome = write_outcome::created;
            }
            bytes += size;
            stats.bytes += size;
            result.version = next_version_++;
            op.doc->set_version(result.version);
            work.put(op.doc);
            changed = true;
        } else if (existing) {
            --count;
            bytes -= existing->value().size();
            work.erase(key)->release();
            result.outcome = write_outcome::deleted;
            result.version = next_version_++;
            changed = true;
        } else {
            result.outcome = write_outcome::not_found;
        }
        op.doc = nullptr;
        done.push_back(result);
    }
    pending_.clear();
    if (!changed) return stats;

    auto* next = new snapshot();
    next->root_ = work.publish();
    next->document_count_ = count;
    next->value_bytes_ = bytes;
    next->sequence_ = ++sequence_;
    current_.store(next, std::memory_order_seq_cst);

    retired_.push_back(retired{old, {}});
    epochs_.stamp(retired_.back().stamp);
    return stats;
}

std::size_t memory_store::reclaim() {
    std::size_t freed = 0;
    while (!retired_.empty() && epochs_.passed(retired_.front().stamp)) {
        drop(retired_.front().snap);
        retired_.pop_front();
        ++freed;
    }
    return freed;
}

}  // namespace percore::store
