// data_directory: the --data directory — created if missing, and locked (flock on DATA/LOCK) for as
// long as the returned object lives, so two servers never share one store.
//
// Errors are values (result<T>, result.hpp) with one clear line for the operator; the caller exits 1 (SPEC §1): another
// process holding the lock, or a directory that cannot be created, read or written.
// lock_existing() is the lock of `percore check` (SPEC §11): the same flock, on a directory that
// must exist, creating nothing there unless it may write (--repair). Without write, LOCK is opened
// read-only (a copy on read-only media can be checked), and a directory without LOCK, where no
// server ever ran, is checked without a lock.
// Modes (SPEC §6): directories it makes are 0700 and LOCK 0600, whatever the umask.
// wide_mode_warning() is the one warning line of `serve` for a data directory, or a file or
// directory in it, that group or others may access (the first one found, with its mode); empty
// when none is. It warns only: the operator fixes the modes.
// Thread: main thread, at start and at exit.
#pragma once

#include <expected>
#include <string>

#include "store/result.hpp"

namespace percore::store {

std::string wide_mode_warning(const std::string& path);

class data_directory {
public:
    static result<data_directory> open_locked(const std::string& path);
    static result<data_directory> lock_existing(const std::string& path, bool write);

    data_directory(data_directory&& other) noexcept : path_(std::move(other.path_)), lock_fd_(other.lock_fd_) {
        other.lock_fd_ = -1;
    }
    data_directory& operator=(data_directory&&) = delete;
    ~data_directory();

    const std::string& path() const { return path_; }

private:
    data_directory(std::string path, int fd) : path_(std::move(path)), lock_fd_(fd) {}
    std::string path_;
    int lock_fd_ = -1;
};

}  // namespace percore::store
