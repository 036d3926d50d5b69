// A backup's capture of a shard (store/shard_capture.hpp): its files, copied into a new directory,
// recover to every write the store had settled when it was captured — while writes and compaction
// go on.
#include <doctest.h>

#include <cstdio>
#include <map>
#include <string>

#include "store/feed_floor.hpp"
#include "store/shard_capture.hpp"
#include "store/shard_store.hpp"
#include "store_test_util.hpp"
#include "tests/store/durability_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

const std::string dir = "/data/shard-000";

void make_dirs(env& e, const std::string& root, const std::string& shard) {
    REQUIRE(e.create_directory(root));
    REQUIRE(e.create_directory(shard));
    REQUIRE(e.sync_directory(root));
}

std::string key_name(int i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "k%03d", i);
    return std::string("app\0", 4) + buf;
}

std::string value_for(int key, int round) { return std::string(900, static_cast<char>('a' + (key + round) % 26)); }

// Copies what `c` captured into `to` as a backup's restore would: [0, length) of each file.
void copy_capture(fault_env& fe, const shard_capture& c, const std::string& to) {
    make_dirs(fe, "/copy", to);
    for (const captured_file& f : c.files) {
        std::string bytes(f.length, '\0');
        auto n = f.file->read_at(0, std::span<char>(bytes.data(), bytes.size()));
        REQUIRE(n);
        REQUIRE(*n == f.length);
        fe.write_file(to + "/" + f.name, bytes);
    }
}

}  // namespace

TEST_CASE("a capture recovers to every settled write and to none of the batch in flight") {
    live_document_guard guard;
    fault_env fe(31);
    make_dirs(fe, "/data", dir);
    auto s = open_store(fe, dir, {0, true, 64 * 1024, 1});
    REQUIRE(s->error.empty());
    std::map<std::string, std::string> settled;
    for (int k = 0; k < 20; ++k) {
        REQUIRE(is_change(write_one(**s, put_op(key_name(k), value_for(k, 0))).outcome));
        settled[key_name(k)] = value_for(k, 0);
    }
    (*s)->submit(put_op(key_name(99), "in flight"));
    std::vector<write_result> done;
    (*s)->advance_batches(done);
    REQUIRE((*s)->in_flight());
    wait_for_log(**s);  // its bytes are in the segment now, though the store has not settled them

    auto c = (*s)->capture_files();
    REQUIRE_MESSAGE(c, c.error());
    drain(**s);
    copy_capture(fe, *c, "/copy/shard-000");
    auto copy = open_store(fe, "/copy/shard-000", {0, true, 64 * 1024, 1});
    REQUIRE_MESSAGE(copy->error.empty(), copy->error);
    CHECK(copy->stats->truncated_bytes == 0);  // cut at a batch's end: nothing torn
    for (const auto& [key, value] : settled) CHECK(current_value(**copy, key) == value);
    CHECK(current_value(**copy, key_name(99)) == "<missing>");
    CHECK(current_value(**s, key_name(99)) == "in flight");
}

TEST_CASE("segments compaction deletes after the capture stay readable through it") {
    live_document_guard guard;
    fault_env fe(32);
    make_dirs(fe, "/data", dir);
    constexpr std::uint64_t target = 8 * 1024;
    auto s = open_store(fe, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    std::map<std::string, std::string> at_capture;
    for (int round = 0; round < 3; ++round)
        for (int k = 0; k < 10; ++k) {
            REQUIRE(is_change(write_one(**s, put_op(key_name(k), value_for(k, round))).outcome));
            at_capture[key_name(k)] = value_for(k, round);
        }
    auto c = (*s)->capture_files();
    REQUIRE_MESSAGE(c, c.error());
    REQUIRE(c->files.size() > 2);
    const std::string first = dir + "/" + c->files.front().name;
    REQUIRE(fe.contents(first));

    // writes fill segments, compaction retires the old ones, a new segment's list lets them go
    for (int round = 3; round < 30 && fe.contents(first); ++round) {
        for (int k = 0; k < 10; ++k) write_one(**s, put_op(key_name(k), value_for(k, round)));
        compact_fully(**s);
    }
    REQUIRE((*s)->segments_deleted() > 0);
    CHECK(!fe.contents(first));  // gone from the directory, still held by the capture

    copy_capture(fe, *c, "/copy/shard-000");
    auto copy = open_store(fe, "/copy/shard-000", {0, true, target, 1});
    REQUIRE_MESSAGE(copy->error.empty(), copy->error);
    for (const auto& [key, value] : at_capture) CHECK(current_value(**copy, key) == value);
}

TEST_CASE("a capture holds the feed floor file as it was when captured") {
    live_document_guard guard;
    fault_env fe(33);
    make_dirs(fe, "/data", dir);
    REQUIRE(write_feed_floor(fe, dir, 41));
    auto s = open_store(fe, dir, {0, true, 64 * 1024, 1});
    REQUIRE(s->error.empty());
    write_one(**s, put_op(key_name(1), "v"));
    auto c = (*s)->capture_files();
    REQUIRE(c);
    REQUIRE(c->files.back().name == "feed_floor");
    REQUIRE(write_feed_floor(fe, dir, 99));  // replaced by a rename, as the store does
    copy_capture(fe, *c, "/copy/shard-000");
    auto floor = read_feed_floor(fe, "/copy/shard-000");
    REQUIRE(floor);
    CHECK(*floor == 41);
}
