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
//   and the shard's newest_segment file names the newest segment the log made (newest_segment.hpp):
//   when the newest segment there is older, the segments above it are missing — an error too (a
//   directory without the file, written before it existed or restored, is not checked so);
//   an older one it does not list is a leftover of compaction (all its records were copied into
//   newer segments) and is removed; its records are checked but not replayed.
// - anything else that fails — a bad record with valid records after it, a torn tail in an older
//   segment, a segment header that is not ours (or another segment's), a version at or past 2^63
//   (damage that passes its checksum) — is an error naming the file and offset: the
//   server refuses to start (exit 1) rather than serve without acknowledged writes. The operator
//   decides (restore from backup, or move the damaged file away to accept losing its records).
// The same scan verifies without changing anything (recovery_mode::verify, `percore check`,
// store/check.hpp): it makes none of the repairs above, reads on past damage, and lists every
// finding in `findings`, in the order recovery meets them, so its first damage is the one recovery
// refuses with (refusal_line() of it is recovery's error, word for word). In repair mode
// `findings` lists the repairs made.
// Thread: the shard's thread, before it serves (verify: any thread, one call per directory).
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <string>
#include <vector>

#include "store/env.hpp"
#include "store/log_format.hpp"

namespace percore::store {

// What a scan found besides valid records. The first three are what recovery repairs; the rest is
// damage, which it refuses to start on, and `unreadable`, an I/O error it refuses on too.
enum class finding_kind : std::uint8_t {
    torn_tail,          // the last segment ends in an unfinished batch: cut at `offset`, `bytes` cut
    unwritten_segment,  // a segment whose header never reached the disk, no record in it: removed
    leftover_segment,   // an older segment the newest list leaves out (compacted): removed
    damaged_record,     // a record failing its checksum with valid records (or a commit mark) after it
    cut_short,          // a torn tail in a segment that newer segments follow
    not_a_segment,      // a file named like a segment whose header is not ours, with records in it
    wrong_header,       // a valid header of another segment (a file copied over this one)
    malformed_list,     // a segment list that does not decode
    missing_segment,    // a segment the newest list names is not there
    implausible_version,  // a record's version at or past 2^63 (damage that passes its checksum)
    damaged_feed_floor,   // the shard's feed_floor file (feed_floor.hpp); found by percore check
    missing_shard_directory,  // FORMAT's layout lacks a shard's directory; found by percore check
    damaged_newest_segment_file,  // the shard's newest_segment file is not one (newest_segment.hpp)
    unreadable,         // an I/O error while reading
};

struct recovery_finding {
    finding_kind kind = finding_kind::damaged_record;
    std::string file;           // the path, as recovery names it (the directory + the file name)
    std::uint64_t offset = 0;   // byte offset in `file` where it is (0: the whole file)
    std::uint64_t bytes = 0;    // torn_tail: the bytes after `offset` that the cut removes
    std::string what;           // one line for the operator, naming the file and the offset

    bool repairable() const { return kind <= finding_kind::leftover_segment; }
    bool damage() const { return !repairable() && kind != finding_kind::unreadable; }
};

// The line recovery refuses to start with for damage or an unreadable file: `what` and what the
// operator can do.
std::string refusal_line(const recovery_finding& f);

enum class recovery_mode : std::uint8_t {
    repair,  // the server's start: makes the repairs, and the first damage is the error
    verify,  // percore check: changes nothing; every finding is listed, damage included
};

struct recovery_stats {
    std::uint64_t segments = 0;
    std::uint64_t records = 0;
    std::uint64_t bytes = 0;             // valid bytes read
    std::uint64_t truncated_bytes = 0;   // torn tail cut away
    std::uint64_t max_version = 0;       // the highest version, copies' ETag versions included
    std::uint64_t next_segment_id = 1;   // above every existing segment
    std::vector<std::uint64_t> segment_ids;  // that exist after recovery, in order
    double seconds = 0;
    std::string notes;                   // what was repaired, for the log
    std::vector<recovery_finding> findings;  // repair: the repairs made; verify: everything found
};

// apply(record, segment id, record offset) for every valid record that is replayed (leftovers are
// read, not replayed); segment_done(segment id, valid bytes) after each segment read to its end
// without damage. The error: in repair mode, the first damage or failure; in verify mode only a
// directory that cannot be listed.
result<recovery_stats> recover_segments(
    env& e, const std::string& directory,
    const std::function<void(const record_view&, std::uint64_t, std::uint64_t)>& apply,
    const std::function<void(std::uint64_t, std::uint64_t)>& segment_done = {},
    recovery_mode mode = recovery_mode::repair);

}  // namespace percore::store
