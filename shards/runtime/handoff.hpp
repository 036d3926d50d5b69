// handoff<T>: one object passing from one shard to another through a mailbox, with its ownership in
// the type.
//
// Seastar's foreign_ptr sends an object back to its home shard to be destroyed. Here ownership
// moves instead: what crosses is the receiver's from then on (a write's document ends up in the
// receiving owner's store, so that is where it must live and die), and only the receiver can take
// it. A handoff is a plain pointer and a shard id, so a message carrying one stays trivially
// copyable for the lock-free queue; the queue's single producer and single consumer make the copy
// the only live one.
//
// Contract
// - send(ptr, to) on the sending shard: the object is no longer the sender's.
// - take() REQUIRES: on shard `to` (checked always: a wrong-core take would be a use after free
//   waiting to happen), once; returns the owning pointer, freed on that shard.
// - A handoff that no shard will take (the start was aborted) is discard()ed by whoever drains it.
#pragma once

#include <memory>
#include <type_traits>

#include "shards/runtime/check.hpp"

namespace percore::runtime {

template <class T>
class handoff {
public:
    handoff() = default;
    static handoff send(std::unique_ptr<T> object, unsigned to) {
        handoff h;
        h.object_ = object.release();
        h.to_ = to;
        return h;
    }
    unsigned receiver() const { return to_; }
    explicit operator bool() const { return object_ != nullptr; }

    [[nodiscard]] std::unique_ptr<T> take() {
        PERCORE_ASSERT(object_ != nullptr);
        PERCORE_ASSERT(this_shard() == to_);
        return std::unique_ptr<T>(std::exchange(object_, nullptr));
    }
    // For a message no shard will take; any thread, once the shards are stopped.
    [[nodiscard]] std::unique_ptr<T> discard() { return std::unique_ptr<T>(std::exchange(object_, nullptr)); }

private:
    T* object_ = nullptr;
    unsigned to_ = no_shard;
};

}  // namespace percore::runtime
