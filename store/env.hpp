// env: every file operation the durable store makes, behind one small interface, so tests can run
// the store on a fault-injecting file system (power cuts, torn writes, EIO, ENOSPC) fast and
// deterministically.
//
// Contract
// - Errors are values: io_result<T> (result.hpp: a [[nodiscard]] std::expected<T, int>) carrying an
//   errno value. Nothing throws.
// - posix_env(): the real thing (open/pwrite/fdatasync/...); files it opens have a file descriptor
//   (`descriptor()`), which the server uses to send large values with sendfile().
// - A writable_file's written bytes (appended or overwritten) are durable only after sync() returned
//   success (fdatasync semantics). A failed sync() leaves the file in an unknown state: callers must not retry it as if
//   it had worked (fsyncgate).
// - sync_directory() makes creations, renames and removals in that directory durable.
// - Thread: an env may be used from several threads; one file object from one thread at a time.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "store/result.hpp"

namespace percore::store {

class readable_file {
public:
    virtual ~readable_file() = default;
    // Reads up to out.size() bytes at `offset`; fewer only at end of file.
    virtual io_result<std::size_t> read_at(std::uint64_t offset, std::span<char> out) = 0;
    virtual io_result<std::uint64_t> size() = 0;
    virtual int descriptor() const { return -1; }  // -1 when not backed by a real file
};

// The append position (size()) is the end of the file as this object has written it: where append()
// writes, moved by every write that ends past it and set by truncate().
class writable_file {
public:
    virtual ~writable_file() = default;
    // Writes all of `data` at the append position (all or an error).
    virtual io_result<void> append(std::span<const char> data) = 0;
    // Writes all of `data` at `offset` over what is there (pwrite; all or an error). The append
    // position moves only when the write ends past it, to its end; a gap between the old end and
    // `offset` reads as zeros. On an error a prefix of `data` may be written (and counted by size()
    // when it passed the end). The default, for files that cannot overwrite in place, writes only at
    // the append position and fails with ENOTSUP anywhere else.
    virtual io_result<void> write_at(std::uint64_t offset, std::span<const char> data);
    // Writes zeros from the append position up to `size` (nothing when the file is that long), in
    // large writes: real zero blocks, not a hole or fallocate()'s unwritten extents, so that once
    // synced, overwriting them with write_at() leaves fdatasync no size or extent change to journal.
    // The caller syncs. On an error a prefix of the zeros may be written. The default: ENOTSUP.
    virtual io_result<void> zero_fill(std::uint64_t size);
    virtual io_result<void> sync() = 0;                         // fdatasync
    virtual io_result<void> truncate(std::uint64_t size) = 0;   // also moves the append position
    virtual std::uint64_t size() const = 0;                     // append position
};

inline io_result<void> writable_file::write_at(std::uint64_t offset, std::span<const char> data) {
    if (offset != size()) return std::unexpected(ENOTSUP);
    return append(data);
}

inline io_result<void> writable_file::zero_fill(std::uint64_t) { return std::unexpected(ENOTSUP); }

class env {
public:
    virtual ~env() = default;
    virtual io_result<std::unique_ptr<readable_file>> open_readable(const std::string& path) = 0;
    // Opens for appending at the current end, creating the file if missing.
    virtual io_result<std::unique_ptr<writable_file>> open_writable(const std::string& path) = 0;
    virtual io_result<std::vector<std::string>> list(const std::string& directory) = 0;  // names only
    virtual io_result<void> create_directory(const std::string& path) = 0;  // ok if it exists
    virtual io_result<void> remove(const std::string& path) = 0;            // file or empty directory
    virtual io_result<void> rename(const std::string& from, const std::string& to) = 0;  // atomic replace
    virtual io_result<void> sync_directory(const std::string& path) = 0;
    virtual bool exists(const std::string& path) = 0;
};

env& posix_env();

}  // namespace percore::store
