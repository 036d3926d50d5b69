#include "store/diverged_archive.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <utility>
#include <vector>

#include "shards/runtime/check.hpp"
#include "store/data_layout.hpp"
#include "store/log_format.hpp"
#include "store/shard_log.hpp"
#include "store/tar_format.hpp"

namespace percore::store {

namespace {

constexpr std::uint32_t file_mode = 0600;       // SPEC §6, as restore makes them too
constexpr std::uint32_t directory_mode = 0700;

std::string errno_text(int e) { return std::strerror(e); }

bool write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

bool read_all_at(int fd, char* out, std::size_t size, std::uint64_t offset) {
    while (size > 0) {
        ssize_t n = ::pread(fd, out, size, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        out += n;
        size -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
    return true;
}

bool sync_directory(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}

std::uint64_t fresh_directory_id() {
    std::uint64_t id = 0;
    while (id == 0)
        if (::getrandom(&id, sizeof id, 0) != static_cast<ssize_t>(sizeof id)) id = static_cast<std::uint64_t>(std::time(nullptr)) | 1;
    return id;
}

std::string format_text() {
    char id[40];
    std::snprintf(id, sizeof id, "directory %016llx\n", static_cast<unsigned long long>(fresh_directory_id()));
    return "percore-data " + std::to_string(data_format_version) + "\nlayout 1\nshards 1\n" + id;
}

void append_header(std::string& out, const std::string& name, tar_type type, std::uint64_t size) {
    tar_header h;
    h.name = name;
    h.type = type;
    h.mode = type == tar_type::directory ? directory_mode : file_mode;
    h.size = size;
    h.mtime = static_cast<std::int64_t>(std::time(nullptr));
    char block[tar_block_bytes];
    encode_tar_header(h, block);
    out.append(block, sizeof block);
}

// The segment's first bytes: its header and a segment list naming no older segment.
std::string segment_start() {
    char header[segment_header_bytes];
    encode_segment_header(header, 0, 1);
    std::string out(header, sizeof header);
    encode_record(out, record_kind::segment_list, 1, {}, {}, encode_segment_list({}));
    return out;
}

}  // namespace

std::string diverged_tar_name(std::uint64_t epoch) { return "diverged-" + std::to_string(epoch) + ".tar"; }

std::string diverged_archive::part_path() const {
    return root_ + "/diverged-" + std::to_string(epoch_) + ".part";
}

result<diverged_archive> diverged_archive::open(const std::string& root, std::uint64_t epoch) {
    PERCORE_REQUIRES(epoch != 0);
    diverged_archive a(root, epoch, -1);
    const std::string path = a.part_path();
    a.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, file_mode);
    if (a.fd_ < 0) return std::unexpected("cannot open " + path + ": " + errno_text(errno));
    if (auto r = a.scan(); !r) return std::unexpected(r.error());
    return a;
}

diverged_archive::diverged_archive(diverged_archive&& o) noexcept
    : root_(std::move(o.root_)), epoch_(o.epoch_), fd_(std::exchange(o.fd_, -1)), part_bytes_(o.part_bytes_),
      keys_(std::move(o.keys_)) {}

diverged_archive::~diverged_archive() {
    if (fd_ >= 0) ::close(fd_);
}

// Reads back what an earlier run captured (its keys), and cuts a torn last record.
result<void> diverged_archive::scan() {
    const off_t end = ::lseek(fd_, 0, SEEK_END);
    if (end < 0) return std::unexpected("cannot read " + part_path() + ": " + errno_text(errno));
    std::uint64_t at = 0;
    std::string record;
    while (at + record_header_bytes <= static_cast<std::uint64_t>(end)) {
        char head[record_header_bytes];
        if (!read_all_at(fd_, head, sizeof head, at)) break;
        std::uint32_t body = 0;
        std::memcpy(&body, head + 4, sizeof body);  // little-endian hosts only, as the log (log_format.hpp)
        const std::uint64_t size = std::uint64_t{body} + 8;
        if (size > max_record_bytes || at + size > static_cast<std::uint64_t>(end)) break;
        record.resize(static_cast<std::size_t>(size));
        if (!read_all_at(fd_, record.data(), record.size(), at)) break;
        record_view v;
        std::size_t used = 0;
        if (decode_record(record, v, used) != decode_status::ok || !v.holds_document()) break;
        keys_.emplace(v.key);
        at += used;
    }
    if (at != static_cast<std::uint64_t>(end) && ::ftruncate(fd_, static_cast<off_t>(at)) != 0)
        return std::unexpected("cannot cut the torn tail of " + part_path() + ": " + errno_text(errno));
    if (::lseek(fd_, static_cast<off_t>(at), SEEK_SET) < 0) return std::unexpected("cannot seek " + part_path());
    part_bytes_ = at;
    return {};
}

result<void> diverged_archive::add(std::string_view key, std::string_view content_type, std::string_view value,
                                   std::uint64_t etag_version) {
    PERCORE_REQUIRES(!holds(key) && etag_version != 0 && etag_version < version_limit);
    std::string record;
    encode_document_record(record, keys_.size() + 1, etag_version, key, content_type, value);
    if (!write_all(fd_, record)) {
        (void)::ftruncate(fd_, static_cast<off_t>(part_bytes_));  // no partial record stays behind
        (void)::lseek(fd_, static_cast<off_t>(part_bytes_), SEEK_SET);
        return std::unexpected("cannot write " + part_path() + ": " + errno_text(errno));
    }
    part_bytes_ += record.size();
    keys_.emplace(key);
    return {};
}

result<void> diverged_archive::sync() {
    if (::fdatasync(fd_) != 0) return std::unexpected("cannot sync " + part_path() + ": " + errno_text(errno));
    return {};
}

// The tar of the drawing above, into `tmp`, synced.
result<void> diverged_archive::write_tar(const std::string& tmp) {
    int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, file_mode);
    if (out < 0) return std::unexpected("cannot create " + tmp + ": " + errno_text(errno));
    const std::string format = format_text();
    const std::string start = segment_start();
    const std::string segment = "layout-1/shard-000/" + segment_file_name(1);
    const std::uint64_t segment_size = start.size() + part_bytes_;
    std::string head;
    append_header(head, "FORMAT", tar_type::file, format.size());
    head.append(format);
    head.append(tar_padding(format.size()), '\0');
    append_header(head, "layout-1", tar_type::directory, 0);
    append_header(head, "layout-1/shard-000", tar_type::directory, 0);
    append_header(head, segment, tar_type::file, segment_size);
    head.append(start);
    bool ok = write_all(out, head);
    std::vector<char> buffer(diverged_copy_bytes);
    for (std::uint64_t at = 0; ok && at < part_bytes_;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), part_bytes_ - at));
        ok = read_all_at(fd_, buffer.data(), n, at) && write_all(out, std::string_view(buffer.data(), n));
        at += n;
    }
    const std::string tail(tar_padding(segment_size) + tar_end_blocks * tar_block_bytes, '\0');
    ok = ok && write_all(out, tail) && ::fsync(out) == 0;
    const int failure = errno;
    ::close(out);
    if (!ok) return std::unexpected("cannot write " + tmp + ": " + errno_text(failure));
    return {};
}

result<std::string> diverged_archive::finish() {
    const std::string part = part_path();
    if (keys_.empty()) {
        if (::unlink(part.c_str()) != 0 && errno != ENOENT) return std::unexpected("cannot remove " + part + ": " + errno_text(errno));
        (void)sync_directory(root_);
        return std::string();
    }
    // A tar of this epoch already there (a crash between the rename and clearing the led-epoch
    // record, then another capture) is kept: the new one takes the next free name.
    std::string tar = root_ + "/" + diverged_tar_name(epoch_);
    for (unsigned n = 2; ::access(tar.c_str(), F_OK) == 0; ++n)
        tar = root_ + "/diverged-" + std::to_string(epoch_) + "-" + std::to_string(n) + ".tar";
    const std::string tmp = tar + ".tmp";
    if (auto r = write_tar(tmp); !r) return std::unexpected(r.error());
    if (::rename(tmp.c_str(), tar.c_str()) != 0) return std::unexpected("cannot rename " + tmp + ": " + errno_text(errno));
    if (!sync_directory(root_)) return std::unexpected("cannot sync " + root_ + ": " + errno_text(errno));
    if (::unlink(part.c_str()) != 0) return std::unexpected("cannot remove " + part + ": " + errno_text(errno));
    (void)sync_directory(root_);  // a .part left by a crash here is captured again: harmless
    return tar;
}

}  // namespace percore::store
