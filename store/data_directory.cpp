#include "store/data_directory.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <string>

namespace percore::store {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

bool make_directories(const std::string& path, int& err) {
    std::string partial;
    std::size_t i = 0;
    while (i <= path.size()) {
        std::size_t slash = path.find('/', i);
        if (slash == std::string::npos) slash = path.size();
        partial = path.substr(0, slash);
        i = slash + 1;
        if (partial.empty()) continue;
        if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
            err = errno;
            return false;
        }
    }
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) {
        err = errno;
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        err = ENOTDIR;
        return false;
    }
    return true;
}

// An flock on an open LOCK file failed: the holder's pid as it wrote it, or "another process".
std::string lock_holder(int fd) {
    char holder[32] = {};
    ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : std::string("another process");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    return who;
}

void write_pid(int fd) {
    std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) == 0) {
        ssize_t w = ::pwrite(fd, pid.data(), pid.size(), 0);
        (void)w;
    }
}

}  // namespace

result<data_directory> data_directory::open_locked(const std::string& path) {
    int err = 0;
    if (!make_directories(path, err))
        return std::unexpected("cannot use data directory " + path + ": " + errno_text(err));
    if (::access(path.c_str(), R_OK | W_OK | X_OK) != 0)
        return std::unexpected("cannot use data directory " + path + ": " + errno_text(errno));
    std::string lock_path = path + "/LOCK";
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return std::unexpected("cannot open " + lock_path + ": " + errno_text(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        std::string who = e == EWOULDBLOCK ? lock_holder(fd) : std::string();
        ::close(fd);
        if (e == EWOULDBLOCK) return std::unexpected("data directory " + path + " is locked by another percore (pid " + who + ")");
        return std::unexpected("cannot lock " + lock_path + ": " + errno_text(e));
    }
    write_pid(fd);
    return data_directory(path, fd);
}

result<data_directory> data_directory::lock_existing(const std::string& path, bool write) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) return std::unexpected("cannot check " + path + ": " + errno_text(errno));
    if (!S_ISDIR(st.st_mode)) return std::unexpected("cannot check " + path + ": not a directory");
    std::string lock_path = path + "/LOCK";
    int fd = ::open(lock_path.c_str(), write ? O_RDWR | O_CREAT | O_CLOEXEC : O_RDONLY | O_CLOEXEC, 0600);
    if (fd < 0 && errno == ENOENT && !write) return data_directory(path, -1);  // no server ever ran here
    if (fd < 0) return std::unexpected("cannot open " + lock_path + ": " + errno_text(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        std::string who = e == EWOULDBLOCK ? lock_holder(fd) : std::string();
        ::close(fd);
        if (e == EWOULDBLOCK) return std::unexpected(path + " is in use by a running server (pid " + who + "): stop it first");
        return std::unexpected("cannot lock " + lock_path + ": " + errno_text(e));
    }
    if (write) write_pid(fd);
    return data_directory(path, fd);
}

std::string wide_mode_warning(const std::string& path) {
    namespace fs = std::filesystem;
    auto wide = [](const std::string& p) -> std::string {
        struct stat st{};
        if (::lstat(p.c_str(), &st) != 0 || (st.st_mode & 077) == 0 || S_ISLNK(st.st_mode)) return {};
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return "warning: " + p + " has mode " + mode + ": other users may read or change the data; chmod -R go= it";
    };
    if (std::string w = wide(path); !w.empty()) return w;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
        if (std::string w = wide(it->path().string()); !w.empty()) return w;
    return {};
}

data_directory::~data_directory() {
    if (lock_fd_ >= 0) ::close(lock_fd_);
}

}  // namespace percore::store
