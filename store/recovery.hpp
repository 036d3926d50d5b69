// recovery: rebuilds a shard's state from its segment files at start.
//
// Reads every segment in id order, verifies every record's checksum and hands each valid record to
// `apply` in log order (so the last record of a key is its current state). Policy:
// - torn tail of the LAST segment (a batch cut by a crash; nothing in it was acknowledged): the file
//   is truncated at the end of its last valid record and the start goes on; logged. Damage that a
//   commit mark follows is never a torn tail (segment_reader.hpp): it was acknowledged.
// - a segment whose header is not valid and in which no record can be found (a crash while
//   creating it): removed; it cannot hold anything acknowledged.
// - the newest segment lists the older segments that must exist: one that is missing is an error;
//   an older one it does not list is a leftover of compaction (all its records were copied into
//   newer segments) and is removed; its records are checked but not replayed.
// - anything else that fails — a bad record with valid records after it, a torn tail in an older
//   segment, a segment header that is not ours (or another segment's), a version at or past 2^63
//   (damage that passes its checksum) — is an error naming the file and offset: the
//   server refuses to start (exit 1) rather than serve without acknowledged writes. The operator
//   decides (restore from backup, or move the damaged file away to accept losing its records).
// Thread: the shard's thread, before it serves.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <string>
#include <vector>

#include "store/env.hpp"
#include "store/log_format.hpp"

namespace percore::store {

struct recovery_stats {
    std::uint64_t segments = 0;
    std::uint64_t records = 0;
    std::uint64_t bytes = 0;             // valid bytes read
    std::uint64_t truncated_bytes = 0;   // torn tail cut away
    std::uint64_t max_version = 0;
    std::uint64_t next_segment_id = 1;   // above every existing segment
    std::vector<std::uint64_t> segment_ids;  // that exist after recovery, in order
    double seconds = 0;
    std::string notes;                   // what was repaired, for the log
};

// apply(record, segment id, record offset) for every valid record; segment_done(segment id, valid
// bytes) after each segment.
result<recovery_stats> recover_segments(
    env& e, const std::string& directory,
    const std::function<void(const record_view&, std::uint64_t, std::uint64_t)>& apply,
    const std::function<void(std::uint64_t, std::uint64_t)>& segment_done = {});

}  // namespace percore::store
