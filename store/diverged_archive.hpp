// diverged_archive: what a returning primary held that its new primary does not (SPEC §12, "A
// returning primary") — written as DATA/diverged-{epoch}.tar, a backup-shaped tar that
// `percore restore` unpacks into a data directory a server opens (backup_restore.hpp).
//
// Files, all in the data directory (DATA):
//   diverged-{E}.part      the captured documents as they are kept: log records (log_format.hpp),
//                          one put or copy (kind 5, the ETag version kept) per document, appended
//                          while the resync runs; a torn last record (a crash) is cut at reopen
//   diverged-{E}.tar.tmp   the tar being built by finish(); replaced by the next finish()
//   diverged-{E}.tar       the result, renamed into place once whole and synced
//
// The tar (tar_format.hpp), in this order:
//   FORMAT                                   "percore-data 1\nlayout 1\nshards 1\ndirectory <16 hex>\n"
//                                            (a fresh random id: the archive is a new directory)
//   layout-1/                                directory
//   layout-1/shard-000/                      directory
//   layout-1/shard-000/0000000000000001.seg  segment header (shard 0, id 1), a segment list (no
//                                            older segment, version floor 1), then the .part's bytes
//   two zero blocks
// One shard: `serve --data DIR --shards N` reshards it at its first start (data_layout.hpp).
// Local versions are 1, 2, ... in capture order (keys are unique in an archive); ETag versions
// are the captured documents' own (a copy record when they differ from the local one).
//
// Contract
// - open() makes or reopens the .part for epoch E (a restart in the middle of a resync continues
//   the same capture); holds() says whether a key was captured already (a key is kept once: the
//   first state seen is the board's own, later ones are copies of the new primary).
// - add() appends; sync() makes every add() durable (call it before the store overwrites what was
//   added); finish() with nothing captured removes the .part and writes no tar.
// - Blocking file I/O on the caller's thread (the follower's: a rare, bounded event). One owner.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>

#include "store/result.hpp"

namespace percore::store {

// Bytes copied from the .part into the tar per read and write.
inline constexpr std::size_t diverged_copy_bytes = 1u << 20;

std::string diverged_tar_name(std::uint64_t epoch);   // "diverged-{E}.tar"

class diverged_archive {
public:
    [[nodiscard]] static result<diverged_archive> open(const std::string& root, std::uint64_t epoch);
    diverged_archive(diverged_archive&& o) noexcept;
    diverged_archive& operator=(diverged_archive&&) = delete;
    diverged_archive(const diverged_archive&) = delete;
    ~diverged_archive();

    bool holds(std::string_view key) const { return keys_.contains(std::string(key)); }
    std::uint64_t documents() const { return keys_.size(); }
    std::uint64_t epoch() const { return epoch_; }

    // REQUIRES !holds(key), etag_version != 0.
    [[nodiscard]] result<void> add(std::string_view key, std::string_view content_type, std::string_view value,
                                   std::uint64_t etag_version);
    [[nodiscard]] result<void> sync();
    // The tar's path (empty when nothing was captured); the .part is gone either way on success.
    [[nodiscard]] result<std::string> finish();

private:
    diverged_archive(std::string root, std::uint64_t epoch, int fd) : root_(std::move(root)), epoch_(epoch), fd_(fd) {}
    [[nodiscard]] result<void> scan();
    [[nodiscard]] result<void> write_tar(const std::string& tmp);
    std::string part_path() const;

    std::string root_;
    std::uint64_t epoch_ = 0;
    int fd_ = -1;
    std::uint64_t part_bytes_ = 0;
    std::unordered_set<std::string> keys_;
};

}  // namespace percore::store
