// owner: which shard's thread owns a store object, for the `REQUIRES: owner thread` checks.
//
// Contract
// - on_owner() is true when called from the shard thread that called it first with a shard set
//   (runtime::this_shard(), shards/runtime/check.hpp), or from any thread that has no shard (tests,
//   the main thread before the shards start: nothing to check against there).
// - Learns the owner on the first call from a shard thread rather than at construction: a shard's
//   store is constructed on the main thread and used only on the shard's own.
// - Not thread-safe by design: the object checked is used by one thread at a time anyway; a second
//   shard thread racing on `owner_` is the bug the check reports.
#pragma once

#include "shards/runtime/check.hpp"

namespace percore::store {

class owner_thread {
public:
    bool on_owner() const {
        const unsigned s = runtime::this_shard();
        if (s == runtime::no_shard) return true;
        if (owner_ == runtime::no_shard) owner_ = s;
        return owner_ == s;
    }

private:
    mutable unsigned owner_ = runtime::no_shard;
};

}  // namespace percore::store
