// Reclaiming segments (docs/store-format.md "Compaction"): compaction must give back what it
// compacts — the files, their disk bytes and their open handles — without making the log start a
// segment per compaction, and without giving up any durability guarantee.
//
// Regression for the segment leak found by tests/soak (tests/soak/repro/segment_leak.py): one client
// overwriting 25 keys left one segment per write batch behind, 19,835 segments and 1.5 GB on disk
// with 19,850 open fds after 20k writes of 2 KB (48 KiB of live data). Every retired segment made the
// log roll at once (shard_log::retire set roll_requested_); when a second retirement came before the
// next write, the segment started for the first one stayed empty, holding only its segment list, and
// the store counted it as 0 bytes (it counted batch bytes only, not the header and list) so it never
// became a compaction victim. Every segment also held an open handle in the snapshots' table.
#include <doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/log_format.hpp"
#include "store/shard_store.hpp"
#include "store_test_util.hpp"
#include "tests/store/durability_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

const std::string dir = "/data/shard-000";
const std::string octet = "application/octet-stream";

void make_dirs(env& e) {
    REQUIRE(e.create_directory("/data"));
    REQUIRE(e.create_directory(dir));
    REQUIRE(e.sync_directory("/data"));
}

std::string key_name(int i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "k%03d", i);
    return std::string("app\0", 4) + buf;
}

std::string value_of_size(std::uint64_t serial, std::size_t size) {
    std::string v(size, static_cast<char>('a' + serial % 26));
    std::string tag = std::to_string(serial) + ":";
    v.replace(0, std::min(tag.size(), size), tag.substr(0, std::min(tag.size(), size)));
    return v;
}

// Counts the readable files that are open: every segment handle of the store (snapshots' tables,
// compaction's reader, recovery's readers) is one.
class counting_env final : public env {
public:
    explicit counting_env(env& inner) : inner_(inner) {}
    std::int64_t open_readers() const { return open_.load(); }

    io_result<std::unique_ptr<readable_file>> open_readable(const std::string& path) override {
        auto f = inner_.open_readable(path);
        if (!f) return f;
        return std::unique_ptr<readable_file>(new counted(std::move(*f), open_));
    }
    io_result<std::unique_ptr<writable_file>> open_writable(const std::string& path) override {
        return inner_.open_writable(path);
    }
    io_result<std::vector<std::string>> list(const std::string& d) override { return inner_.list(d); }
    io_result<void> create_directory(const std::string& p) override { return inner_.create_directory(p); }
    io_result<void> remove(const std::string& p) override { return inner_.remove(p); }
    io_result<void> rename(const std::string& a, const std::string& b) override { return inner_.rename(a, b); }
    io_result<void> sync_directory(const std::string& p) override { return inner_.sync_directory(p); }
    bool exists(const std::string& p) override { return inner_.exists(p); }

private:
    class counted final : public readable_file {
    public:
        counted(std::unique_ptr<readable_file> f, std::atomic<std::int64_t>& open) : f_(std::move(f)), open_(open) { ++open_; }
        ~counted() override { --open_; }
        io_result<std::size_t> read_at(std::uint64_t offset, std::span<char> out) override { return f_->read_at(offset, out); }
        io_result<std::uint64_t> size() override { return f_->size(); }

    private:
        std::unique_ptr<readable_file> f_;
        std::atomic<std::int64_t>& open_;
    };
    env& inner_;
    std::atomic<std::int64_t> open_{0};
};

// One round of a shard's loop as shards/server/shard.cpp runs it (commit the writes, one compaction step,
// reclaim), waiting first for the batch in flight so that the run is deterministic.
std::vector<write_result> loop_round(shard_store& s) {
    wait_for_log(s);
    std::vector<write_result> done;
    s.advance_batches(done);
    s.compact_step();
    s.reclaim();
    return done;
}

// One client that sends its next write only once the last one was answered: rounds until the
// answer, then one round with nothing pending (the answer's round trip to the client).
write_result client_write(shard_store& s, write_op op) {
    s.submit(std::move(op));
    for (int round = 0; round < 1000; ++round) {
        auto done = loop_round(s);
        if (!done.empty()) {
            REQUIRE(done.size() == 1);
            loop_round(s);
            return done.front();
        }
    }
    FAIL("the write was never answered");
    return {};
}

std::uint64_t put_record_bytes(int key, std::size_t value) {
    return record_bytes(key_name(key).size(), octet.size(), value);
}

bool has_file(fault_env& fe, std::uint64_t segment) {
    return fe.contents(segment_path(dir, segment)).has_value();
}

}  // namespace

TEST_CASE("one client overwriting a few keys keeps the segment count, the segment bytes and the open handles bounded") {
    live_document_guard guard;
    constexpr int keys = 25;
    constexpr std::size_t value_bytes = 1000;
    constexpr std::uint64_t target = 16 * 1024;
    constexpr int writes = 4000;

    fault_env fe(11);
    counting_env ce(fe);
    make_dirs(fe);
    auto s = open_store(ce, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    const std::uint64_t live = keys * put_record_bytes(0, value_bytes);
    // Bytes: sealed segments that compaction has not taken are at least half live (2 x live); besides
    // them the active segment, the segment being drained, and the compacted segments waiting for a
    // segment list that leaves them out (under one segment target of bytes, plus the one that
    // reached it): 2 x live + 4 segment targets, whatever the number of writes.
    const std::uint64_t byte_bound = 2 * live + 4 * target;
    // Files: segments are sealed full (a target each) except when a roll was requested; one file per
    // half target of live data, the active one, the one being drained, one sealed early, and at most
    // max_retired_segments compacted ones waiting.
    const std::size_t file_bound = 2 * live / (target / 2) + 3 + max_retired_segments;
    std::uint64_t most_bytes = 0;
    std::size_t most_files = 0;
    std::int64_t most_handles = 0;
    std::map<std::string, std::string> want;
    for (int n = 1; n <= writes; ++n) {
        std::string key = key_name(n % keys), value = value_of_size(static_cast<std::uint64_t>(n), value_bytes);
        auto r = client_write(**s, put_op(key, value));
        REQUIRE(is_change(r.outcome));
        want[key] = value;
        wait_for_log(**s);  // (an append the last round started is not half done while counting)
        most_bytes = std::max(most_bytes, segment_bytes(fe, dir));
        most_files = std::max(most_files, segment_files(fe, dir).size());
        most_handles = std::max(most_handles, ce.open_readers());
    }
    MESSAGE("after " << writes << " writes: " << segment_files(fe, dir).size() << " segments, " << segment_bytes(fe, dir)
                     << " bytes, " << ce.open_readers() << " open handles; most " << most_files << " segments, "
                     << most_bytes << " bytes, " << most_handles << " handles (live " << live << ", bounds "
                     << file_bound << " segments, " << byte_bound << " bytes); " << (*s)->segments_deleted()
                     << " segments deleted, log at segment " << (*s)->log()->current_segment_id());
    CHECK(most_bytes <= byte_bound);
    CHECK(most_files <= file_bound);
    // values under 64 KiB stay in memory: no snapshot needs a segment open, only compaction's reader
    CHECK(most_handles <= 1);
    // Segments started: not one per batch (4000 here), but one per target of writes and copies (the
    // copies are fewer than the writes) and at most one requested per target of compacted bytes (at
    // most the writes and copies again): 4 x the bytes written over the target.
    const std::uint64_t written = writes * put_record_bytes(0, value_bytes);
    CHECK((*s)->log()->current_segment_id() <= 4 * written / target);
    for (const auto& [key, value] : want) CHECK(current_value(**s, key) == value);

    s.reset();
    CHECK(ce.open_readers() == 0);
    s = open_store(ce, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    for (const auto& [key, value] : want) CHECK(current_value(**s, key) == value);
}

TEST_CASE("compacting a segment does not make the log start a new one") {
    live_document_guard guard;
    fault_env fe(12);
    make_dirs(fe);
    constexpr std::uint64_t target = 64 * 1024;
    auto s = open_store(fe, dir, {0, true, target, 1});
    for (int k = 0; k < 4; ++k) write_one(**s, put_op(key_name(k), value_of_size(k, 1000)));
    s.reset();  // segment 1 is sealed with four records
    s = open_store(fe, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    for (int k = 0; k < 4; ++k) write_one(**s, put_op(key_name(k), value_of_size(10 + k, 1000)));  // segment 2
    REQUIRE((*s)->log()->current_segment_id() == 2);
    compact_fully(**s);
    // segment 1 is compacted and waits for the next segment list; the log stays in segment 2
    CHECK((*s)->segments_retiring() == 1);
    CHECK((*s)->log()->current_segment_id() == 2);
    write_one(**s, put_op(key_name(9), "more"));
    CHECK((*s)->log()->current_segment_id() == 2);
    CHECK(segment_files(fe, dir).size() == 2);
    for (int k = 0; k < 4; ++k) CHECK(current_value(**s, key_name(k)) == value_of_size(10 + k, 1000));
}

TEST_CASE("a compacted segment is deleted once the log starts a segment whose list leaves it out") {
    live_document_guard guard;
    fault_env fe(13);
    make_dirs(fe);
    constexpr std::uint64_t target = 8 * 1024;
    auto s = open_store(fe, dir, {0, true, target, 1});
    write_one(**s, put_op(key_name(0), value_of_size(0, 1000)));
    s.reset();  // segment 1: one record, sealed
    s = open_store(fe, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    write_one(**s, put_op(key_name(0), value_of_size(1, 1000)));  // segment 2; segment 1 is dead
    compact_fully(**s);
    CHECK((*s)->segments_deleted() == 0);
    CHECK(has_file(fe, 1));  // still listed by segment 2's list
    for (int n = 2; (*s)->log()->current_segment_id() == 2; ++n) write_one(**s, put_op(key_name(n), value_of_size(n, 1000)));
    CHECK((*s)->segments_deleted() == 1);
    CHECK_FALSE(has_file(fe, 1));
    CHECK((*s)->segments().count(1) == 0);
}

TEST_CASE("a power cut while compacted segments wait for their deletion loses no acknowledged write") {
    live_document_guard guard;
    fault_env fe(14);
    make_dirs(fe);
    constexpr std::uint64_t target = 64 * 1024;
    auto s = open_store(fe, dir, {0, true, target, 1});
    std::map<std::string, std::pair<std::string, std::uint64_t>> want;
    for (int k = 0; k < 6; ++k) {
        std::string v = value_of_size(k, 700);
        want[key_name(k)] = {v, write_one(**s, put_op(key_name(k), v)).version};
    }
    auto gone = write_one(**s, erase_op(key_name(5)));
    REQUIRE(gone.outcome == write_outcome::deleted);
    want.erase(key_name(5));
    s.reset();  // segment 1 sealed
    s = open_store(fe, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    for (int k = 0; k < 4; ++k) {
        std::string v = value_of_size(100 + k, 700);
        want[key_name(k)] = {v, write_one(**s, put_op(key_name(k), v)).version};
    }
    compact_fully(**s);  // segment 1's live records are copied into segment 2; segment 1 waits
    REQUIRE(has_file(fe, 1));
    s.reset();
    fe.power_cut(3);
    s = open_store(fe, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    CHECK((*s)->current()->document_count() == want.size());
    for (const auto& [key, a] : want) {
        CHECK(current_value(**s, key) == a.first);
        const document* d = (*s)->current()->find(key);
        CHECK((d && d->version() == a.second));
    }
    CHECK((*s)->current()->find(key_name(5)) == nullptr);
    CHECK((*s)->next_version() > gone.version);
}

TEST_CASE("compacted segments waiting for deletion make the log start one new segment, even with no writes, once they reach a segment target of bytes") {
    live_document_guard guard;
    fault_env fe(15);
    make_dirs(fe);
    constexpr std::uint64_t target = 4096;
    // segments 1 and 2, sealed by restarts, with two records of 1 KiB each: each under a target
    for (int first = 0; first < 4; first += 2) {
        auto s = open_store(fe, dir, {0, true, target, 1});
        REQUIRE(s->error.empty());
        for (int k = first; k < first + 2; ++k) write_one(**s, put_op(key_name(k), value_of_size(k, 1000)));
    }
    auto s = open_store(fe, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    for (int k = 0; k < 4; ++k) write_one(**s, erase_op(key_name(k)));  // segment 3: 1 and 2 are dead
    REQUIRE((*s)->log()->current_segment_id() == 3);
    REQUIRE((*s)->segments().at(1).bytes < target);
    REQUIRE((*s)->segments().at(2).bytes < target);
    REQUIRE((*s)->segments().at(1).bytes + (*s)->segments().at(2).bytes >= target);
    compact_fully(**s);  // no writes after this
    CHECK_FALSE(has_file(fe, 1));
    CHECK_FALSE(has_file(fe, 2));
    CHECK((*s)->segments_deleted() == 2);
    CHECK((*s)->segments_retiring() == 0);
    CHECK((*s)->log()->current_segment_id() == 4);  // one new segment for both
    s.reset();
    s = open_store(fe, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    CHECK((*s)->current()->document_count() == 0);
}

TEST_CASE("the bytes the store counts for each segment are its file's bytes, header and segment list included") {
    live_document_guard guard;
    fault_env fe(16);
    make_dirs(fe);
    constexpr std::uint64_t target = 4096;
    auto s = open_store(fe, dir, {0, true, target, 1});
    for (int n = 0; n < 40; ++n) write_one(**s, put_op(key_name(n % 7), value_of_size(n, 300 + n * 10)));
    auto check_counts = [&] {
        for (const auto& [id, u] : (*s)->segments()) {
            CAPTURE(id);
            auto bytes = fe.contents(segment_path(dir, id));
            REQUIRE(bytes.has_value());
            CHECK(u.bytes == bytes->size());
        }
    };
    check_counts();
    s.reset();
    s = open_store(fe, dir, {0, true, target, 1});
    REQUIRE(s->error.empty());
    check_counts();
}

TEST_CASE("once a compacted segment holding a large value is deleted, its handle is closed after readers move on") {
    live_document_guard guard;
    fault_env fe(17);
    counting_env ce(fe);
    make_dirs(fe);
    constexpr std::uint64_t target = 64 * 1024;
    const std::string big(file_value_min_bytes, 'B');
    auto s = open_store(ce, dir, {0, true, target, 1});
    write_one(**s, put_op(key_name(0), big));  // segment 1, sent from the file
    REQUIRE((*s)->current()->segment(1) != nullptr);
    write_one(**s, put_op(key_name(0), "small"));  // segment 2 (the big one does not fit): 1 is dead
    while ((*s)->log()->current_segment_id() == 2) write_one(**s, put_op(key_name(1), std::string(4000, 'x')));
    compact_fully(**s);
    REQUIRE_FALSE(has_file(fe, 1));
    CHECK((*s)->current()->segment(1) == nullptr);
    (*s)->reclaim();
    CHECK(ce.open_readers() == 0);  // no other segment holds a value that lives in its file
    CHECK(current_value(**s, key_name(0)) == "small");
}
