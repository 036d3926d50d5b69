#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <vector>

#include "store/env.hpp"

namespace percore::store {

namespace {

constexpr std::size_t zero_fill_chunk = std::size_t{1} << 20;

std::unexpected<int> last_error() { return std::unexpected(errno); }

int open_retrying(const char* path, int flags, mode_t mode = 0) {
    int fd;
    do fd = ::open(path, flags | O_CLOEXEC, mode);
    while (fd < 0 && errno == EINTR);
    return fd;
}

class posix_readable final : public readable_file {
public:
    explicit posix_readable(int fd) : fd_(fd) {}
    ~posix_readable() override { ::close(fd_); }
    posix_readable(const posix_readable&) = delete;
    posix_readable& operator=(const posix_readable&) = delete;

    io_result<std::size_t> read_at(std::uint64_t offset, std::span<char> out) override {
        std::size_t done = 0;
        while (done < out.size()) {
            ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
            if (n < 0) {
                if (errno == EINTR) continue;
                return last_error();
            }
            if (n == 0) break;
            done += static_cast<std::size_t>(n);
        }
        return done;
    }

    io_result<std::uint64_t> size() override {
        struct stat st{};
        if (::fstat(fd_, &st) != 0) return last_error();
        return static_cast<std::uint64_t>(st.st_size);
    }

    int descriptor() const override { return fd_; }

private:
    int fd_;
};

class posix_writable final : public writable_file {
public:
    posix_writable(int fd, std::uint64_t position) : fd_(fd), position_(position) {}
    ~posix_writable() override { ::close(fd_); }
    posix_writable(const posix_writable&) = delete;
    posix_writable& operator=(const posix_writable&) = delete;

    // A failure part way leaves the bytes written so far in the file, counted by size().
    io_result<void> append(std::span<const char> data) override { return write_at(position_, data); }

    io_result<void> write_at(std::uint64_t offset, std::span<const char> data) override {
        std::size_t done = 0;
        while (done < data.size()) {
            ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
            if (n < 0) {
                if (errno == EINTR) continue;
                return last_error();
            }
            if (n == 0) return std::unexpected(EIO);
            done += static_cast<std::size_t>(n);
            position_ = std::max(position_, offset + done);
        }
        return {};
    }

    io_result<void> zero_fill(std::uint64_t size) override {
        static const std::vector<char> zeros(zero_fill_chunk, '\0');
        while (position_ < size) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(zeros.size(), size - position_));
            if (auto r = write_at(position_, std::span<const char>(zeros.data(), n)); !r) return r;
        }
        return {};
    }

    io_result<void> sync() override {
        if (::fdatasync(fd_) != 0) return last_error();
        return {};
    }

    io_result<void> truncate(std::uint64_t size) override {
        int rc;
        do rc = ::ftruncate(fd_, static_cast<off_t>(size));
        while (rc != 0 && errno == EINTR);
        if (rc != 0) return last_error();
        position_ = size;
        return {};
    }

    std::uint64_t size() const override { return position_; }

private:
    int fd_;
    std::uint64_t position_;
};

class posix_env_impl final : public env {
public:
    io_result<std::unique_ptr<readable_file>> open_readable(const std::string& path) override {
        // O_NOFOLLOW: a data directory holds no links; one planted there (by a user who can write
        // the directory) must not lead `percore check --repair`, run as root, to another file
        // (security review L6): it fails with ELOOP instead
        int fd = open_retrying(path.c_str(), O_RDONLY | O_NOFOLLOW);
        if (fd < 0) return last_error();
        return std::make_unique<posix_readable>(fd);
    }

    io_result<std::unique_ptr<writable_file>> open_writable(const std::string& path) override {
        int fd = open_retrying(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW, 0600);
        if (fd < 0) return last_error();
        off_t end = ::lseek(fd, 0, SEEK_END);
        if (end < 0) {
            int e = errno;
            ::close(fd);
            return std::unexpected(e);
        }
        return std::make_unique<posix_writable>(fd, static_cast<std::uint64_t>(end));
    }

    io_result<std::vector<std::string>> list(const std::string& directory) override {
        DIR* dir = ::opendir(directory.c_str());
        if (dir == nullptr) return last_error();
        std::vector<std::string> names;
        for (;;) {
            errno = 0;
            const dirent* entry = ::readdir(dir);
            if (entry == nullptr) break;
            std::string_view name = entry->d_name;
            if (name == "." || name == "..") continue;
            names.emplace_back(name);
        }
        int e = errno;
        ::closedir(dir);
        if (e != 0) return std::unexpected(e);
        return names;
    }

    io_result<void> create_directory(const std::string& path) override {
        if (::mkdir(path.c_str(), 0700) == 0) return {};
        if (errno != EEXIST) return last_error();
        struct stat st{};
        if (::stat(path.c_str(), &st) != 0) return last_error();
        if (!S_ISDIR(st.st_mode)) return std::unexpected(ENOTDIR);
        return {};
    }

    io_result<void> remove(const std::string& path) override {
        if (::unlink(path.c_str()) == 0) return {};
        int e = errno;
        if (e != EISDIR && e != EPERM) return std::unexpected(e);
        if (::rmdir(path.c_str()) == 0) return {};
        return errno == ENOTDIR ? std::unexpected(e) : last_error();
    }

    io_result<void> rename(const std::string& from, const std::string& to) override {
        if (::rename(from.c_str(), to.c_str()) != 0) return last_error();
        return {};
    }

    io_result<void> sync_directory(const std::string& path) override {
        int fd = open_retrying(path.c_str(), O_RDONLY | O_DIRECTORY);
        if (fd < 0) return last_error();
        int rc = ::fsync(fd);
        int e = errno;
        ::close(fd);
        if (rc != 0) return std::unexpected(e);
        return {};
    }

    bool exists(const std::string& path) override {
        struct stat st{};
        return ::stat(path.c_str(), &st) == 0;
    }
};

}  // namespace

env& posix_env() {
    static posix_env_impl instance;
    return instance;
}

}  // namespace percore::store
