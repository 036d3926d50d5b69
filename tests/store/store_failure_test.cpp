// The durable store on a failing disk (store/shard_log.hpp "Failures", shard_store.hpp): ENOSPC,
// partial writes, EIO on append and on sync, failures while a segment is being started, and a
// store destroyed while a batch is in flight.
#include <doctest.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "store/shard_store.hpp"
#include "store_test_util.hpp"
#include "tests/store/durability_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

const std::string dir = "/data/shard-000";

void make_dirs(fault_env& fe) {
    REQUIRE(fe.create_directory("/data"));
    REQUIRE(fe.create_directory(dir));
    REQUIRE(fe.sync_directory("/data"));
    REQUIRE(fe.sync_directory("/"));
}

struct expected_doc {
    std::string key;
    std::string value;
    std::uint64_t version;
};

void check_docs(shard_store& s, const std::vector<expected_doc>& docs) {
    for (const auto& d : docs) {
        INFO("key ", d.key);
        const document* got = s.current()->find(d.key);
        REQUIRE(got);
        CHECK(value_bytes_of(*s.current(), *got) == d.value);
        CHECK(got->version() == d.version);
    }
}

std::string filler(char c, std::size_t n) { return std::string(n, c); }

}  // namespace

// The disk fills up (set_capacity_bytes) with batches that need new space: larger than what is left
// of a segment of 4 KiB, so they need a new one (whether or not the log preallocates segments).
constexpr std::uint64_t small_segments = 4096;
constexpr std::size_t big = 3000;

TEST_CASE("ENOSPC answers the whole batch no_space, publishes none of it, and reads go on") {
    live_document_guard guard;
    fault_env fe(1);
    make_dirs(fe);
    auto s = open_store(fe, dir, {0, true, small_segments, 1});
    REQUIRE(s->error.empty());
    auto a = write_one(**s, put_op("a", "a1"));
    auto b = write_one(**s, put_op("b", "b1"));
    REQUIRE(a.outcome == write_outcome::created);

    fe.set_capacity_bytes(fe.bytes_used() + 10);
    const snapshot* before = (*s)->current();
    std::vector<write_op> ops;
    ops.push_back(put_op("a", filler('x', big)));
    ops.push_back(put_op("c", filler('y', big)));
    ops.push_back(erase_op("b"));
    ops.push_back(erase_op("missing"));
    auto done = write_all(**s, std::move(ops));
    CHECK(done[0].outcome == write_outcome::no_space);
    CHECK(done[1].outcome == write_outcome::no_space);
    CHECK(done[2].outcome == write_outcome::no_space);
    // not a change, and not affected by the failed writes before it (see the last test of this file)
    CHECK((done[3].outcome == write_outcome::not_found || done[3].outcome == write_outcome::no_space));
    CHECK((*s)->current() == before);
    CHECK_FALSE((*s)->failed());
    check_docs(**s, {{"a", "a1", a.version}, {"b", "b1", b.version}});
    CHECK((*s)->current()->find("c") == nullptr);
}

TEST_CASE("after ENOSPC the store writes again once space is freed, and a restart shows exactly what was acknowledged") {
    live_document_guard guard;
    fault_env fe(2);
    make_dirs(fe);
    auto s = open_store(fe, dir, {0, true, small_segments, 1});
    auto a = write_one(**s, put_op("a", "a1"));
    auto b = write_one(**s, put_op("b", "b1"));
    fe.set_capacity_bytes(fe.bytes_used() + 10);
    for (int i = 0; i < 3; ++i) CHECK(write_one(**s, put_op("a", filler('x', 2 * big))).outcome == write_outcome::no_space);
    std::vector<write_op> ops;
    ops.push_back(put_op("c", filler('y', 2 * big)));
    ops.push_back(erase_op("b"));
    for (const auto& r : write_all(**s, std::move(ops))) CHECK(r.outcome == write_outcome::no_space);

    fe.set_capacity_bytes(UINT64_MAX);
    auto a2 = write_one(**s, put_op("a", "a2"));
    auto c = write_one(**s, put_op("c", "c1"));
    CHECK(a2.outcome == write_outcome::replaced);
    CHECK(c.outcome == write_outcome::created);
    CHECK(a2.version > b.version);
    CHECK(a2.version > a.version);
    check_docs(**s, {{"a", "a2", a2.version}, {"b", "b1", b.version}, {"c", "c1", c.version}});

    s.reset();
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    CHECK((*s)->current()->document_count() == 3);
    check_docs(**s, {{"a", "a2", a2.version}, {"b", "b1", b.version}, {"c", "c1", c.version}});
    CHECK(write_one(**s, put_op("d", "d1")).version > c.version);
}

TEST_CASE("ENOSPC while the log starts a new segment is answered no_space and the segment is started later") {
    live_document_guard guard;
    fault_env fe(3);
    make_dirs(fe);
    auto s = open_store(fe, dir, {0, true, 64, 1});  // every batch after the first starts a segment
    auto a = write_one(**s, put_op("a", "a1"));
    fe.set_capacity_bytes(fe.bytes_used() + 16);  // not even a segment header fits
    CHECK(write_one(**s, put_op("b", "b1")).outcome == write_outcome::no_space);
    CHECK(write_one(**s, put_op("b", "b2")).outcome == write_outcome::no_space);
    fe.set_capacity_bytes(UINT64_MAX);
    auto b = write_one(**s, put_op("b", "b3"));
    CHECK(b.outcome == write_outcome::created);
    s.reset();
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    check_docs(**s, {{"a", "a1", a.version}, {"b", "b3", b.version}});
    CHECK((*s)->current()->document_count() == 2);
}

TEST_CASE("a failed append that wrote part of its batch leaves nothing of it after a restart or a power cut") {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        INFO("seed ", seed);
        live_document_guard guard;
        fault_env fe(seed);
        make_dirs(fe);
        fe.set_partial_failed_appends(true);
        auto s = open_store(fe, dir);
        auto a = write_one(**s, put_op("a", "a1"));
        const auto size_before = fe.contents(segment_files(fe, dir).back())->size();
        fe.fail_next(fault_op::append, seed % 2 ? ENOSPC : EIO);
        std::vector<write_op> ops;
        ops.push_back(put_op("a", filler('x', 300)));
        ops.push_back(put_op("b", filler('y', 300)));
        ops.push_back(put_op("c", filler('z', 300)));
        auto done = write_all(**s, std::move(ops));
        for (const auto& r : done) CHECK(r.outcome == (seed % 2 ? write_outcome::no_space : write_outcome::unavailable));
        CHECK(fe.contents(segment_files(fe, dir).back())->size() == size_before);  // cut back
        CHECK_FALSE((*s)->failed());

        const bool later_write = seed % 4 < 2;
        std::uint64_t d_version = 0;
        if (later_write) d_version = write_one(**s, put_op("d", "d1")).version;
        s.reset();
        if (seed > 10) fe.power_cut(seed);
        s = open_store(fe, dir);
        REQUIRE(s->error.empty());
        check_docs(**s, {{"a", "a1", a.version}});
        CHECK((*s)->current()->find("b") == nullptr);
        CHECK((*s)->current()->find("c") == nullptr);
        if (later_write) check_docs(**s, {{"d", "d1", d_version}});
        CHECK((*s)->current()->document_count() == (later_write ? 2u : 1u));
    }
}

TEST_CASE("an EIO on append answers the batch unavailable and later writes succeed") {
    live_document_guard guard;
    fault_env fe(4);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    auto a = write_one(**s, put_op("a", "a1"));
    fe.fail_next(fault_op::append, EIO);
    std::vector<write_op> ops;
    ops.push_back(put_op("a", "lost"));
    ops.push_back(put_op("b", "lost"));
    auto done = write_all(**s, std::move(ops));
    CHECK(done[0].outcome == write_outcome::unavailable);
    CHECK(done[1].outcome == write_outcome::unavailable);
    CHECK_FALSE((*s)->failed());
    check_docs(**s, {{"a", "a1", a.version}});
    CHECK((*s)->current()->find("b") == nullptr);

    auto b = write_one(**s, put_op("b", "b1"));
    CHECK(b.outcome == write_outcome::created);
    s.reset();
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    check_docs(**s, {{"a", "a1", a.version}, {"b", "b1", b.version}});
    CHECK((*s)->current()->document_count() == 2);
}

TEST_CASE("an EIO on sync answers the batch unavailable, fails the log for good, and reads still answer") {
    live_document_guard guard;
    fault_env fe(5);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    auto a = write_one(**s, put_op("a", "a1"));
    auto b = write_one(**s, put_op("b", "b1"));
    const snapshot* before = (*s)->current();

    fe.fail_next(fault_op::sync, EIO);
    std::vector<write_op> ops;
    ops.push_back(put_op("a", "a2"));
    ops.push_back(put_op("c", "c1"));
    ops.push_back(erase_op("b"));
    auto done = write_all(**s, std::move(ops));
    CHECK(done[0].outcome == write_outcome::unavailable);
    CHECK(done[1].outcome == write_outcome::unavailable);
    CHECK(done[2].outcome == write_outcome::unavailable);
    CHECK((*s)->failed());

    // Never retried as if it had worked: every later write is refused, even with the disk healthy.
    const auto syncs = fe.calls(fault_op::sync);
    for (int i = 0; i < 5; ++i) {
        CHECK(write_one(**s, put_op("d", "d1")).outcome == write_outcome::unavailable);
        CHECK(write_one(**s, erase_op("a")).outcome == write_outcome::unavailable);
    }
    CHECK(fe.calls(fault_op::sync) == syncs);
    CHECK((*s)->current() == before);
    check_docs(**s, {{"a", "a1", a.version}, {"b", "b1", b.version}});
    CHECK((*s)->current()->find("c") == nullptr);
    CHECK((*s)->current()->find("d") == nullptr);

    // After a restart the acknowledged writes are there. (The failed batch may be there too: it was
    // never acknowledged, and whether a failed fdatasync kept it is unknown.)
    s.reset();
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    const document* got_a = (*s)->current()->find("a");
    REQUIRE(got_a);
    CHECK((got_a->version() == a.version || current_value(**s, "a") == "a2"));
    CHECK((*s)->current()->find("d") == nullptr);
    CHECK(write_one(**s, put_op("e", "e1")).outcome == write_outcome::created);
}

// A failed sync of a new segment's header, or of its directory, must fail the log like any failed
// sync, and a retried segment creation must never append a second header to a file that has one.
// Until 771291e open_next_segment() returned the error without failing the log and the retry
// reopened the same file and appended another header; the acknowledged writes after it made recovery
// refuse to start ("not a percore segment", or "damaged record at byte 32").
TEST_CASE("a failed sync of a new segment's header fails the log like any failed sync") {
    live_document_guard guard;
    fault_env fe(6);
    make_dirs(fe);
    auto s = open_store(fe, dir, {0, true, 64, 1});  // every batch after the first starts a segment
    auto a = write_one(**s, put_op("a", "a1"));
    fe.fail_next(fault_op::sync, EIO);  // the header sync of segment 2
    CHECK(write_one(**s, put_op("b", "lost")).outcome == write_outcome::unavailable);
    CHECK((*s)->failed());
    auto b = write_one(**s, put_op("b", "b1"));
    CHECK(b.outcome == write_outcome::unavailable);
    s.reset();
    s = open_store(fe, dir);
    CHECK(s->error.empty());
    if (s->error.empty()) {
        check_docs(**s, {{"a", "a1", a.version}});
        if (b.outcome == write_outcome::created) check_docs(**s, {{"b", "b1", b.version}});
    }
}

TEST_CASE("a failed directory sync while a segment starts leaves a segment that recovery reads") {
    live_document_guard guard;
    fault_env fe(7);
    make_dirs(fe);
    auto s = open_store(fe, dir, {0, true, 64, 1});
    auto a = write_one(**s, put_op("a", "a1"));
    fe.fail_next(fault_op::sync_directory, EIO);  // segment 2's directory entry
    CHECK(write_one(**s, put_op("b", "lost")).outcome == write_outcome::unavailable);
    auto b = write_one(**s, put_op("b", "b1"));  // refused (a failed log), or in a segment started over
    auto c = write_one(**s, put_op("c", "c1"));
    s.reset();
    s = open_store(fe, dir);
    CHECK(s->error.empty());
    if (s->error.empty()) {
        check_docs(**s, {{"a", "a1", a.version}});
        if (b.outcome == write_outcome::created) check_docs(**s, {{"b", "b1", b.version}});
        if (c.outcome == write_outcome::created) check_docs(**s, {{"c", "c1", c.version}});
    }
}

// A failed header append that wrote part of the header (a short write, then ENOSPC) must not leave
// that part in front of the header the retry writes (fixed in 771291e: the file is started over).
TEST_CASE("a partial segment header left by a failed append does not make the segment unreadable") {
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
        CAPTURE(seed);
        live_document_guard guard;
        fault_env fe(seed);
        make_dirs(fe);
        fe.set_partial_failed_appends(true);
        auto s = open_store(fe, dir, {0, true, 64, 1});
        auto a = write_one(**s, put_op("a", "a1"));
        fe.fail_next(fault_op::append, ENOSPC);  // the header of segment 2
        CHECK(write_one(**s, put_op("b", "lost")).outcome == write_outcome::no_space);
        auto b = write_one(**s, put_op("b", "b1"));
        CHECK(b.outcome == write_outcome::created);
        s.reset();
        s = open_store(fe, dir);
        CHECK(s->error.empty());
        if (s->error.empty()) check_docs(**s, {{"a", "a1", a.version}, {"b", "b1", b.version}});
    }
}

// BUG (store/shard_store.cpp, ~shard_store): the destructor releases the in-flight batch's tree but
// not `flight_.written`, the extra reference apply_pending() takes on each put of the batch (dropped
// in settle(), which never runs then). A store destroyed while a batch is in flight (a shutdown
// after a failure, every crash test) leaks those documents and their values.
TEST_CASE("a store destroyed with a batch in flight frees that batch's documents") {
    live_document_guard guard;
    fault_env fe(8);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    (*s)->submit(put_op("a", filler('v', 1000)));
    (*s)->submit(put_op("b", "b"));
    std::vector<write_result> done;
    (*s)->advance_batches(done);
    REQUIRE((*s)->in_flight());
    wait_for_log(**s);
    s.reset();
    CHECK(guard.made() == 0);  // BUG: 2
}

// BUG (store/shard_store.cpp, advance_batches(), the branch for a failed append): only the answers that were
// changes (created/replaced/deleted) are turned into no_space/unavailable. The batch's other answers
// were evaluated against the working tree, which holds the failed batch's own earlier writes, and go
// out as they are: a precondition that "fails" against a version that never became durable (and
// whose 412 carries that version as the current ETag), a 404 for a key that still exists. The
// contract (shard_store.hpp): "A batch whose append fails is dropped whole: its writes are answered
// no_space (ENOSPC) or unavailable (any other error)". Found by the crash test with injected failures.
TEST_CASE("a failed batch answers none of its writes from the state its own failed writes left") {
    live_document_guard guard;
    fault_env fe(9);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    auto a = write_one(**s, put_op("a", "a1"));
    auto b = write_one(**s, put_op("b", "b1"));
    fe.fail_next(fault_op::append, EIO);
    std::vector<write_op> ops;
    ops.push_back(put_op("a", "a2"));                   // fails
    ops.push_back(erase_op("a", if_match({a.version})));  // holds against the durable state
    ops.push_back(erase_op("b"));                       // fails
    ops.push_back(erase_op("b"));                       // b still exists
    auto done = write_all(**s, std::move(ops));
    CHECK(done[0].outcome == write_outcome::unavailable);
    CHECK(done[1].outcome == write_outcome::unavailable);  // BUG: precondition_failed
    if (done[1].outcome == write_outcome::precondition_failed)
        CHECK(done[1].version == a.version);  // BUG: the version of the failed put, never published
    CHECK(done[2].outcome == write_outcome::unavailable);
    CHECK(done[3].outcome == write_outcome::unavailable);  // BUG: not_found, while b exists
    check_docs(**s, {{"a", "a1", a.version}, {"b", "b1", b.version}});
}

// The usage changes in write results (per-app quotas) count only what became durable.
TEST_CASE("the writes of a batch whose append fails report no usage change") {
    live_document_guard guard;
    fault_env fe(8);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    write_one(**s, put_op("a", "a1"));
    fe.fail_next(fault_op::append, ENOSPC);
    std::vector<write_op> ops;
    ops.push_back(put_op("a", "a22"));
    ops.push_back(put_op("c", "c1"));
    ops.push_back(erase_op("a"));
    auto done = write_all(**s, std::move(ops));
    for (const write_result& r : done) {
        CHECK(r.outcome == write_outcome::no_space);
        CHECK(r.documents_delta == 0);
        CHECK(r.bytes_delta == 0);
    }
    CHECK((*s)->current()->value_bytes() == 2);
}

TEST_CASE("writes refused by a log that failed report no usage change") {
    live_document_guard guard;
    fault_env fe(9);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    write_one(**s, put_op("a", "a1"));
    fe.fail_next(fault_op::sync, EIO);
    CHECK(write_one(**s, put_op("b", "b1")).outcome == write_outcome::unavailable);
    REQUIRE((*s)->failed());
    auto put = write_one(**s, put_op("c", "c1"));
    auto erase = write_one(**s, erase_op("a"));
    CHECK(put.outcome == write_outcome::unavailable);
    CHECK(put.documents_delta == 0);
    CHECK(put.bytes_delta == 0);
    CHECK(erase.outcome == write_outcome::unavailable);
    CHECK(erase.documents_delta == 0);
    CHECK(erase.bytes_delta == 0);
}
