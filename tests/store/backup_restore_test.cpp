// percore restore (store/backup_restore.hpp): what it writes from a backup's archive, and what it
// refuses. Archives are built here with the header writer (tar_format.hpp), as GET /_backup builds
// them, and restored from a file into a temporary directory.
#include <doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "store/backup_restore.hpp"
#include "store/env.hpp"
#include "store/feed_floor.hpp"
#include "store/log_format.hpp"
#include "store/tar_format.hpp"
#include "tests/temp_dir.hpp"
#include "tests/store/tar_test_util.hpp"

using namespace percore::store;
using namespace percore::store::test;
using percore::test::temp_dir;

namespace {

const std::string format_text = "percore-data 1\nlayout 1\nshards 2\ndirectory 00000000000000ab\n";

struct archive {
    std::string bytes;

    archive& file(const std::string& name, const std::string& data, std::uint32_t mode = 0644) {
        char h[tar_block_bytes];
        encode_tar_header(tar_header{name, tar_type::file, mode, data.size(), 0}, h);
        bytes.append(h, sizeof h);
        bytes.append(data);
        bytes.append(tar_padding(data.size()), '\0');
        return *this;
    }
    archive& dir(const std::string& name) {
        char h[tar_block_bytes];
        encode_tar_header(tar_header{name, tar_type::directory, 0755, 0, 0}, h);
        bytes.append(h, sizeof h);
        return *this;
    }
    archive& end() {
        bytes.append(tar_end_blocks * tar_block_bytes, '\0');
        return *this;
    }
};

// A segment as the log writes one: its header, its segment list, then one put (recovery's scan
// reads every record of what a restore wrote: store/backup_restore.hpp).
std::string segment(std::uint32_t shard, std::uint64_t id, std::string_view value) {
    char header[segment_header_bytes];
    encode_segment_header(header, shard, id);
    std::string out(header, sizeof header);
    const std::uint64_t listed[] = {id};
    encode_record(out, record_kind::segment_list, 0, {}, {}, encode_segment_list(listed));
    encode_record(out, record_kind::put, id * 10, std::string("app") + '\0' + "k", "text/plain", value);
    return out;
}

// A feed floor file as the store writes it (feed_floor.hpp), made once (inside a test case).
const std::string& floor_file() {
    static const std::string bytes = [] {
        temp_dir tmp;
        REQUIRE(write_feed_floor(posix_env(), tmp.path(), 7));
        std::ifstream in(tmp.path() + "/" + feed_floor_file_name, std::ios::binary);
        std::ostringstream s;
        s << in.rdbuf();
        return s.str();
    }();
    return bytes;
}

const std::string& seg1() {
    static const std::string bytes = segment(0, 1, std::string(900, 's'));
    return bytes;
}
const std::string& seg2() {
    static const std::string bytes = segment(1, 2, std::string(400, 't'));
    return bytes;
}

// What a two-shard backup holds.
archive two_shards() {
    archive a;
    a.file("FORMAT", format_text)
        .file("admin.token", "a-token\n", 0600)
        .dir("layout-1")
        .dir("layout-1/shard-000")
        .file("layout-1/shard-000/0000000000000001.seg", seg1())
        .file("layout-1/shard-000/feed_floor", floor_file())
        .dir("layout-1/shard-001")
        .file("layout-1/shard-001/0000000000000002.seg", seg2());
    return a;
}


// Restores `a` (from a file, as `percore restore TAR DIR` does) into `dir`.
result<restore_stats> restore(const archive& a, const std::string& dir, const temp_dir& tmp) {
    const std::string tar = tmp.path() + "/backup.tar";
    std::ofstream(tar, std::ios::binary).write(a.bytes.data(), static_cast<std::streamsize>(a.bytes.size()));
    int fd = ::open(tar.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    auto r = restore_backup(fd, dir);
    ::close(fd);
    return r;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

unsigned mode_of(const std::string& path) {
    struct stat st{};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

}  // namespace

TEST_CASE("a backup is restored file for file into a new directory, FORMAT and all") {
    temp_dir tmp;
    const std::string dir = tmp.path() + "/data";
    auto r = restore(archive(two_shards()).end(), dir, tmp);
    REQUIRE_MESSAGE(r, r.error());
    CHECK(r->shards == 2);
    CHECK(r->generation == 1);
    CHECK(r->files == 5);
    CHECK(r->bytes == format_text.size() + 8 + seg1().size() + floor_file().size() + seg2().size());
    CHECK(read_file(dir + "/FORMAT") == format_text);
    CHECK(read_file(dir + "/layout-1/shard-000/0000000000000001.seg") == seg1());
    CHECK(read_file(dir + "/layout-1/shard-000/feed_floor") == floor_file());
    CHECK(read_file(dir + "/layout-1/shard-001/0000000000000002.seg") == seg2());
    CHECK(read_file(dir + "/admin.token") == "a-token\n");
}

TEST_CASE("a restore is private: files 0600 and directories 0700 whatever the archive and the umask say") {
    temp_dir tmp;
    const std::string dir = tmp.path() + "/data";
    mode_t old = ::umask(022);
    archive a = two_shards();
    a.file("layout-1/shard-001/feed_floor", floor_file(), 0777).end();
    bool restored = restore(a, dir, tmp).has_value();
    ::umask(old);
    REQUIRE(restored);
    CHECK(mode_of(dir) == 0700);
    CHECK(mode_of(dir + "/admin.token") == 0600);
    CHECK(mode_of(dir + "/FORMAT") == 0600);
    CHECK(mode_of(dir + "/layout-1/shard-001/feed_floor") == 0600);
    CHECK(mode_of(dir + "/layout-1/shard-001/0000000000000002.seg") == 0600);
    CHECK(mode_of(dir + "/layout-1/shard-000") == 0700);
}

TEST_CASE("an empty directory is restored into; a directory that holds something is refused untouched") {
    temp_dir tmp;
    const std::string dir = tmp.path() + "/data";
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
    REQUIRE(restore(archive(two_shards()).end(), dir, tmp));

    const std::string other = tmp.path() + "/other";
    REQUIRE(::mkdir(other.c_str(), 0755) == 0);
    std::ofstream(other + "/keep.txt") << "mine";
    auto r = restore(archive(two_shards()).end(), other, tmp);
    REQUIRE(!r);
    CHECK(r.error().find("is not empty") != std::string::npos);
    CHECK(read_file(other + "/keep.txt") == "mine");
    CHECK(!exists(other + "/FORMAT"));
    CHECK(!exists(other + "/LOCK"));
}

TEST_CASE("an archive cut short is refused and leaves no FORMAT") {
    temp_dir tmp;
    archive whole = two_shards().end();
    for (std::size_t keep : {std::size_t{700}, whole.bytes.size() - 2 * tar_block_bytes, whole.bytes.size() - 100}) {
        CAPTURE(keep);
        const std::string dir = tmp.path() + "/cut-" + std::to_string(keep);
        archive cut{whole.bytes.substr(0, keep)};
        auto r = restore(cut, dir, tmp);
        REQUIRE(!r);
        CHECK(r.error().find("cut short") != std::string::npos);
        CHECK(!exists(dir + "/FORMAT"));
    }
}

TEST_CASE("a path with .. is refused before anything is written outside the directory") {
    temp_dir tmp;
    const std::string dir = tmp.path() + "/data";
    archive a;
    a.file("FORMAT", format_text);
    const std::string block = header_named("../x", 4);
    a.bytes += block + std::string("evil") + std::string(tar_padding(4), '\0');
    a.end();
    auto r = restore(a, dir, tmp);
    REQUIRE(!r);
    CHECK(r.error().find("not a relative path") != std::string::npos);
    CHECK(!exists(tmp.path() + "/x"));
}

TEST_CASE("an entry that is no part of a data directory is refused") {
    temp_dir tmp;
    for (const char* name : {"layout-1/shard-000/run.sh", "etc/passwd", "LOCK", "layout-01/shard-000/feed_floor",
                             "layout-1/shard-0/feed_floor"}) {
        CAPTURE(name);
        const std::string dir = tmp.path() + "/data-" + std::to_string(std::hash<std::string>{}(name));
        archive a;
        a.file("FORMAT", format_text).dir("layout-1").dir("layout-1/shard-000").file(name, "x").end();
        auto r = restore(a, dir, tmp);
        REQUIRE(!r);
        CHECK(r.error().find("not part of a percore data directory") != std::string::npos);
    }
}

TEST_CASE("shard directories that do not match FORMAT are refused and FORMAT is not left behind") {
    temp_dir tmp;
    const std::string dir = tmp.path() + "/data";
    archive a;  // FORMAT says 2 shards, the archive holds one
    a.file("FORMAT", format_text).dir("layout-1").dir("layout-1/shard-000").end();
    auto r = restore(a, dir, tmp);
    REQUIRE(!r);
    CHECK(r.error().find("FORMAT names layout 1 with 2 shards") != std::string::npos);
    CHECK(!exists(dir + "/FORMAT"));
}

TEST_CASE("an archive without FORMAT is not a percore backup") {
    temp_dir tmp;
    archive a;
    a.dir("layout-1").dir("layout-1/shard-000").end();
    auto r = restore(a, tmp.path() + "/data", tmp);
    REQUIRE(!r);
    CHECK(r.error().find("no FORMAT") != std::string::npos);
}

TEST_CASE("an archive with a damaged record is refused with the file and offset, and nothing of it is kept") {
    temp_dir tmp;
    std::string damaged = seg1();
    damaged[segment_header_bytes + 60] ^= 0x01;   // inside the segment list record: its checksum fails
    archive a;
    a.file("FORMAT", format_text)
        .dir("layout-1")
        .dir("layout-1/shard-000")
        .file("layout-1/shard-000/0000000000000001.seg", damaged)
        .dir("layout-1/shard-001")
        .file("layout-1/shard-001/0000000000000002.seg", seg2())
        .end();
    const std::string dir = tmp.path() + "/data";
    auto r = restore(a, dir, tmp);
    REQUIRE(!r);
    CHECK(r.error().find("0000000000000001.seg") != std::string::npos);
    CHECK(r.error().find("at byte") != std::string::npos);
    CHECK(!exists(dir));

    const std::string empty = tmp.path() + "/empty";
    REQUIRE(std::filesystem::create_directory(empty));
    REQUIRE(!restore(a, empty, tmp));
    CHECK(std::filesystem::is_empty(empty));
}
