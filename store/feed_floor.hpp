// feed_floor: the file that keeps a shard's change-feed floor across restarts.
//
// `DATA/<layout>/shard-NNN/feed_floor`: a counter file (counter_file.hpp: 20 bytes, replaced whole
// and durably), magic "PCFLOOR1", holding the floor: a feed cursor below it may have missed a
// delete (shard_store.hpp). Compaction drops a tombstone record only
// once the floor in this file covers its version, so the file is written before that (shard_store).
//
// Contract: free functions of their arguments, through env (fault injection works); any thread,
// one writer per directory (the shard's owner).
#pragma once

#include <cstdint>
#include <string>

#include "store/env.hpp"
#include "store/result.hpp"

namespace percore::store {

inline constexpr char feed_floor_file_name[] = "feed_floor";
inline constexpr std::size_t feed_floor_file_bytes = 20;

// Replaces the floor file of `directory` with `floor`, durably (the sequence above). On an error the
// file holds the previous floor (or is missing, as before).
io_result<void> write_feed_floor(env& e, const std::string& directory, std::uint64_t floor);

// The floor in `directory`'s file; 0 when there is none. An error (naming the file) when it exists
// but cannot be read or is damaged: the server refuses to start rather than serve a lower floor.
result<std::uint64_t> read_feed_floor(env& e, const std::string& directory);

}  // namespace percore::store
