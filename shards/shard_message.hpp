// shard_message: what one shard sends another through the mailboxes.
//
// - write: the origin shard (which holds the client's connection) asks the owner of a key to apply
//   a write. The op (and the document in it) is handed off: from the send on it is the owner's,
//   taken on the owner's core (runtime::handoff checks which), and the document then lives in the
//   owner's store.
// - write_done: the owner tells the origin how the write ended, after the write's batch was
//   published. Carries only values.
#pragma once

#include <cstdint>

#include "shards/runtime/handoff.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

struct shard_message {
    enum class kind : std::uint8_t { write, write_done };
    kind type = kind::write;
    store::write_outcome outcome = store::write_outcome::created;
    bool current_exists = false;
    std::uint8_t refusal = 0;     // write_done: the gate's code when quota_exceeded
    std::uint64_t tag = 0;        // write_done: the write_op's tag (write_ticket.hpp)
    std::uint64_t version = 0;    // write_done
    runtime::handoff<store::write_op> op;  // write
};

static_assert(sizeof(shard_message) <= 40);
static_assert(std::is_trivially_copyable_v<shard_message>);

// Frees what a message owns (a write's op and its document) when no shard will take it.
void discard_message(shard_message& m);

}  // namespace percore::shards
