// shard_capture: one shard's durable files at one instant, held open for a backup (GET /_backup,
// SPEC §11) to copy while the shard goes on writing.
//
// What a capture holds: every segment file a crash at that instant would leave to recovery (after
// its torn tail is cut), each with an open handle and the length to copy, and the shard's
// feed_floor file (feed_floor.hpp) the same way. Copying [0, length) of each, into a shard
// directory of their names, makes a directory recovery accepts and that holds every write the
// shard had acknowledged when it was captured:
// - The newest segment the store knows (one its log appended to and whose append it settled) is
//   cut at the end of the last batch it settled: every write acknowledged, no byte of a batch still
//   in flight on the log's thread (whose end only the owner learns, through poll(): shard_log.hpp).
//   Bytes before that end are never written again (the log appends after them; a failed batch is
//   cleared from its own offset on).
// - Every older segment was sealed before the log started the next one (its zero tail cut), and
//   is never written again: copied whole, a commit mark after its last batch included.
// - The segments are those the store counts (segment_set::usage), which are those the newest
//   one's list names, and it: a compacted segment is deleted and forgotten in the same step that
//   settles the first append in a segment whose list leaves it out (segment_set::delete_retired),
//   so no capture sees a newest segment that leaves out one still counted, nor misses one it names.
// - Compaction may delete a captured segment, and the floor file may be replaced by a rename, after
//   the capture: the open handle keeps the bytes it captured readable until it is closed.
//
// Contract
// - capture_shard_files(): on the store's owner thread (shard_store::capture_files() checks), so
//   that no batch settles, no segment is deleted and no floor is written while it runs; it opens
//   the files and reads their sizes, nothing more (an open and an fstat a file: a few segments a
//   shard, one per 64 MiB).
// - A shard_capture is move-only: it owns its handles (closed when it is destroyed), and may move
//   to another thread (env.hpp: one file object from one thread at a time).
// - Errors (result): a file that cannot be opened or sized, or a newest segment shorter than what
//   the store settled in it (damage behind the server's back), naming the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/env.hpp"
#include "store/result.hpp"
#include "store/segment_set.hpp"

namespace percore::store {

struct captured_file {
    std::string name;                     // in its directory: "0000000000000001.seg", "feed_floor"
    std::unique_ptr<readable_file> file;  // open: its bytes outlive an unlink or a rename over it
    std::uint64_t length = 0;             // copy [0, length)
};

struct shard_capture {
    std::vector<captured_file> files;  // segments in id order, then feed_floor when the shard has one

    std::uint64_t bytes() const {
        std::uint64_t n = 0;
        for (const captured_file& f : files) n += f.length;
        return n;
    }
};

// The capture of the shard in `directory`, whose segments `segments` describes (contract above).
result<shard_capture> capture_shard_files(env& e, const std::string& directory, const segment_set& segments);

// `directory`/`name` open, to be copied whole as it is now (FORMAT, the admin token, a feed floor).
result<captured_file> capture_whole_file(env& e, const std::string& directory, const std::string& name);

}  // namespace percore::store
