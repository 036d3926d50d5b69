// backup_stream: GET /_backup (SPEC §11) on the shard that received it — every shard's durable
// files captured at one instant (store/shard_capture.hpp), streamed as one tar
// (store/tar_format.hpp) while the shards go on writing. `percore restore` unpacks it
// (store/backup_restore.hpp).
//
// One backup, step by step:
//   1. begin(): the request's shard (its origin) names the backup with a tag (backup_tag), takes
//      its own capture at once and asks every other shard for theirs (backup_captures). The request
//      arrived after every write acknowledged before it was sent was published by its owner, and
//      each owner captures on its own thread after the request's message arrived: so every capture
//      holds every such write.
//   2. Each owner hands its capture to the origin (a backup_part through the mailbox,
//      shard_message.hpp): its open files are the origin's from then on; captured() keeps it.
//   3. step(), once every part is in: the origin opens DATA/FORMAT and DATA/admin.token (when it
//      exists) and sends the head: 200, application/x-tar, chunked, Content-Disposition: attachment;
//      filename="percore-backup-<UTC time>.tar"; a log line says what it will send.
//   4. step(), every round: a backup whose stream has room for a piece (connection_pool::
//      stream_room) and whose pace allows it writes the archive's next backup_chunk_bytes
//      (shards/base/limits.hpp), with at most one file read (pread) — a round is never held long, and a
//      slow client is neither cut off nor buffered for: the backup waits until it has read. The
//      pace: after a piece, the backup waits backup_pace_factor times what the piece took, so it
//      takes at most a tenth of the shard's thread and writes go on (wake_by() tells the loop).
//   5. After the last entry, the two zero blocks and the stream's last chunk; a log line with the
//      bytes and seconds.
//   The archive: FORMAT, admin.token (mode 0600), layout-<G>/, then for each shard
//   layout-<G>/shard-<NNN>/ and its captured files (segments in id order, feed_floor); not LOCK.
//
// Contract
// - Owned by one shard's document_service, a task of that shard (base/shard_task.hpp); every call
//   on that shard's thread, inside a round.
// - Failures before the head (a shard's files could not be captured, FORMAT cannot be opened): 500
//   with the reason, and a log line. After it (a read fails, or a file is shorter than captured):
//   the stream is aborted (connection_pool::stream_abort), so the client sees a chunked body that
//   never ends — never a tar that looks whole; a log line names the file.
// - closed(): the connection ended (the client left, or stopped reading for an idle timeout): its
//   backup is dropped and its files closed. closed() may come from inside step() (a failed write):
//   the backup is marked and dropped at the end of step(). begin_stop() (the server stops) aborts
//   every backup as above: one would not end within the stop's grace.
// - HEAD /_backup: the same head, no capture, no body.
// - Bounds: at most max_backups_per_shard at once (shards/base/limits.hpp); begin() refuses past it
//   (full(): the caller answers 503).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/answer_sink.hpp"
#include "net/request_handler.hpp"
#include "shards/base/shard_task.hpp"
#include "store/result.hpp"
#include "store/shard_capture.hpp"
#include "store/tar_format.hpp"

namespace percore::shards {

// One shard's capture, on its way to the backup's origin.
struct backup_part {
    unsigned shard = 0;
    store::result<store::shard_capture> files;
};

// A backup's name in messages: the origin shard and its count of backups.
struct backup_tag {
    unsigned origin = 0;
    std::uint32_t id = 0;
    std::uint64_t encode() const { return std::uint64_t{origin} << 32 | id; }
    static backup_tag decode(std::uint64_t tag) {
        return {static_cast<unsigned>(tag >> 32), static_cast<std::uint32_t>(tag)};
    }
};

// What a backup needs of its shard besides the answer sink: the other shards' captures (over the
// mailbox, server/shard.cpp) and its own.
class backup_captures {
public:
    // Every other shard captures its files and hands them back (backup_streams::captured()).
    virtual void request_captures(std::uint64_t tag) = 0;
    virtual store::result<store::shard_capture> capture_own() = 0;

protected:
    ~backup_captures() = default;
};

// Where the archive's files come from.
struct backup_source {
    std::string root;             // the data directory
    std::uint64_t generation = 1; // its layout
    unsigned shards = 1;
};

class backup_streams final : public shard_task {
public:
    backup_streams(unsigned self, unsigned shards) : self_(self), shards_(shards) {
        set_busy(false);  // busy while a backup runs
    }

    // The shard's side; without it (in-process tests) there are no backups (can_back_up()).
    void attach(net::answer_sink* sink, backup_captures* captures, backup_source source) {
        sink_ = sink;
        captures_ = captures;
        source_ = std::move(source);
    }
    bool can_back_up() const { return sink_ != nullptr && captures_ != nullptr; }
    bool full() const;

    // A GET (or HEAD: head_only) the caller leaves pending. REQUIRES can_back_up() and !full().
    void begin(net::answer_ticket ticket, bool head_only);
    // Shard `part->shard`'s capture for the backup `tag` (one that ended meanwhile drops it).
    void captured(std::uint64_t tag, std::unique_ptr<backup_part> part);
    void closed(net::answer_ticket ticket);

    // shard_task
    // has_work(): whether step() has something to do now: a backup to start, or one with room to
    // write whose pace allows it; wake_by(): when the next paced piece is due (max() when none
    // waits). begin_stop() aborts every backup (see above).
    std::size_t step(time_point now) override;
    bool has_work(time_point now) const override;
    time_point wake_by() const override;
    bool timed() const override { return true; }
    void begin_stop() override;
    std::size_t size() const { return backups_.size(); }

private:
    struct entry {
        store::tar_header header;
        store::readable_file* file = nullptr;  // a file's bytes [0, header.size); owned by the backup
    };
    struct backup {
        net::answer_ticket ticket;
        std::uint32_t id = 0;
        bool head_only = false;
        std::vector<std::unique_ptr<backup_part>> parts;  // by shard; null until it arrived
        unsigned arrived = 0;
        std::vector<store::captured_file> root_files;     // FORMAT, admin.token
        std::vector<entry> entries;
        bool begun = false;   // its head was sent
        bool ended = false;   // to be dropped at the end of step()
        std::size_t next = 0;            // the entry being written
        bool header_sent = false;        // of entries[next]
        std::uint64_t offset = 0;        // into entries[next]'s bytes
        bool end_sent = false;           // the end blocks
        std::uint64_t sent = 0;
        std::chrono::steady_clock::time_point started{};
        std::chrono::steady_clock::time_point next_piece{};  // the pace (backup_stream.hpp, step 4)
    };
    bool can_write(const backup& b, std::chrono::steady_clock::time_point now) const;
    void start(backup& b);
    std::string build_entries(backup& b);
    void write_piece(backup& b);
    std::string fill(backup& b);
    void fail(backup& b, const std::string& why);
    void drop_ended();

    unsigned self_;
    unsigned shards_;
    net::answer_sink* sink_ = nullptr;
    backup_captures* captures_ = nullptr;
    backup_source source_;
    std::vector<std::unique_ptr<backup>> backups_;
    std::uint32_t next_id_ = 0;
    bool stepping_ = false;   // closed() can come from inside a stream call of step()
    std::string piece_;       // the archive's next bytes, reused
};

}  // namespace percore::shards
