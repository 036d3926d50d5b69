// check: `percore check [--repair] DIR` (SPEC §11) — verifies a stopped server's data directory
// offline with recovery's own scan, and with --repair makes recovery's repairs and nothing else.
//
// Contract
// - check_data_directory() reads FORMAT (data_layout.hpp, read_layout): the layout and shard count
//   it names, whatever the machine's CPU count; then, per shard directory, its feed floor file
//   (feed_floor.hpp) and its segments, through recover_segments() in recovery_mode::verify. So a
//   shard's verdict is recovery's: it is damaged exactly when the server would refuse to start on
//   it, and its first damage is the one the server names (same file, same byte offset).
// - It never reshards, creates nothing (no FORMAT, no admin token, no directory), and without
//   `repair` writes nothing. With `repair`, in each shard whose check found no damage and no read
//   error, it runs recovery itself (recovery_mode::repair): the torn tail of the last segment is
//   cut, segments that hold nothing (a header never written, a compaction leftover) are removed,
//   and the directory is synced. A damaged shard is left byte for byte as it is.
// - Layout directories other than FORMAT's (leftovers of a resharding, removed by the server at
//   start) are noted, never removed.
// - The caller holds the directory's lock (data_directory::lock_existing), so no server starts on
//   it meanwhile.
// - Errors (result): the directory cannot be checked at all (cannot be listed, or has no FORMAT
//   and no segments: not a percore data directory).
// Thread: any; one call per directory at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/data_layout.hpp"
#include "store/env.hpp"
#include "store/recovery.hpp"

namespace percore::store {

struct shard_check {
    unsigned shard = 0;
    std::string directory;
    std::uint64_t segments = 0;
    std::uint64_t records = 0;         // replayed (leftovers' records are read, not replayed)
    std::uint64_t documents = 0;       // live keys after replay: the last record of a key is a put
    std::uint64_t document_bytes = 0;  // the sum of their values' sizes
    std::uint64_t segment_bytes = 0;   // the valid bytes of its segments
    std::vector<recovery_finding> findings;  // in the order recovery meets them (recovery.hpp)
    std::vector<recovery_finding> repaired;  // --repair: what recovery repaired

    bool damaged() const;
    bool unreadable() const;  // a read error and no damage: the check is incomplete
};

struct check_report {
    std::string root;
    data_layout layout;                       // FORMAT's; shards 0 when it could not be read
    std::vector<std::string> format_damage;   // FORMAT or the layout is damaged: no shard was checked
    std::vector<std::string> notes;           // harmless: what the server tidies at start
    std::vector<shard_check> shards;
    bool repair = false;

    enum class verdict : std::uint8_t { clean, damaged, incomplete };
    verdict outcome() const;
};

[[nodiscard]] result<check_report> check_data_directory(env& e, const std::string& root, bool repair);

// One shard directory, as check_data_directory() checks each (the feed floor and the segments).
shard_check check_shard_directory(env& e, const std::string& directory, unsigned shard, bool repair);

// What `percore check` prints: a line per shard, a line per finding ("shard NNN: ..."), and a last
// line with the verdict ("percore check: clean|damaged|incomplete ...").
std::vector<std::string> report_lines(const check_report& report);

}  // namespace percore::store
