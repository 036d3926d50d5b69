// write_gate: a limit on a group of keys that a write must pass when it is applied — how the
// composition keeps per-app quotas exact (SPEC §7) while the store knows nothing of apps.
//
// Contract
// - A write_op may name a gate. When the owner applies the write in a batch and it would change
//   the store (a put, or an erase of an existing key), the store first calls
//   try_apply(documents_delta, bytes_delta) with what the write would change: documents +1 (new
//   key), -1 (erase) or 0; bytes the new value size minus the current one's. A nonzero answer
//   refuses the write: outcome quota_exceeded with that code in write_result::refusal, nothing
//   changed. A batch whose append fails (its writes are
//   answered no_space or unavailable) calls undo() with the same deltas for each write the gate let
//   through, so the gate counts only what was published.
// - Threads: called on the owner shard's thread, inside its batch; a gate shared by writes owned by
//   several shards must be safe to call from all of them at once (atomics).
// - Lifetime: the gate outlives every write that names it (the composition never frees one).
#pragma once

#include <cstdint>

namespace percore::store {

class write_gate {
public:
    virtual std::uint8_t try_apply(std::int64_t documents_delta, std::int64_t bytes_delta) = 0;
    virtual void undo(std::int64_t documents_delta, std::int64_t bytes_delta) = 0;

protected:
    ~write_gate() = default;
};

}  // namespace percore::store
