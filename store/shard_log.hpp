// shard_log: one shard's write-ahead log — appends each batch to the current segment file and makes
// it durable with one fdatasync, on a thread of its own, so the shard's loop never waits for a disk.
//
// Contract
// - Owner thread (the shard): append() a batch when !busy(); poll() each round returns the result
//   once the append finished; on_finished (given at construction) is called on the log's thread
//   right after, to wake the owner.
// - At most one append in flight: the owner forms the next batch meanwhile (group commit; no timer).
// - REQUIRES: append(), poll(), retire() and request_roll() on the owner's thread only (one shard's;
//   checked in debug builds, owner.hpp); append() only when !busy(), with a batch that is not empty
//   unless it is the store's empty roll; retire() only while !busy() (the segment list of a segment
//   being created reads the retired set). Checked with PERCORE_REQUIRES, in release builds too: a
//   second append in flight would overwrite the first's bytes.
// - Durability: with sync, a batch is on stable storage when its result says ok. Without sync
//   (--durability none), after the write returned.
// - Failures: an append that fails (ENOSPC, EIO) is reported, and the bytes it may have written are
//   cleared (zeroed again inside the zeroed window, truncated away past it) and the clearing synced
//   before the next batch is written at the same offset, so no stale byte of it can follow a later
//   batch or come back after a power cut; later appends may succeed (space freed). If the clearing
//   fails, the log becomes failed(). A failed fdatasync is never retried as if it had worked: the
//   log becomes failed() and refuses every later append (the fsyncgate lesson), whether it synced a
//   batch, a new segment, a cut or zeros.
// - Segments: a new segment file (header, then records) is started when the current one would grow
//   past segment_target_bytes, or when the owner asked for one (request_roll()); a batch never spans
//   two segments. Created files are made durable in their directory before any record in them is
//   acknowledged, and then named in the shard's newest_segment file (newest_segment.hpp), before
//   the first batch goes to them.
// - Commit marks (with sync and commit_mark_idle > 0): once the log has had no batch to write for
//   commit_mark_idle after a batch was synced, it writes a commit mark (log_format.hpp) after that
//   batch and syncs it, and so does a clean stop (the destructor). Every batch but the last is
//   followed by the next one's records, and the last by a mark, so recovery can tell bit rot in an
//   acknowledged record from a torn write (segment_reader.hpp); only a crash within
//   commit_mark_idle of the last sync leaves a last batch without one. A batch that arrives while
//   a mark is being written waits for its sync (one small sync, at most once per quiet spell). A
//   mark that fails to be written is cleared like a failed batch and fails nothing; a failed sync
//   of one makes the log failed(), as any failed sync does.
// - Zeroed window (with sync and zeroed_window_bytes > 0): each batch is written with write_at() at
//   the segment's logical end (the end of its last record), not at the file's end. After a batch's
//   result is published, whenever less than zeroed_window_bytes of zeros are ahead of the logical
//   end, the log writes that many more zeros after them and syncs them (never past
//   segment_target_bytes), so that a batch overwrites synced zeros and its fdatasync has no file
//   size or extent change to journal. A batch waits for at most one window of zeroing (the one
//   after the batch before it); a batch that passes the zeroed end grows the file. A zero fill that
//   fails (ENOSPC) fails no batch: the segment goes on growing with each batch, and the next segment
//   tries again. The zero tail is cut off, and the cut synced, when the segment is sealed (before the
//   next segment is created) and at a clean stop (the destructor), so a sealed segment ends exactly
//   after its last record; only a crash leaves a last segment ending in zeros, which recovery cuts as
//   a torn tail (after a restart the log starts a new segment). A file that cannot overwrite in
//   place (zero_fill() fails with ENOTSUP) gets no window.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/env.hpp"
#include "store/limits.hpp"
#include "store/owner.hpp"

namespace percore::store {

struct log_options {
    std::string directory;                              // the shard's directory (exists)
    std::uint32_t shard = 0;
    bool sync = true;                                   // fdatasync each batch
    std::uint64_t segment_target_bytes = default_segment_target_bytes;  // roll to a new segment past this
    // Zeros kept ahead of the batches; 0: none. Off by default: a power cut on a real disk can keep a
    // later page of an overwritten batch and lose an earlier one, which recovery cannot yet tell
    // from bit rot (it would refuse to start). Measured +40-60% durable writes/s when on.
    std::uint64_t zeroed_window_bytes = 0;
    // With sync: idle this long after a batch, the log writes a commit mark and syncs it; 0: not
    // while it runs (a clean stop still marks its last batch) — for tests that count the log's
    // steps, which a timer would make differ from run to run.
    std::chrono::milliseconds commit_mark_idle{default_commit_mark_idle_ms};
};

struct append_result {
    int error = 0;                 // 0, or the errno of the failed write or sync
    std::uint64_t segment_id = 0;  // where the batch went
    std::uint64_t offset = 0;      // of the batch's first byte in that segment
    std::uint64_t duration_ns = 0; // write + sync
    std::uint64_t bytes = 0;       // of the batch
};

std::string segment_file_name(std::uint64_t segment_id);  // "0000000000000001.seg"

class shard_log {
public:
    // next_segment_id: above every segment that exists; appends start a new segment there.
    // existing_segments: the ids of the segments that exist (listed in each new segment).
    shard_log(env& e, log_options options, std::uint64_t next_segment_id, std::vector<std::uint64_t> existing_segments,
              std::function<void()> on_finished);
    ~shard_log();
    shard_log(const shard_log&) = delete;
    shard_log& operator=(const shard_log&) = delete;

    bool busy() const { return busy_; }
    bool failed() const { return failed_.load(std::memory_order_acquire); }
    // Whether poll() has a result now.
    bool finished() const { return busy_ && state_.load(std::memory_order_acquire) == state::done; }

    void append(std::string batch);
    std::optional<append_result> poll();
    // Owner, while no append is in flight: the last batch's buffer, emptied, its capacity kept for
    // the next batch's records (a batch of one write allocated and freed one, callgrind); empty when
    // it is none or above max_returned_buffer_bytes (a burst's buffer is freed, not held for good).
    std::string take_spent_buffer();
    // 16 KiB: the records of ~150 small writes (a batch of 64 busy connections' 16 B PUTs is ~6 KiB).
    static constexpr std::size_t max_returned_buffer_bytes = 16 << 10;

    std::uint64_t current_segment_id() const { return segment_id_.load(std::memory_order_acquire); }

    // Owner: every version below `version` has been handed out. Recorded in each new segment's list,
    // so recovery continues above versions whose records compaction dropped.
    void note_versions_below(std::uint64_t version) { version_floor_.store(version, std::memory_order_relaxed); }

    // Owner, while no append is in flight: `segment` is to be deleted. Every segment started from now
    // on leaves it out of its segment list; delete the file only after an append returned ok in a
    // segment above the one current now (that segment's list was durable before its first batch).
    // Does not start a segment by itself: a roll per retired segment made each new segment a small
    // one that soon became the next compaction victim, a segment per batch (the segment leak).
    void retire(std::uint64_t segment);
    // Owner: the next append starts a new segment even if the current one has room (the store asks
    // when the segments waiting for a list that leaves them out reach its bound).
    void request_roll();

    std::uint64_t segment_target_bytes() const { return options_.segment_target_bytes; }

private:
    enum class state : std::uint8_t { idle, queued, done, stopping };
    void run();
    append_result write(const std::string& batch);
    io_result<void> open_next_segment();
    io_result<void> seal_current_segment();
    [[nodiscard]] bool clear_failed_write(std::uint64_t offset, std::uint64_t length);
    void extend_zeroed_window();
    void write_commit_mark();
    void wait_for_work(std::unique_lock<std::mutex>& lock);

    env& env_;
    log_options options_;
    std::function<void()> on_finished_;
    std::unique_ptr<writable_file> file_;
    std::atomic<std::uint64_t> segment_id_;
    std::uint64_t next_segment_id_;
    std::uint64_t batches_in_segment_ = 0;
    std::uint64_t end_ = 0;         // logical end of the current segment: where the next batch goes
    std::uint64_t zeroed_end_ = 0;  // [end_, zeroed_end_) holds synced zeros
    bool zeroing_ = false;          // the current segment keeps a zeroed window
    bool unmarked_ = false;         // a synced batch is the last thing in the segment: no mark after it
    std::string batch_;
    append_result result_;
    std::vector<std::uint64_t> segments_;  // existing, guarded by mutex_
    bool roll_requested_ = false;          // guarded by mutex_
    std::atomic<std::uint64_t> version_floor_{0};
    bool busy_ = false;
    std::atomic<bool> failed_{false};
    std::atomic<state> state_{state::idle};
    std::mutex mutex_;
    std::condition_variable wake_;
    owner_thread owner_;
    std::thread thread_;
};

}  // namespace percore::store
