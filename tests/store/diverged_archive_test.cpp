// diverged_archive (store/diverged_archive.hpp): the tar a returning primary writes of what it held
// that its new primary does not — `percore restore` accepts it (restore_backup runs on it here)
// and a server's recovery reads the documents back with their ETag versions.
#include <doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "store/backup_restore.hpp"
#include "store/data_layout.hpp"
#include "store/diverged_archive.hpp"
#include "store/env.hpp"
#include "tests/store/durability_util.hpp"
#include "tests/temp_dir.hpp"

using namespace percore::store;
using namespace percore::store::test;
using percore::test::temp_dir;

namespace {

// Restores `tar` into `into` with the code `percore restore` runs.
void restore(const std::string& tar, const std::string& into) {
    int fd = ::open(tar.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    auto r = restore_backup(fd, into);
    ::close(fd);
    REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error()));
    CHECK(r->shards == 1);
}

}  // namespace

TEST_CASE("a diverged tar restores into a data directory whose documents keep their ETag versions") {
    temp_dir data;
    temp_dir restored;
    auto a = diverged_archive::open(data.path(), 42);
    REQUIRE(a.has_value());
    REQUIRE(a->add(std::string("app\0k1", 6), "text/plain", "one", 1'000'007).has_value());
    REQUIRE(a->add(std::string("app\0k2", 6), "application/json", std::string(300'000, 'v'), 5).has_value());
    REQUIRE(a->add(std::string("_percore\0app/app", 16), "application/json", "{}", 9).has_value());
    REQUIRE(a->sync().has_value());
    auto tar = a->finish();
    REQUIRE(tar.has_value());
    CHECK(*tar == data / "diverged-42.tar");
    CHECK_FALSE(std::filesystem::exists(data / "diverged-42.part"));
    restore(*tar, restored / "dir");
    auto layout = read_layout(posix_env(), restored / "dir");
    REQUIRE(layout.has_value());
    auto s = open_store(posix_env(), layout->shard_directory(0));
    REQUIRE(s->error.empty());
    const snapshot& snap = *(*s)->current();
    const document* k1 = snap.find(std::string("app\0k1", 6));
    const document* k2 = snap.find(std::string("app\0k2", 6));
    REQUIRE(k1 != nullptr);
    REQUIRE(k2 != nullptr);
    CHECK(k1->etag_version() == 1'000'007);
    CHECK(k2->etag_version() == 5);
    CHECK(value_bytes_of(snap, *k1) == "one");
    CHECK(value_bytes_of(snap, *k2) == std::string(300'000, 'v'));
    CHECK(k2->content_type() == "application/json");
    CHECK(snap.find(std::string("_percore\0app/app", 16)) != nullptr);
}

TEST_CASE("a capture with nothing in it writes no tar and leaves no part file") {
    temp_dir data;
    auto a = diverged_archive::open(data.path(), 7);
    REQUIRE(a.has_value());
    auto tar = a->finish();
    REQUIRE(tar.has_value());
    CHECK(tar->empty());
    CHECK_FALSE(std::filesystem::exists(data / "diverged-7.part"));
    CHECK_FALSE(std::filesystem::exists(data / "diverged-7.tar"));
}

TEST_CASE("a capture reopened after a crash keeps what it held and cuts a torn last record") {
    temp_dir data;
    {
        auto a = diverged_archive::open(data.path(), 3);
        REQUIRE(a.has_value());
        REQUIRE(a->add(std::string("app\0a", 5), "text/plain", "kept", 11).has_value());
        REQUIRE(a->sync().has_value());
    }
    {
        std::ofstream torn(data / "diverged-3.part", std::ios::app | std::ios::binary);
        torn << std::string(20, 'x');  // a record cut short by the crash
    }
    auto again = diverged_archive::open(data.path(), 3);
    REQUIRE(again.has_value());
    CHECK(again->holds(std::string("app\0a", 5)));
    CHECK(again->documents() == 1);
    REQUIRE(again->add(std::string("app\0b", 5), "text/plain", "new", 12).has_value());
    auto tar = again->finish();
    REQUIRE(tar.has_value());
    temp_dir restored;
    restore(*tar, restored / "dir");
    auto layout = read_layout(posix_env(), restored / "dir");
    REQUIRE(layout.has_value());
    auto s = open_store(posix_env(), layout->shard_directory(0));
    REQUIRE(s->error.empty());
    CHECK(current_value(**s, std::string("app\0a", 5)) == "kept");
    CHECK(current_value(**s, std::string("app\0b", 5)) == "new");
}

TEST_CASE("a second tar of the same epoch takes a new name instead of replacing the first") {
    temp_dir data;
    for (int round = 0; round < 2; ++round) {
        auto a = diverged_archive::open(data.path(), 5);
        REQUIRE(a.has_value());
        REQUIRE(a->add(std::string("app\0k", 5), "text/plain", "v" + std::to_string(round), 10).has_value());
        REQUIRE(a->finish().has_value());
    }
    CHECK(std::filesystem::exists(data / "diverged-5.tar"));
    CHECK(std::filesystem::exists(data / "diverged-5-2.tar"));
}
