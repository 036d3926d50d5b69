// backup_restore: `percore restore TAR DIR` (SPEC §11) — unpacks a backup taken with GET /_backup
// (a tar: tar_format.hpp) into a new data directory, which `serve --data DIR` then opens (and
// reshards, when its --shards differs: data_layout.hpp).
//
// Contract
// - restore_backup(input, dir): the archive is read from the file descriptor `input` once, in
//   order (a file or a pipe). `dir` must not exist (it is made, with its parents, as serve makes a
//   data directory) or be an empty directory; anything else is refused before anything is
//   written. It is locked (data_directory.hpp) while the restore writes, so no server starts on it
//   meanwhile; LOCK stays, as in every data directory.
// - What it accepts — anything else ends the restore with one line naming the entry:
//   FORMAT, admin.token, layout-<G>/, layout-<G>/shard-<NNN>/, and in a shard directory its segment
//   files (<16 hex digits>.seg) and feed_floor; regular files and directories only, relative paths
//   without `..` (tar_format.hpp refuses the rest); each path once, a directory before what it
//   holds; one layout generation, FORMAT's, with every shard directory FORMAT names and no other;
//   and the zero blocks that end an archive (a backup cut short is refused, never restored in part).
// - Verified as unpacked: once FORMAT is written, recovery's own scan (check.hpp, verify mode)
//   reads every record's checksum and every segment list of what was written; damage is refused
//   with the file and the byte offset of the first, as `serve` would name it.
// - A restore that fails, for whatever reason, keeps nothing: what it wrote (LOCK included) is
//   removed, a DIR it made is removed, an empty DIR it was given is left empty.
// - Durability: every file is fsynced when written, every directory after its entries; FORMAT is
//   written last, then DIR synced. A crash in the middle leaves DIR without FORMAT (or, between
//   FORMAT and the scan, with damage recovery refuses): a partial restore is never served.
// - Modes: as the server makes its files, whatever the archive says: files and admin.token 0600,
//   directories 0700 (SPEC §6) (a restore must not widen what the server keeps private).
// Thread: the main thread of `percore restore`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "store/result.hpp"

namespace percore::store {

// FORMAT is held in memory until it is written last: 255 bytes is what the server reads of it
// (data_layout.cpp); a backup's is about 60.
inline constexpr std::size_t max_restored_format_bytes = 255;
// The token file the server writes is one line of ~45 bytes; 4 KiB bounds a hostile archive's.
inline constexpr std::size_t max_restored_token_bytes = 4096;
// Bytes copied from the archive to a file per read and write.
inline constexpr std::size_t restore_copy_bytes = 1u << 20;

struct restore_stats {
    unsigned shards = 0;
    std::uint64_t generation = 0;
    std::uint64_t files = 0;
    std::uint64_t bytes = 0;  // of the files written
};

result<restore_stats> restore_backup(int input, const std::string& dir);

}  // namespace percore::store
