// newest_segment: the file that names the newest segment a shard's log has made, so recovery can
// tell a missing newest segment from a log that never had one (issue 35).
//
// `DATA/<layout>/shard-NNN/newest_segment`: a counter file (counter_file.hpp: 20 bytes, replaced
// whole and durably), magic "PCNEWSG1", holding a segment id.
//
// Contract
// - The log (shard_log.hpp) writes it once a new segment is durable in its directory (the segment
//   synced, the directory synced) and before any batch is written to that segment: so it never
//   names a segment that a power cut could take back, and every segment that ever held an
//   acknowledged write is at most the one it names.
// - Recovery (recovery.hpp) refuses a shard whose newest existing segment is below the one named:
//   the segments above were deleted or lost, and with them acknowledged writes. A missing file
//   (a directory written before it existed, or by a restore) names nothing; a damaged one is
//   damage like any other.
// - Free functions of their arguments, through env; one writer per directory (the log's thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/env.hpp"

namespace percore::store {

inline constexpr char newest_segment_file_name[] = "newest_segment";

io_result<void> write_newest_segment(env& e, const std::string& directory, std::uint64_t segment_id, bool sync);

// The id the file names; nullopt without a file; EBADMSG when damaged, or a read's errno.
io_result<std::optional<std::uint64_t>> read_newest_segment(env& e, const std::string& directory);

}  // namespace percore::store
