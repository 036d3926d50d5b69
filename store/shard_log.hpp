// shard_log: one shard's write-ahead log — appends each batch to the current segment file and makes
// it durable with one fdatasync, on a thread of its own, so the shard's loop never waits for a disk.
//
// Contract
// - Owner thread (the shard): append() a batch when !busy(); poll() each round returns the result
//   once the append finished; on_finished (given at construction) is called on the log's thread
//   right after, to wake the owner.
// - At most one append in flight: the owner forms the next batch meanwhile (group commit; no timer).
// - Durability: with sync, a batch is on stable storage when its result says ok. Without sync
//   (--durability none), after the write returned.
// - Failures: an append that fails (ENOSPC, EIO) is truncated away and reported; later appends
//   may succeed (space freed). A failed fdatasync is never retried as if it had worked: the log
//   becomes failed() and refuses every later append (the fsyncgate lesson).
// - Segments: a new segment file (header, then records) is started when the current one would grow
//   past segment_target_bytes; a batch never spans two segments. Created files are made durable in
//   their directory before any record in them is acknowledged.
#pragma once

#include <atomic>
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

namespace percore::store {

struct log_options {
    std::string directory;                              // the shard's directory (exists)
    std::uint32_t shard = 0;
    bool sync = true;                                   // fdatasync each batch
    std::uint64_t segment_target_bytes = 64ull << 20;   // roll to a new segment past this
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

    std::uint64_t current_segment_id() const { return segment_id_.load(std::memory_order_acquire); }

    // Owner: `segment` is about to be deleted. The next append starts a new segment whose segment
    // list leaves it out; delete the file only after that append returned ok (its result's
    // segment_id is then above the one current now).
    void retire(std::uint64_t segment);

private:
    enum class state : std::uint8_t { idle, queued, done, stopping };
    void run();
    append_result write(const std::string& batch);
    int open_next_segment();

    env& env_;
    log_options options_;
    std::function<void()> on_finished_;
    std::unique_ptr<writable_file> file_;
    std::atomic<std::uint64_t> segment_id_;
    std::uint64_t next_segment_id_;
    std::uint64_t batches_in_segment_ = 0;
    std::string batch_;
    append_result result_;
    std::vector<std::uint64_t> segments_;  // existing, guarded by mutex_
    bool roll_requested_ = false;          // guarded by mutex_
    bool busy_ = false;
    std::atomic<bool> failed_{false};
    std::atomic<state> state_{state::idle};
    std::mutex mutex_;
    std::condition_variable wake_;
    std::thread thread_;
};

}  // namespace percore::store
