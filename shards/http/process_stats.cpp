#include "shards/http/process_stats.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <string_view>

namespace percore::shards {

namespace {

// A /proc file read whole into buf (NUL-terminated); its length, or 0 where it cannot be read.
std::size_t read_proc_file(const char* path, char* buf, std::size_t size) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    std::size_t len = 0;
    while (len + 1 < size) {
        ssize_t n = ::read(fd, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += static_cast<std::size_t>(n);
    }
    ::close(fd);
    buf[len] = '\0';
    return len;
}

// The unsigned number at p (spaces skipped first); p is left past it.
std::uint64_t parse_uint(const char*& p, const char* end) {
    while (p < end && *p == ' ') ++p;
    std::uint64_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    p = next;
    return ec == std::errc{} ? v : 0;
}

}  // namespace

// /proc/self/stat (proc(5)): the command name in parentheses may hold spaces and parentheses, so
// fields are counted from the last ')'; the field after it is the 3rd (state).
process_stat read_process_stat() {
    process_stat st;
    char buf[1024];
    std::size_t len = read_proc_file("/proc/self/stat", buf, sizeof buf);
    const char* end = buf + len;
    const char* p = end;
    while (p > buf && p[-1] != ')') --p;
    if (p == buf) return st;
    // p is past ')': " S ppid ..." — skip the state, then fields 4 to 24
    while (p < end && *p == ' ') ++p;
    if (p < end) ++p;
    std::uint64_t field[25] = {};
    for (int i = 4; i <= 24 && p < end; ++i) {
        while (p < end && *p == ' ') ++p;
        if (p < end && *p == '-') {  // signed fields (priority, nice, cutime...): not used
            ++p;
        }
        field[i] = parse_uint(p, end);
        while (p < end && *p != ' ') ++p;
    }
    st.cpu_ticks = field[14] + field[15];
    st.start_ticks = field[22];
    st.vsize = field[23];
    st.rss_pages = field[24];
    return st;
}

std::uint64_t boot_time_seconds() {
    static const std::uint64_t btime = [] {
        static char buf[16384];  // /proc/stat grows with the CPU count; btime follows the cpu lines
        std::size_t len = read_proc_file("/proc/stat", buf, sizeof buf);
        std::string_view text(buf, len);
        std::size_t at = text.find("\nbtime ");
        if (at == std::string_view::npos) return std::uint64_t{0};
        const char* p = buf + at + 7;
        return parse_uint(p, buf + len);
    }();
    return btime;
}

std::uint64_t open_fds() {
    DIR* dir = ::opendir("/proc/self/fd");
    if (!dir) return 0;
    std::uint64_t n = 0;
    while (const dirent* e = ::readdir(dir))
        if (e->d_name[0] != '.') ++n;
    ::closedir(dir);
    return n ? n - 1 : 0;
}

std::uint64_t max_open_fds() {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
    return lim.rlim_cur == RLIM_INFINITY ? ~std::uint64_t{0} : lim.rlim_cur;
}

std::uint64_t clock_ticks_per_second() {
    return static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK) > 0 ? ::sysconf(_SC_CLK_TCK) : 100);
}

std::uint64_t page_bytes() {
    return static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096);
}

}  // namespace percore::shards
