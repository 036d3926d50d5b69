#include "store/backup_restore.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <vector>

#include "store/check.hpp"
#include "store/data_directory.hpp"
#include "store/data_layout.hpp"
#include "store/env.hpp"
#include "store/feed_floor.hpp"
#include "store/tar_format.hpp"

namespace percore::store {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

constexpr std::string_view format_name = "FORMAT";
constexpr std::string_view token_name = "admin.token";
constexpr mode_t file_mode = 0600;
constexpr mode_t token_mode = 0600;
constexpr mode_t directory_mode = 0700;

// What an archive's path names in a data directory.
enum class place : std::uint8_t { format, token, layout, shard, shard_file };

struct placed {
    place what = place::format;
    std::uint64_t generation = 0;
    unsigned shard = 0;
};

bool shard_file_name(std::string_view name) {
    if (name == feed_floor_file_name) return true;
    return name.size() == 20 && name.ends_with(".seg") &&
           name.substr(0, 16).find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// The number `digits` spell as the server names its directories (layout-1, shard-007: no other
// spelling of the same number, so that what is restored is where the server looks).
bool canonical_number(std::string_view digits, std::size_t min_width, std::uint64_t max, std::uint64_t& n) {
    if (digits.empty() || digits.size() > 19 || digits.find_first_not_of("0123456789") != std::string_view::npos)
        return false;
    (void)std::from_chars(digits.data(), digits.data() + digits.size(), n);
    std::string spelled = std::to_string(n);
    if (spelled.size() < min_width) spelled.insert(0, min_width - spelled.size(), '0');
    return spelled == digits && n <= max;
}

// The place of `path` (a safe relative path: tar_format.hpp), or false when a data directory holds
// no such thing.
bool place_of(std::string_view path, tar_type type, placed& p) {
    const bool dir = type == tar_type::directory;
    if (path == format_name || path == token_name) {
        p.what = path == format_name ? place::format : place::token;
        return !dir;
    }
    if (!path.starts_with("layout-")) return false;
    const std::size_t slash = path.find('/');
    std::string_view generation = path.substr(0, slash).substr(7);
    if (!canonical_number(generation, 1, UINT64_MAX, p.generation) || p.generation == 0) return false;
    if (slash == std::string_view::npos) {
        p.what = place::layout;
        return dir;
    }
    std::string_view rest = path.substr(slash + 1);
    const std::size_t next = rest.find('/');
    std::string_view shard = rest.substr(0, next);
    std::uint64_t n = 0;
    if (!shard.starts_with("shard-") || !canonical_number(shard.substr(6), 3, UINT32_MAX, n)) return false;
    p.shard = static_cast<unsigned>(n);
    if (next == std::string_view::npos) {
        p.what = place::shard;
        return dir;
    }
    p.what = place::shard_file;
    return !dir && shard_file_name(rest.substr(next + 1));
}

// Reads exactly out.size() bytes unless the input ends first; the bytes read, or an errno.
io_result<std::size_t> read_full(int fd, std::span<char> out) {
    std::size_t got = 0;
    while (got < out.size()) {
        ssize_t n = ::read(fd, out.data() + got, out.size() - got);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            return std::unexpected(errno);
        }
        got += static_cast<std::size_t>(n);
    }
    return got;
}

io_result<void> write_full(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return std::unexpected(errno);
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return {};
}

io_result<void> sync_path(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return std::unexpected(errno);
    int r = ::fsync(fd);
    int e = errno;
    ::close(fd);
    if (r != 0) return std::unexpected(e);
    return {};
}

// Whether `dir` is missing or holds nothing but a LOCK file; an error line otherwise.
result<void> check_empty(const std::string& dir) {
    struct stat st{};
    if (::stat(dir.c_str(), &st) != 0) {
        if (errno == ENOENT) return {};
        return std::unexpected("cannot use " + dir + ": " + errno_text(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return std::unexpected(dir + " exists and is not a directory: refusing to restore into it");
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
    if (!d) return std::unexpected("cannot list " + dir + ": " + errno_text(errno));
    while (const dirent* e = ::readdir(d.get())) {
        std::string_view n = e->d_name;
        if (n != "." && n != ".." && n != "LOCK")
            return std::unexpected(dir + " is not empty (it holds " + std::string(n) +
                                   "): restore into a new directory");
    }
    return {};
}

// One restore's state: what it has made so far, and the archive it reads.
class restorer {
public:
    restorer(int input, std::string dir) : input_(input), dir_(std::move(dir)), buffer_(restore_copy_bytes) {}

    result<restore_stats> run();

private:
    result<bool> next_entry();
    result<void> place_entry(const tar_header& h, const placed& p);
    result<void> write_file(const tar_header& h, mode_t mode);
    result<void> read_data(std::uint64_t size, std::string& into);
    result<void> skip_padding(std::uint64_t size);
    result<void> make_directory(const std::string& name);
    result<void> write_format(const std::string& format_path);
    std::string mismatch(const data_layout& l) const;
    result<void> finish();
    result<void> read_block(char* block, bool& ended);
    std::string path(const std::string& name) const { return dir_ + "/" + name; }

    int input_;
    std::string dir_;
    std::vector<char> buffer_;
    std::set<std::string> seen_;
    std::vector<std::string> directories_;  // made, in order
    std::set<unsigned> shards_;
    std::uint64_t generation_ = 0;          // 0: no layout directory yet
    std::string format_;
    bool has_format_ = false;
    restore_stats stats_;
};

result<void> restorer::read_block(char* block, bool& ended) {
    auto n = read_full(input_, std::span<char>(block, tar_block_bytes));
    if (!n) return std::unexpected("cannot read the archive: " + errno_text(n.error()));
    ended = *n == 0;
    if (*n != 0 && *n != tar_block_bytes)
        return std::unexpected(std::string("the archive ends inside a block: it is cut short"));
    return {};
}

result<restore_stats> restorer::run() {
    for (;;) {
        auto more = next_entry();
        if (!more) return std::unexpected(more.error());
        if (!*more) break;
    }
    if (auto r = finish(); !r) return std::unexpected(r.error());
    return stats_;
}

// One entry; false after the archive's end.
result<bool> restorer::next_entry() {
    char block[tar_block_bytes];
    bool ended = false;
    if (auto r = read_block(block, ended); !r) return std::unexpected(r.error());
    if (ended) return std::unexpected(std::string("the archive ends without its end blocks: it is cut short"));
    if (is_zero_block(block)) {
        if (auto r = read_block(block, ended); !r) return std::unexpected(r.error());
        if (ended || !is_zero_block(block))
            return std::unexpected(std::string("the archive's end is not two zero blocks: it is cut short or damaged"));
        return false;
    }
    auto h = decode_tar_header(block);
    if (!h) return std::unexpected(h.error());
    placed p;
    if (!place_of(h->name, h->type, p))
        return std::unexpected("entry '" + printable_name(h->name) + "' is not part of a percore data directory");
    if (!seen_.insert(h->name).second)
        return std::unexpected("entry '" + printable_name(h->name) + "' appears twice");
    if (auto r = place_entry(*h, p); !r) return std::unexpected(r.error());
    return true;
}

result<void> restorer::place_entry(const tar_header& h, const placed& p) {
    switch (p.what) {
    case place::format:
        if (h.size > max_restored_format_bytes)
            return std::unexpected(std::string("FORMAT is too large to be a percore FORMAT"));
        has_format_ = true;
        return read_data(h.size, format_);
    case place::token:
        if (h.size > max_restored_token_bytes)
            return std::unexpected(std::string("admin.token is too large to be a token file"));
        return write_file(h, token_mode);
    case place::layout:
        if (generation_ != 0)
            return std::unexpected("entry '" + printable_name(h.name) + "' is a second layout: a backup holds one");
        generation_ = p.generation;
        return make_directory(h.name);
    case place::shard:
        if (p.generation != generation_)
            return std::unexpected("entry '" + printable_name(h.name) + "' comes before its layout directory");
        shards_.insert(p.shard);
        return make_directory(h.name);
    case place::shard_file:
        if (p.generation != generation_ || !shards_.contains(p.shard))
            return std::unexpected("entry '" + printable_name(h.name) + "' comes before its shard directory");
        return write_file(h, file_mode);
    }
    return std::unexpected(std::string("unreachable"));
}

result<void> restorer::make_directory(const std::string& name) {
    if (::mkdir(path(name).c_str(), directory_mode) != 0)
        return std::unexpected("cannot create " + path(name) + ": " + errno_text(errno));
    directories_.push_back(name);
    return {};
}

result<void> restorer::write_file(const tar_header& h, mode_t mode) {
    const std::string p = path(h.name);
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return std::unexpected("cannot create " + p + ": " + errno_text(errno));
    std::uint64_t left = h.size;
    result<void> r;
    while (r && left > 0) {
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, buffer_.size()));
        auto n = read_full(input_, std::span<char>(buffer_.data(), want));
        if (!n) r = std::unexpected("cannot read the archive: " + errno_text(n.error()));
        else if (*n != want)
            r = std::unexpected("the archive ends inside " + printable_name(h.name) + ": it is cut short");
        else if (auto w = write_full(fd, std::string_view(buffer_.data(), want)); !w)
            r = std::unexpected("cannot write " + p + ": " + errno_text(w.error()));
        left -= want;
    }
    if (r && ::fsync(fd) != 0) r = std::unexpected("cannot sync " + p + ": " + errno_text(errno));
    ::close(fd);
    if (!r) return r;
    ++stats_.files;
    stats_.bytes += h.size;
    return skip_padding(h.size);
}

result<void> restorer::read_data(std::uint64_t size, std::string& into) {
    into.resize(static_cast<std::size_t>(size));
    auto n = read_full(input_, std::span<char>(into.data(), into.size()));
    if (!n) return std::unexpected("cannot read the archive: " + errno_text(n.error()));
    if (*n != into.size()) return std::unexpected(std::string("the archive ends inside FORMAT: it is cut short"));
    return skip_padding(size);
}

result<void> restorer::skip_padding(std::uint64_t size) {
    char zeros[tar_block_bytes];
    const std::size_t pad = tar_padding(size);
    auto n = read_full(input_, std::span<char>(zeros, pad));
    if (!n) return std::unexpected("cannot read the archive: " + errno_text(n.error()));
    if (*n != pad) return std::unexpected(std::string("the archive ends inside an entry's padding: it is cut short"));
    return {};
}

result<void> restorer::write_format(const std::string& format_path) {
    int fd = ::open(format_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, file_mode);
    if (fd < 0) return std::unexpected("cannot create " + format_path + ": " + errno_text(errno));
    result<void> r;
    if (auto w = write_full(fd, format_); !w)
        r = std::unexpected("cannot write " + format_path + ": " + errno_text(w.error()));
    else if (::fsync(fd) != 0) r = std::unexpected("cannot sync " + format_path + ": " + errno_text(errno));
    ::close(fd);
    return r;
}

// Why the layout FORMAT names is not the one the archive held; empty when it is.
std::string restorer::mismatch(const data_layout& l) const {
    const bool every_shard = shards_.size() == l.shards && (shards_.empty() || *shards_.rbegin() == l.shards - 1);
    if (l.generation == generation_ && every_shard) return {};
    return "FORMAT names layout " + std::to_string(l.generation) + " with " + std::to_string(l.shards) +
           " shards, the archive holds layout " + std::to_string(generation_) + " with " +
           std::to_string(shards_.size()) + " shard directories";
}

// Directories synced (deepest first), then FORMAT written, read back as the server reads it and
// matched against the archive, then DIR synced; FORMAT is removed again if any of it fails.
result<void> restorer::finish() {
    if (!has_format_) return std::unexpected(std::string("the archive holds no FORMAT: not a percore backup"));
    if (generation_ == 0)
        return std::unexpected(std::string("the archive holds no layout directory: not a percore backup"));
    for (auto it = directories_.rbegin(); it != directories_.rend(); ++it)
        if (auto r = sync_path(path(*it)); !r)
            return std::unexpected("cannot sync " + path(*it) + ": " + errno_text(r.error()));
    const std::string format_path = path(std::string(format_name));
    auto written = write_format(format_path);
    std::string why = written ? std::string() : written.error();
    if (why.empty()) {
        auto layout = read_layout(posix_env(), dir_);
        why = layout ? mismatch(*layout) : layout.error();
        if (why.empty()) {
            ++stats_.files;
            stats_.bytes += format_.size();
            stats_.shards = layout->shards;
            stats_.generation = layout->generation;
            if (auto r = sync_path(dir_); !r) why = "cannot sync " + dir_ + ": " + errno_text(r.error());
        }
    }
    if (why.empty()) return {};
    (void)::unlink(format_path.c_str());  // never a FORMAT over a directory that does not match it
    return std::unexpected(why);
}


// After FORMAT: recovery's own scan over what was written (check.hpp, verify mode), so an archive
// whose records or segment lists are damaged — a flipped byte, a cut inside a segment that the
// tar framing did not see — is refused here, naming the file and the offset, not at serve.
result<void> verify_restored(const std::string& dir) {
    auto report = check_data_directory(posix_env(), dir, false);
    if (!report) return std::unexpected(report.error());
    if (!report->format_damage.empty()) return std::unexpected("the archive's " + report->format_damage.front());
    // A backup holds synced batches only (shard_capture.hpp): a torn tail in one is damage too,
    // which recovery would otherwise cut as a crash's unfinished batch, losing its records.
    for (const shard_check& s : report->shards)
        for (const recovery_finding& f : s.findings)
            if (f.damage() || f.kind == finding_kind::unreadable || f.kind == finding_kind::torn_tail)
                return std::unexpected("the archive's records are damaged: " + f.what);
    return {};
}

// What a failed restore wrote, LOCK included, is removed: DIR is left empty as it was found.
void remove_contents(const std::string& dir) {
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ignored))
        std::filesystem::remove_all(entry.path(), ignored);
    (void)sync_path(dir);
}

// Unpacks and verifies into the locked, empty DIR; on failure DIR is emptied again.
result<restore_stats> restore_locked(int input, const std::string& dir) {
    auto lock = data_directory::open_locked(dir);
    if (!lock) return std::unexpected(lock.error());
    // made (or emptied) by someone else between the check and the lock
    if (auto r = check_empty(dir); !r) return std::unexpected(r.error());
    // the directory, made by open_locked(), is durable in its parent
    const std::size_t slash = dir.find_last_of('/');
    const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
    if (auto r = sync_path(parent); !r) return std::unexpected("cannot sync " + parent + ": " + errno_text(r.error()));
    restorer r(input, dir);
    auto stats = r.run();
    if (stats) {
        if (auto verified = verify_restored(dir); !verified) stats = std::unexpected(verified.error());
    }
    if (!stats) remove_contents(dir);
    return stats;
}

}  // namespace

result<restore_stats> restore_backup(int input, const std::string& where) {
    std::string dir = where;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    struct stat before {};
    const bool existed = ::stat(dir.c_str(), &before) == 0;
    if (auto r = check_empty(dir); !r) return std::unexpected(r.error());
    auto stats = restore_locked(input, dir);
    if (stats) return stats;
    // the lock is released: a DIR this restore made goes too, an empty one given stays empty
    if (!existed) (void)::rmdir(dir.c_str());
    return std::unexpected(stats.error() + "; nothing of it was kept: " + dir +
                           (existed ? " is empty again" : " was not created"));
}

}  // namespace percore::store
