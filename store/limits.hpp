// limits: every default and bound of the store, in one place, with what ties them together.
//
// Contract
// - Compile-time constants only; no function, no state. Any thread.
// - The other store headers include this one instead of defining their own bounds; the format of
//   the bytes these bound is drawn in log_format.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace percore::store {

// --- what the log format allows (log_format.hpp, record header) -----------------------------------

// u16 length fields. The server allows far less of a key (1024 + app), the log no more than this.
inline constexpr std::size_t max_key_bytes = 0xFFFF;
inline constexpr std::size_t max_content_type_bytes = 0xFFFF;
// The value's length is a u32 field; 1 GiB keeps a record (and a reader's buffer) within what a
// 32-bit size and one read handle comfortably.
inline constexpr std::uint32_t max_record_value_bytes = 1u << 30;
// A document's value (make_document refuses more): what one record can carry.
inline constexpr std::size_t max_value_bytes = max_record_value_bytes;
// The fixed record header (log_format.hpp draws its 32 bytes) plus the largest fields.
inline constexpr std::size_t record_header_size = 32;
// A copy record (kind 5: a put whose ETag version is another board's) carries that version, a u64,
// between the content type and the value.
inline constexpr std::size_t copied_version_bytes = 8;
// The largest record is a copy's: the header, the largest fields and the copied version.
inline constexpr std::uint64_t max_record_bytes = record_header_size + max_key_bytes + max_content_type_bytes +
                                                  copied_version_bytes + std::uint64_t{max_record_value_bytes};
// Versions (and ETag versions) stay below 2^63: a store starts at the wall clock in microseconds
// (about 2^51 today) and counts up, so one at or past it is damage (recovery refuses it) or a
// hostile page (a follower refuses it: shards/follower/page_check.hpp); accepted, the versions handed
// out after it would soon wrap to 0 and repeat.
inline constexpr std::uint64_t version_limit = std::uint64_t{1} << 63;
// A document keeps the segment that holds its record in 31 bits (document.hpp: the 32nd marks a
// copy). A shard starts a segment when the last one passed its target (64 MiB), at each start of
// the server, and after eight compacted ones (max_retired_segments): 2^31 - 1 segments are ~128 PiB
// written or two billion restarts, so a segment id past it is a broken log, refused (the log's
// segment ids are u64: log_format.hpp).
inline constexpr std::uint64_t max_segment_id = (std::uint64_t{1} << 31) - 1;

// --- log ----------------------------------------------------------------------------------------

// A segment rolls to the next one past this (shard_log.hpp, log_options): 64 MiB keeps a shard's
// segment count and the size of each segment list small, and a compaction victim quick to copy.
inline constexpr std::uint64_t default_segment_target_bytes = 64ull << 20;

// After a batch's sync, a log that has had nothing to write for this long writes a commit mark
// (log_format.hpp) and syncs it: the only way a damaged last batch can be told from a torn one at
// recovery without a second sync per batch. Batches that follow each other closely need none (the
// next batch's records tell), so a busy log writes no marks; an idle one pays one sync per quiet
// spell. 50 ms: a batch acknowledged at least this long before a crash is protected, and a sync
// of 16-32 bytes costs the disk 0.3-1 ms (perf/sync_cost), well under 2% of an idle shard's disk.
inline constexpr std::uint32_t default_commit_mark_idle_ms = 50;

// --- batches --------------------------------------------------------------------------------------

// Records per log append (one write may exceed it): 8 MiB is one fdatasync of a few ms on an SSD.
inline constexpr std::uint64_t max_batch_bytes = 8ull << 20;
// Records of one turn class (write_op::turn_class: an app) in a batch while another class has writes
// waiting (shard_store, "fair batches"): half a batch, 4 MiB. Classes take turns one write at a
// time, so this holds back only a class whose writes are larger than the others'; whatever one class
// sends, the others get at least half of every batch they wait for. Not less: two classes at their
// bound already fill a batch, so the bound never ends a batch early (see below), and a flooding
// class still syncs 4 MiB at a time. Once no other class waits, one class fills the batch alone.
inline constexpr std::uint64_t max_class_batch_bytes = max_batch_bytes / 2;

// Batch linger (shard_store::set_batch_linger; the server turns it on): after a batch's answers went
// out, the next batch waits for the answered clients' next writes, at most this long and at most
// 1/batch_linger_sync_fraction of the last sync. 8 durable writers on one shard made 4 writes a
// sync without it (half of them always waiting on the other half's sync), against Redis's 8 (its
// inline fsync holds every client's next write back until the sync is done): 0.37x Redis's writes/s
// (docs/perf/README.md). A loopback client answers again in ~50-100 µs on this VM; a sync takes
// 0.3-3 ms, so a quarter of one is the most a linger costs a batch that does not grow.
inline constexpr std::chrono::microseconds max_batch_linger{250};
inline constexpr std::uint64_t batch_linger_sync_fraction = 4;

// --- memory -------------------------------------------------------------------------------------

// Values this large are not kept in memory once durable: readers send them from the log file.
inline constexpr std::size_t file_value_min_bytes = 64 * 1024;

// Documents whose own allocation (header, key, content type, and the value when it is inline: up to
// document::inline_value_max_bytes) is at most this come from the owning store's document_pool
// (document_pool.hpp), in size classes of document_class_step_bytes; larger ones from malloc.
// 512 B: a 256-byte value with a key (app + key) of up to ~230 bytes; the pool keeps one free list
// per class (64 of them, 512 B of list heads per store).
inline constexpr std::size_t max_pooled_document_bytes = 512;
// The class step: the documents' alignment (their header holds a u64), so no class wastes bytes to
// rounding that alignment would not already take; malloc rounds to 16 and adds an 8-byte chunk
// header (~19 B a document of a 13-byte key and a 16-byte value, measured: docs/perf/README.md).
inline constexpr std::size_t document_class_step_bytes = 8;
// The pool's unit of memory, mapped on first use and aligned to its size, so that a block's slab
// (and its pool) is found from the block's address. 256 KiB: ~4,700 documents of 56 bytes a slab
// (~215 slabs, each one mapping, for a million), while an idle store maps none.
inline constexpr std::size_t document_slab_bytes = 256 * 1024;

// --- compaction -----------------------------------------------------------------------------------

// Bytes of a victim segment read per compact_step() (one per loop round).
inline constexpr std::size_t compaction_read_bytes_per_step = 256 * 1024;
// Copies queued and not yet in a batch; compact_step() queues none past it.
inline constexpr std::size_t max_pending_relocations = 4096;
// Records of copies one batch carries (at least one copy): a step reads at most
// compaction_read_bytes_per_step of records (plus the one it ends inside), and a batch is formed at
// most once per loop round, so a batch that carries as many keeps the copies from piling up; the
// rest of the batch (7/8 of max_batch_bytes at least) is left to client writes, which are never
// delayed behind queued copies by more than this.
inline constexpr std::uint64_t max_relocation_bytes_per_batch = compaction_read_bytes_per_step;
// Compacted segments wait for a segment list that leaves them out (the next segment the log starts)
// before their files are deleted. The log is not made to start one per compacted segment (that made
// a segment per batch: the segment leak); it is asked to once the waiting segments hold a segment
// target of bytes, or number max_retired_segments. Until they are deleted, compaction picks no new
// victim. (A lower byte bound, half a target, freed a full victim sooner but sealed the active
// segment early so often that small, mostly live segments piled up, each with a segment list naming
// all the others: compaction_test's space bound failed.)
inline constexpr std::size_t max_retired_segments = 8;

// --- change feed ---------------------------------------------------------------------------------

// How long a deleted key's tombstone stays listed by the change feed (shard_store's
// changes_retention, seconds): a day, so a feed client that was away for less than a day resumes
// where it stopped; an older cursor is below the shard's feed floor and must start over.
inline constexpr std::uint64_t default_changes_retention_seconds = 86400;
// The time-based feed floor keeps (time, high_version) checkpoints at most one per
// max(1 s, retention / feed_checkpoints_per_retention): at most this many plus two are held
// (shard_store::expire_changes), and the floor is at most retention / 256 late (337 s by default).
inline constexpr std::uint64_t feed_checkpoints_per_retention = 256;
// The window of recent changes a shard keeps once a feed reader asked (recent_changes.hpp): at most
// this many changes and bytes (chunks: 16 bytes a change plus its key). 65,536 changes is ~1 s of
// writes at the 64-connection durable write rate here, ten times the 100 ms a delivery lingers
// between partial batches; 4 MiB holds that many with keys of ~48 bytes. A cursor below the window
// lists by scanning the prefix, as before.
inline constexpr std::size_t max_recent_changes = 65536;
inline constexpr std::size_t max_recent_change_bytes = 4u << 20;

// --- percore check (check.hpp) ------------------------------------------------------------------

// The most shard directories a FORMAT may name for `percore check` to read them: 16 times the
// server's own bound (shards/base/limits.hpp, max_shards = 256). A FORMAT naming more is damage, not a
// layout to walk directory by directory.
inline constexpr unsigned max_checked_shards = 4096;

// --- how they relate ------------------------------------------------------------------------------

// A value kept in the file is a value a record can carry.
static_assert(file_value_min_bytes < max_record_value_bytes);
// A change's key length is a u16 in recent_changes' entries; a chunk's size a u32.
static_assert(max_key_bytes <= 0xFFFF);
static_assert(max_batch_bytes < 0xFFFFFFFFu / 2);
// The value length field is a u32.
static_assert(max_record_value_bytes <= 0xFFFFFFFFu);
// The record's body length (a u32 at offset 4, everything after offset 8) holds the largest record.
static_assert(max_record_bytes - 8 <= 0xFFFFFFFFu);
// A compaction step is not bounded below by one max-size record: it reads whole records, so a step
// that starts at a record larger than compaction_read_bytes_per_step reads that one record (the
// bound is checked before each record, never inside one). It must still hold one ordinary value kept
// in memory, or every step of a victim of small values would be one record long:
static_assert(compaction_read_bytes_per_step >= 4 * file_value_min_bytes);
// The largest pooled document fits a slab many times over (the slab's unused tail is at most one
// block short of it: < 0.2%), the classes are whole steps, and a slab is a power of two (its address
// is found by masking).
static_assert(document_slab_bytes >= 256 * max_pooled_document_bytes);
static_assert(max_pooled_document_bytes % document_class_step_bytes == 0);
static_assert((document_slab_bytes & (document_slab_bytes - 1)) == 0);
// Copies leave client writes most of a batch (see max_relocation_bytes_per_batch).
static_assert(max_relocation_bytes_per_batch * 8 <= max_batch_bytes);
static_assert(max_relocation_bytes_per_batch >= compaction_read_bytes_per_step);
// Two classes held at their bound fill a batch: the bound leaves no batch short while writes wait.
static_assert(2 * max_class_batch_bytes >= max_batch_bytes);
static_assert(max_class_batch_bytes > 0);
// A batch fits in a segment of the default size (a batch never spans two segments).
static_assert(max_batch_bytes < default_segment_target_bytes);

}  // namespace percore::store
