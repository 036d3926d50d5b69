// shard_message: what one shard sends another through the mailboxes.
//
// - write: the origin shard (which holds the client's connection) asks the owner of a key to apply
//   a write. The op (and the document in it) is handed off: from the send on it is the owner's,
//   taken on the owner's core (runtime::handoff checks which), and the document then lives in the
//   owner's store.
// - write_done: the owner tells the origin how the write ended, after the write's batch was
//   published. Carries only values.
// - backup_capture: a backup's origin (backup_stream.hpp) asks a shard for a capture of its
//   durable files; `tag` names the backup (backup_tag).
// - backup_captured: the shard's capture, handed off to the origin with its open files.
#pragma once

#include <cstdint>

#include "shards/runtime/handoff.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

struct backup_part;  // backup_stream.hpp

struct shard_message {
    enum class kind : std::uint8_t { write, write_done, backup_capture, backup_captured };
    kind type = kind::write;
    store::write_outcome outcome = store::write_outcome::created;
    bool current_exists = false;
    std::uint8_t refusal = 0;     // write_done: the gate's code when quota_exceeded
    std::uint64_t tag = 0;        // write_done: the write_op's tag (write_ticket.hpp); backup_*: the backup's
    std::uint64_t version = 0;    // write_done
    // What a message hands off, by its kind: one at a time, so a message stays 40 bytes.
    shard_message() : op() {}
    union {
        runtime::handoff<store::write_op> op;  // write
        runtime::handoff<backup_part> part;    // backup_captured
    };
};

static_assert(sizeof(shard_message) <= 40);
static_assert(std::is_trivially_copyable_v<shard_message>);

// Frees what a message owns (a write's op and its document, a backup's capture) when no shard will
// take it.
void discard_message(shard_message& m);

}  // namespace percore::shards
