#include "store/epoch.hpp"
#include "shards/runtime/check.hpp"


// Why passed() is enough to free, also on weakly ordered machines (aarch64):
//
// Reader, begin_round:  E: epoch := even (release store)  ; F_r: seq_cst fence ; L: load current_
// Writer, after a flush: P: current_ := new (seq_cst store) ; F_w: seq_cst fence ; S: stamp loads epochs
//
// 1. The fences are totally ordered. If F_w precedes F_r, L sees P or a later publication, so the
//    reader's round uses the new root. If F_r precedes F_w, S sees E (or later), so the stamp
//    records that the reader is inside a round. This is the store-buffering pattern, which needs
//    both fences: acquire/release alone would let each side miss the other's store.
// 2. A stamped odd epoch (quiescent reader) therefore means every later round of that reader sees
//    the new root; what it read before quiescing happened before the stamp, because the stamp's
//    load synchronizes with the release store of that odd epoch.
// 3. A stamped even epoch means the reader may hold the old root. Once passed() reads a different
//    value (acquire), the reader has released the round with a release store, so its reads of the
//    old root happen before the free; its next round began after the stamp, so 1. applies to it.
// Only the reader writes its slot, so plain load + store suffices for the increments.

namespace percore::store {

namespace {

// ThreadSanitizer does not model fences (GCC warns about them); the happens-before edges it checks
// come from the release/acquire epoch accesses, so nothing it relies on is lost.
void full_fence() {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}

}  // namespace

reader_epochs::reader_epochs(std::size_t readers) : count_(readers), slots_(std::make_unique<slot[]>(readers)) {}

void reader_epochs::begin_round(std::size_t reader) {
    PERCORE_ASSERT(reader < count_);
    auto& epoch = slots_[reader].epoch;
    std::uint64_t e = epoch.load(std::memory_order_relaxed);
    epoch.store(e + ((e & 1) ? 1 : 2), std::memory_order_seq_cst);
    full_fence();
}

void reader_epochs::quiesce(std::size_t reader) {
    PERCORE_ASSERT(reader < count_);
    auto& epoch = slots_[reader].epoch;
    std::uint64_t e = epoch.load(std::memory_order_relaxed);
    if ((e & 1) == 0) epoch.store(e + 1, std::memory_order_seq_cst);
}

void reader_epochs::stamp(stamp_type& out) const {
    full_fence();
    out.epochs.resize(count_);
    for (std::size_t i = 0; i < count_; ++i) out.epochs[i] = slots_[i].epoch.load(std::memory_order_seq_cst);
}

bool reader_epochs::passed(const stamp_type& s) const {
    PERCORE_ASSERT(s.epochs.size() == count_);
    for (std::size_t i = 0; i < count_; ++i) {
        std::uint64_t then = s.epochs[i];
        if ((then & 1) == 0 && slots_[i].epoch.load(std::memory_order_acquire) == then) return false;
    }
    return true;
}

}  // namespace percore::store
