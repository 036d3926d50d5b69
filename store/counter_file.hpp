// counter_file: a small file holding one u64 that a shard replaces whole and durably — the change
// feed's floor (feed_floor.hpp) and the newest segment the log wrote (newest_segment.hpp).
//
// `DATA/<layout>/shard-NNN/<name>`, 20 bytes, little-endian:
//    0  8 bytes  magic (one per kind of file: "PCFLOOR1", "PCNEWSG1")
//    8  u64      the value
//   16  u32      crc32c of bytes 0..15
// Written whole to `<name>.tmp`, synced (unless `sync` is false: --durability none), renamed over
// `<name>`, the directory synced: a crash leaves the old file or the new one, never a mix.
//
// Contract: free functions of their arguments, through env (fault injection works); any thread,
// one writer per file (the shard's owner or its log thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/env.hpp"
#include "store/result.hpp"

namespace percore::store {

inline constexpr std::size_t counter_file_bytes = 20;
inline constexpr std::size_t counter_magic_bytes = 8;

// Replaces `directory`/`name` with `value` (the sequence above). On an error the file holds the
// previous value (or is missing, as before).
io_result<void> write_counter_file(env& e, const std::string& directory, const char* name,
                                   const char (&magic)[counter_magic_bytes + 1], std::uint64_t value, bool sync = true);

// The value in `path`; nullopt when there is no such file; EBADMSG when it is not this kind of file
// (its size, magic or checksum), or the errno of a failed open or read.
io_result<std::optional<std::uint64_t>> read_counter_file(env& e, const std::string& path,
                                                          const char (&magic)[counter_magic_bytes + 1]);

}  // namespace percore::store
