#include "shards/apps/admin_token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shards/apps/access.hpp"
#include "shards/apps/catalog.hpp"

namespace percore::shards {

namespace {

std::string why(std::string_view option, const std::string& path, const char* what) {
    return std::string(option) + " " + path + ": " + what + ": " + std::strerror(errno);
}

result<std::string> create(const std::string& path,
                                               const std::function<void(const std::string&)>& log) {
    std::string token = make_admin_token();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return std::unexpected(why("--admin-token-file", path, "cannot create"));
    std::string line = token + "\n";
    bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
    int saved = errno;
    ::close(fd);
    if (!ok) {
        errno = saved;
        ::unlink(path.c_str());
        return std::unexpected(why("--admin-token-file", path, "cannot write"));
    }
    // the file's name durable too: after a power cut on the first start, the token copied off
    // the board (to a client, to a follower's operator) is still the board's (review L4)
    const std::string folder = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
    if (int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
        const bool synced = ::fsync(dir) == 0;
        ::close(dir);
        if (!synced) return std::unexpected(why("--admin-token-file", path, "cannot sync its directory"));
    }
    log("wrote a new admin token to " + path + " (mode 0600)");
    return token;
}

}  // namespace

result<std::string> load_or_create_admin_token(const std::string& path,
                                                                   const std::function<void(const std::string&)>& log) {
    if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return create(path, log);
    return read_token_file(path, "--admin-token-file", log);
}

result<std::string> read_token_file(const std::string& path, std::string_view option,
                                                        const std::function<void(const std::string&)>& log) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::unexpected(why(option, path, "cannot open"));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return std::unexpected(std::string(option) + " " + path + ": not a regular file");
    }
    // Owned by someone else (not us, not root), the file may hold a token that someone planted
    // (a world-writable folder): refused, as OpenSSH's StrictModes refuses such keys (review L4).
    if (st.st_uid != ::geteuid() && st.st_uid != 0) {
        ::close(fd);
        return std::unexpected(std::string(option) + " " + path + ": owned by uid " + std::to_string(st.st_uid) +
                               ", neither this process's user nor root; chown it");
    }
    if (st.st_mode & 077)
        log("warning: " + std::string(option) + " " + path + " may be read by others; chmod 600 it");
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf);
    int saved = errno;
    ::close(fd);
    if (n < 0) {
        errno = saved;
        return std::unexpected(why(option, path, "cannot read"));
    }
    std::string_view text(buf, static_cast<std::size_t>(n));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
        text.remove_suffix(1);
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    std::string line = "Bearer " + std::string(text);
    if (text.size() < min_admin_token_bytes || bearer_token(line) != text)
        return std::unexpected(std::string(option) + " " + path + ": holds no usable token (one line of at least " +
                               std::to_string(min_admin_token_bytes) + " characters of A-Z a-z 0-9 - . _ ~ + / =)");
    return std::string(text);
}

}  // namespace percore::shards
