// shard_message: what one shard sends another over their spsc_queue.
//
// - write: the origin shard (which holds the client's connection) asks the owner of a key to apply
//   `op`. The origin allocated `op` (and the document in it); the owner runs it and frees `op`;
//   the document then belongs to the owner's store.
// - write_done: the owner tells the origin how the write ended, after the write's batch was
//   published. Carries only values.
#pragma once

#include <cstdint>

#include "store/shard_store.hpp"

namespace percore::shards {

struct shard_message {
    enum class kind : std::uint8_t { write, write_done };
    kind type = kind::write;
    store::write_outcome outcome = store::write_outcome::created;
    bool current_exists = false;
    std::uint64_t tag = 0;        // write_done: the write_op's tag
    std::uint64_t version = 0;    // write_done
    store::write_op* op = nullptr;  // write
};

static_assert(sizeof(shard_message) <= 32);

}  // namespace percore::shards
