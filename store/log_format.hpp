// log_format: the bytes of percore's write-ahead log. Each shard appends records to segment files
// `DATA/<layout>/shard-NNN/SSSSSSSS.seg`; a record is the whole truth about one write.
//
// Segment file:
//   +----------------------------+  offset 0
//   | segment header (32 bytes)  |  magic "PCSEG\0\0\1", format version u32, shard u32,
//   |                            |  segment id u64, crc32c of bytes 0..27 (u32 at 28)
//   +----------------------------+  offset 32
//   | segment list (kind 3)      |
//   | record                     |  ... appended in batches, each batch made durable by one
//   | ...                        |      fdatasync; a crash can leave a torn last batch
//   | commit mark (kind 4)       |  after a batch once the log went idle, and at a clean stop
//   | record ...                 |
//   +----------------------------+
//
// Record (all integers little-endian):
//    0  u32 crc32c    of bytes 4 .. 32+key+type+value (everything after this field)
//    4  u32 body      bytes after offset 8 (24 + key + type + value): lets a reader skip
//    8  u8  kind      1 = put, 2 = tombstone (delete), 3 = segment list, 4 = commit mark (below),
//                     5 = copy (a put whose ETag version is another board's, below)
//    9  u8  0
//   10  u16 key bytes (<= 65535; the server allows 1024 + app)
//   12  u16 content-type bytes (0 for a tombstone)
//   14  u16 0
//   16  u64 version   the put's version (its ETag's but for a copy) or the version the delete consumed:
//                     the shard's change-feed position
//   24  u32 value bytes (0 for a tombstone)
//   28  u32 0
//   32  key, content type, value
//
// Copy (kind 5; format version 3 and later): a put whose ETag version was given by another board
// (a follower's copy of its primary's document, SPEC §10). The header is a put's, its version the
// local one (the feed position); the ETag version, a u64, lies between content type and value:
//    0  u32 crc32c    of bytes 4 .. 40+key+type+value
//    4  u32 body      24 + key + type + 8 + value
//    8  u8  5, then bytes 9..31 as a put's (16: the local version; 24: the value's bytes, without the 8)
//   32  key, content type
//   32+key+type     u64 ETag version (never 0)
//   40+key+type     value              (record_view::value_offset points here)
//
// Segment list (the value of a kind 3 record; no key, no content type):
//    0  u64 segment id   of an older segment that must exist
//    8  u64 segment id
//   ... n ids, 8 bytes each, little-endian, in the order the log lists them; n may be 0 (a first
//       segment). A length that is not a multiple of 8 is malformed. Encoded and decoded here only
//       (encode_segment_list / decode_segment_list).
// Commit mark (kind 4; no key, no content type, version 0, a 16-byte value):
//    0  u64 segment id   of the segment it is in
//    8  u64 offset       of the mark's own first byte in that segment
//   Written by the log after the sync of the batch before it returned, so every byte before a mark
//   was acknowledged: a damaged record with a mark after it is bit rot, never a torn write
//   (segment_reader.hpp). The mark carries no data; readers skip it. Its first 32 bytes but the
//   checksum are always the same (commit_mark_pattern), which lets recovery find one past a record
//   whose damaged length hides where the next record starts; its own segment id and offset keep a
//   value that holds the bytes of a mark from passing for one.
//   Segments of format version 1 hold no marks; version 2 may.
// Format version 3 (this one) may hold copies (kind 5); a kind 5 record in a segment of an older
// format is corrupt. Older binaries do not read a format 3 segment (docs/decisions.md).
// No padding between records; no page-size assumption anywhere (Pi 5 kernels use 16 KiB pages).
// The bounds of the fields (max key, value and record bytes) are in limits.hpp.
//
// Contract: pure functions of their arguments; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/limits.hpp"
#include "store/result.hpp"

namespace percore::store {

inline constexpr std::uint32_t log_format_version = 3;         // written: copies (kind 5) may appear
inline constexpr std::uint32_t oldest_log_format_version = 1;  // read: segments without marks
inline constexpr std::uint32_t first_format_with_copies = 3;   // kind 5 below it is corrupt
inline constexpr std::size_t segment_header_bytes = 32;
inline constexpr std::size_t record_header_bytes = record_header_size;  // limits.hpp counts it too
inline constexpr std::size_t segment_list_entry_bytes = 8;

// The first record of every segment is a segment list: no key, no content type, as version the
// lowest version not yet handed out when it was created (recovery continues above it even when
// compaction dropped the records that carried the highest versions), and as value the ids (u64
// each) of every older segment that exists when it is created. Recovery checks
// the newest segment's list: a listed segment that is missing is an error, an unlisted older one is
// a leftover of compaction (deleted only after a newer list left it out).
enum class record_kind : std::uint8_t { put = 1, tombstone = 2, segment_list = 3, commit_mark = 4, copy = 5 };
inline constexpr std::size_t commit_mark_value_bytes = 16;
inline constexpr std::size_t commit_mark_bytes = record_header_bytes + commit_mark_value_bytes;

struct record_view {
    record_kind kind = record_kind::put;
    std::uint64_t version = 0;        // the local version (the feed position)
    std::uint64_t copied_version = 0; // a copy's ETag version (another board's); 0 for every other kind
    std::string_view key;
    std::string_view content_type;
    std::string_view value;
    std::uint64_t value_offset = 0;  // where the value starts, relative to the record's first byte

    // A put or a copy: a document's whole state.
    bool holds_document() const { return kind == record_kind::put || kind == record_kind::copy; }
    // What clients see as the document's ETag: the copied version of a copy, else the version.
    std::uint64_t etag_version() const { return copied_version != 0 ? copied_version : version; }
};

// A record's bytes; `copied`: a copy's, which carries the copied version too.
inline constexpr std::size_t record_bytes(std::size_t key, std::size_t content_type, std::size_t value,
                                          bool copied = false) {
    return record_header_bytes + key + content_type + (copied ? copied_version_bytes : 0) + value;
}
static_assert(record_bytes(max_key_bytes, max_content_type_bytes, max_record_value_bytes, true) == max_record_bytes);

// The value of a segment list record (the format above): `ids` in order.
std::string encode_segment_list(std::span<const std::uint64_t> ids);
// The ids of a segment list value; EBADMSG when its length is not a multiple of 8.
io_result<std::vector<std::uint64_t>> decode_segment_list(std::string_view value);

// A commit mark's value (the format above).
struct commit_mark {
    std::uint64_t segment_id = 0;
    std::uint64_t offset = 0;
};
// Appends a commit mark for a mark written at `offset` of segment `segment_id`.
void encode_commit_mark(std::string& out, std::uint64_t segment_id, std::uint64_t offset);
// The value of a kind 4 record (decode_record already checked its length).
commit_mark decode_commit_mark(std::string_view value);
// Bytes 4..31 of every commit mark: all of its header but the checksum.
std::string_view commit_mark_pattern();
inline constexpr std::size_t commit_mark_pattern_offset = 4;

// Appends one encoded record to `out`: any kind but a copy (encode_document_record writes those).
void encode_record(std::string& out, record_kind kind, std::uint64_t version, std::string_view key,
                   std::string_view content_type, std::string_view value);
// Appends a document's record: a put when `etag_version` is `version` (the store gave it), else a
// copy carrying `etag_version`. REQUIRES etag_version != 0.
void encode_document_record(std::string& out, std::uint64_t version, std::uint64_t etag_version, std::string_view key,
                            std::string_view content_type, std::string_view value);

void encode_segment_header(char (&out)[segment_header_bytes], std::uint32_t shard, std::uint64_t segment_id);
struct segment_header {
    std::uint32_t format_version = 0;
    std::uint32_t shard = 0;
    std::uint64_t segment_id = 0;
};
// False when the bytes are not a valid segment header (wrong magic, checksum or version).
[[nodiscard]] bool decode_segment_header(std::string_view bytes, segment_header& out);

enum class decode_status : std::uint8_t { ok, incomplete, corrupt };
// Decodes the record at the start of `bytes`. incomplete: `bytes` ends inside the record (a torn
// tail if the file ends there); corrupt: checksum or field mismatch. `record_size` is set on ok.
// The header's fields are checked against each other before the checksum: a damaged length is
// corrupt, so incomplete always means a consistent header whose record runs past `bytes` (or fewer
// than 32 bytes). Zero bytes are corrupt (or incomplete when fewer than 32). `format_version`: the
// segment's (its header's); a copy (kind 5) in a format below first_format_with_copies is corrupt.
[[nodiscard]] decode_status decode_record(std::string_view bytes, record_view& out, std::size_t& record_size,
                                          std::uint32_t format_version = log_format_version);

}  // namespace percore::store
