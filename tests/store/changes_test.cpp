// The store side of the change feed (store/changes.hpp, shard_store.hpp "Change feed"): tombstones
// in the snapshot, changes_after(), retention and the feed floor, and what survives a restart and
// compaction.
#include <doctest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cstdio>
#include <string>
#include <vector>

#include "store/changes.hpp"
#include "store/feed_floor.hpp"
#include "store/recovery.hpp"
#include "store/shard_store.hpp"
#include "store_test_util.hpp"
#include "tests/store/durability_util.hpp"

using namespace percore::store;
using namespace percore::store::test;
using namespace std::chrono_literals;

namespace {

const std::string dir = "/data/shard-000";
const auto t0 = std::chrono::steady_clock::time_point{} + 1h;

void make_dirs(fault_env& fe) {
    REQUIRE(fe.create_directory("/data"));
    REQUIRE(fe.create_directory(dir));
    REQUIRE(fe.sync_directory("/data"));
}

std::vector<change> list(const shard_store& s, std::uint64_t after, std::string_view prefix = {},
                         std::size_t limit = 1000, bool* more = nullptr) {
    std::vector<change> out;
    bool m = changes_after(*s.current(), after, prefix, limit, out);
    if (more) *more = m;
    return out;
}

std::string keys_of(const std::vector<change>& cs) {
    std::string r;
    for (const change& c : cs) r += std::string(c.key) + (c.deleted ? "- " : " ");
    return r;
}

// The tombstone records in the segments of `directory` (the store must be closed).
std::size_t tombstone_records(fault_env& fe) {
    std::size_t n = 0;
    auto r = recover_segments(fe, dir, [&](const record_view& rec, std::uint64_t, std::uint64_t) {
        if (rec.kind == record_kind::tombstone) ++n;
    });
    REQUIRE(r);
    return n;
}

store_options retention(std::chrono::seconds r, std::uint64_t segment_target = 64ull << 20) {
    store_options o;
    o.segment_target_bytes = segment_target;
    o.changes_retention = r;
    return o;
}

}  // namespace

TEST_CASE("a delete is listed as deleted with the delete's version") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    apply_one(s, put_op("a", "1"));
    auto d = apply_one(s, erase_op("a"));
    REQUIRE(d.outcome == write_outcome::deleted);
    auto cs = list(s, 0);
    REQUIRE(cs.size() == 1);
    CHECK(cs[0].key == "a");
    CHECK(cs[0].deleted);
    CHECK(cs[0].version == d.version);
    CHECK(cs[0].size == 0);
    REQUIRE(s.current()->find_deleted("a"));
    CHECK(s.current()->find_deleted("a")->version() == d.version);
}

TEST_CASE("a delete of a missing key leaves no tombstone") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    CHECK(apply_one(s, erase_op("a")).outcome == write_outcome::not_found);
    CHECK(list(s, 0).empty());
    CHECK(s.current()->high_version() == 0);
}

TEST_CASE("a put of a deleted key removes its tombstone and is listed as a put") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    apply_one(s, put_op("a", "1"));
    apply_one(s, erase_op("a"));
    auto p = apply_one(s, put_op("a", "22"));
    CHECK(s.current()->find_deleted("a") == nullptr);
    auto cs = list(s, 0);
    REQUIRE(cs.size() == 1);
    CHECK_FALSE(cs[0].deleted);
    CHECK(cs[0].version == p.version);
    CHECK(cs[0].size == 2);
}

TEST_CASE("tombstones are not documents: counts, bytes and the document cursor leave them out") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    apply_one(s, put_op("a", "123"));
    apply_one(s, put_op("b", "4"));
    apply_one(s, erase_op("a"));
    const snapshot& snap = *s.current();
    CHECK(snap.document_count() == 1);
    CHECK(snap.value_bytes() == 1);
    CHECK(snap.find("a") == nullptr);
    snapshot::cursor c;
    c.seek(snap, "", false);
    REQUIRE(c.valid());
    CHECK(c.doc().key() == "b");
    c.next();
    CHECK_FALSE(c.valid());
}

TEST_CASE("changes are listed in version order, at most limit, and more says whether others follow") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    apply_one(s, put_op("c", "1"));   // 1
    apply_one(s, put_op("a", "1"));   // 2
    apply_one(s, put_op("b", "1"));   // 3
    apply_one(s, erase_op("c"));      // 4
    apply_one(s, put_op("a", "2"));   // 5: a's newest version only
    CHECK(keys_of(list(s, 0)) == "b c- a ");
    bool more = false;
    auto first = list(s, 0, {}, 2, &more);
    CHECK(keys_of(first) == "b c- ");
    CHECK(more);
    auto rest = list(s, first.back().version, {}, 2, &more);
    CHECK(keys_of(rest) == "a ");
    CHECK_FALSE(more);
    CHECK(list(s, 5).empty());
    CHECK(s.current()->high_version() == 5);
}

TEST_CASE("paging with a limit far below the changes lists every newest version once, in version order") {
    // 300 keys written in a shuffled order, a third rewritten and some deleted: with limit 7 a page
    // holds many times 2 x limit candidates, so the bounded collection cuts them down repeatedly
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    std::map<std::string, std::pair<std::uint64_t, bool>> newest;  // key -> version, deleted
    for (int i = 0; i < 300; ++i) {
        const std::string key = "k" + std::to_string(i * 7919 % 300);
        auto r = apply_one(s, put_op(key, "v"));
        newest[key] = {r.version, false};
    }
    for (int i = 0; i < 300; i += 3) {
        const std::string key = "k" + std::to_string(i * 104729 % 300);
        auto r = i % 2 ? apply_one(s, erase_op(key)) : apply_one(s, put_op(key, "w"));
        newest[key] = {r.version, i % 2 != 0};
    }
    std::vector<std::pair<std::uint64_t, std::string>> expected;
    for (const auto& [key, v] : newest) expected.emplace_back(v.first, key + (v.second ? "-" : ""));
    std::sort(expected.begin(), expected.end());
    std::vector<std::pair<std::uint64_t, std::string>> listed;
    std::uint64_t after = 0;
    bool more = true;
    while (more) {
        auto page = list(s, after, {}, 7, &more);
        REQUIRE(page.size() <= 7);
        REQUIRE((more ? page.size() == 7 : true));
        for (const change& c : page) listed.emplace_back(c.version, std::string(c.key) + (c.deleted ? "-" : ""));
        if (!page.empty()) after = page.back().version;
    }
    CHECK(listed == expected);
}

namespace {

// The same listing from changes_after (the window when the cursor is inside it) and from a scan.
void check_agrees_with_scan(const shard_store& s, std::uint64_t after, std::string_view prefix, std::size_t limit) {
    std::vector<change> fast, slow;
    const bool fast_more = changes_after(*s.current(), after, prefix, limit, fast);
    const bool slow_more = changes_after_by_scan(*s.current(), after, prefix, limit, slow);
    CAPTURE(after);
    CAPTURE(prefix);
    CAPTURE(limit);
    REQUIRE(fast.size() == slow.size());
    for (std::size_t i = 0; i < fast.size(); ++i) {
        CHECK(fast[i].key == slow[i].key);
        CHECK(fast[i].version == slow[i].version);
        CHECK(fast[i].deleted == slow[i].deleted);
        CHECK(fast[i].size == slow[i].size);
        CHECK(fast[i].doc == slow[i].doc);
    }
    CHECK(fast_more == slow_more);
}

// Puts, rewrites and deletes of 120 keys under two prefixes, in batches of one to five writes.
void churn(shard_store& s, int writes, unsigned seed) {
    for (int i = 0; i < writes;) {
        std::vector<write_op> ops;
        const int batch = 1 + static_cast<int>(seed % 5);
        for (int j = 0; j < batch && i < writes; ++j, ++i) {
            seed = seed * 1103515245u + 12345u;
            const std::string key = std::string(seed % 3 ? "a/" : "b/") + std::to_string(seed / 7 % 60);
            if (seed / 11 % 4 == 0) ops.push_back(erase_op(key));
            else ops.push_back(put_op(key, std::to_string(i)));
        }
        apply(s, std::move(ops));
        s.reclaim();
    }
}

}  // namespace

TEST_CASE("a shard keeps no window of recent changes until a listing asks for one") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    churn(s, 50, 7);
    CHECK_FALSE(s.recent().kept());
    CHECK(s.current()->recent_floor() == UINT64_MAX);
    (void)list(s, 0);  // no window: scanned, and asked
    churn(s, 1, 8);
    CHECK(s.recent().kept());
    CHECK(s.current()->recent_floor() != UINT64_MAX);
}

TEST_CASE("listings after any cursor inside the window give what a scan gives, prefix, limit and more included") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    churn(s, 40, 3);
    (void)list(s, 0);
    const std::uint64_t floor_version = s.current()->high_version();
    churn(s, 400, 11);
    REQUIRE(s.current()->recent_floor() == floor_version);
    for (std::uint64_t after = 0; after <= s.current()->high_version(); ++after)
        for (std::string_view prefix : {std::string_view(), std::string_view("a/"), std::string_view("b/1")})
            for (std::size_t limit : {std::size_t{1}, std::size_t{7}, std::size_t{1000}})
                check_agrees_with_scan(s, after, prefix, limit);
}

TEST_CASE("the window stays within its bound: the floor rises, older cursors scan, and chunks no snapshot holds are freed") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    (void)list(s, 0);
    const int writes = static_cast<int>(max_recent_changes) + 5000;
    for (int i = 0; i < writes; i += 100) {
        std::vector<write_op> ops;
        for (int j = 0; j < 100; ++j) ops.push_back(put_op("k" + std::to_string((i + j) % 20000), "v"));
        apply(s, std::move(ops));
        s.reclaim();
    }
    const snapshot& now = *s.current();
    CHECK(now.recent_floor() > 0);
    CHECK(now.recent_floor() < now.high_version());
    CHECK(s.recent().entries() <= max_recent_changes);
    CHECK(s.recent().chunks() <= max_recent_changes / 100 + 2);
    for (std::uint64_t after : {std::uint64_t{0}, now.recent_floor() - 1, now.recent_floor(), now.high_version() - 150})
        check_agrees_with_scan(s, after, {}, 1000);
}

TEST_CASE("a window entry whose key changed again or whose tombstone expired is not listed") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1, std::chrono::seconds(1));
    (void)list(s, 0);
    apply_one(s, put_op("x", "1"));
    const std::uint64_t after = s.current()->high_version();
    apply_one(s, put_op("a", "1"));
    apply_one(s, erase_op("a"));
    apply_one(s, put_op("b", "1"));
    apply_one(s, put_op("b", "2"));
    CHECK(keys_of(list(s, after)) == "a- b ");
    s.expire_changes(t0);
    s.expire_changes(t0 + 5s);
    s.reclaim();
    check_agrees_with_scan(s, after, {}, 100);
    CHECK(keys_of(list(s, after)) == "b ");
}

TEST_CASE("only keys that start with the prefix are listed") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1);
    apply_one(s, put_op("app1/x", "1"));
    apply_one(s, put_op("app2/y", "1"));
    apply_one(s, put_op("app1/z", "1"));
    apply_one(s, erase_op("app1/x"));
    apply_one(s, erase_op("app2/y"));
    apply_one(s, put_op("app10", "1"));
    CHECK(keys_of(list(s, 0, "app1/")) == "app1/z app1/x- ");
    CHECK(keys_of(list(s, 0, "app2/")) == "app2/y- ");
    CHECK(list(s, 0, "app3").empty());
}

TEST_CASE("only published batches are listed") {
    live_document_guard guard;
    fault_env fe(1);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    write_one(**s, put_op("a", "1"));
    (*s)->submit(erase_op("a"));
    std::vector<write_result> done;
    (*s)->advance_batches(done);
    REQUIRE((*s)->in_flight());
    CHECK(keys_of(list(**s, 0)) == "a ");  // the delete is not durable yet
    auto rest = drain(**s);
    REQUIRE(rest.size() == 1);
    CHECK(keys_of(list(**s, 0)) == "a- ");
    CHECK((*s)->current()->high_version() == rest[0].version);
}

TEST_CASE("expire_changes removes tombstones after the retention and raises the floor to the highest removed version") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1, 10s);
    apply_one(s, put_op("a", "1"));
    apply_one(s, put_op("b", "1"));
    auto da = apply_one(s, erase_op("a"));
    s.expire_changes(t0);  // a's deletion time
    auto db = apply_one(s, erase_op("b"));
    s.expire_changes(t0 + 5s);  // b's
    s.expire_changes(t0 + 9s);
    CHECK(keys_of(list(s, 0)) == "a- b- ");
    CHECK(s.current()->feed_floor() == 0);
    s.expire_changes(t0 + 10s);
    CHECK(keys_of(list(s, 0)) == "b- ");
    CHECK(s.current()->feed_floor() >= da.version);
    CHECK(s.current()->feed_floor() < db.version);
    s.expire_changes(t0 + 15s);
    CHECK(list(s, 0).empty());
    CHECK(s.current()->feed_floor() >= db.version);
    s.reclaim();
}

TEST_CASE("a tombstone replaced by a put or a newer delete is not removed with its old deletion") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1, 10s);
    apply_one(s, put_op("a", "1"));
    apply_one(s, erase_op("a"));
    s.expire_changes(t0);
    apply_one(s, put_op("a", "2"));
    auto again = apply_one(s, erase_op("a"));
    s.expire_changes(t0 + 5s);
    s.expire_changes(t0 + 10s);  // the first deletion expires; the tombstone is the second one's
    REQUIRE(s.current()->find_deleted("a"));
    CHECK(s.current()->find_deleted("a")->version() == again.version);
    s.reclaim();
}

TEST_CASE("the floor rises by time to the high version of a checkpoint at least the retention old") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1, 256s);  // checkpoints at most one per second
    s.expire_changes(t0);
    CHECK(s.feed_checkpoints() == 0);  // nothing written: nothing held
    auto w1 = apply_one(s, put_op("a", "1"));
    s.expire_changes(t0 + 1s);  // checkpoint (t0+1, w1)
    auto w2 = apply_one(s, put_op("b", "1"));
    s.expire_changes(t0 + 100s);  // checkpoint (t0+100, w2)
    CHECK(s.current()->feed_floor() == 0);
    s.expire_changes(t0 + 257s);
    CHECK(s.current()->feed_floor() == w1.version);
    s.expire_changes(t0 + 356s);
    CHECK(s.current()->feed_floor() == w2.version);
    CHECK(keys_of(list(s, 0)) == "a b ");  // documents stay listed; the floor tells a client where it can start
    s.reclaim();
}

TEST_CASE("the checkpoints of the time-based floor stay bounded under continuous writes") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store s(epochs, 1, 512s);  // one checkpoint per 2 s at most
    std::size_t most = 0;
    for (int second = 0; second < 3000; ++second) {
        apply_one(s, put_op("k" + std::to_string(second % 7), "v"));
        s.expire_changes(t0 + std::chrono::seconds(second));
        most = std::max(most, s.feed_checkpoints());
        s.reclaim();
    }
    CHECK(most <= feed_checkpoints_per_retention + 2);
    CHECK(most >= feed_checkpoints_per_retention);
    CHECK(s.current()->feed_floor() > 0);
}

TEST_CASE("tombstones and the feed floor survive a restart") {
    live_document_guard guard;
    fault_env fe(2);
    make_dirs(fe);
    auto s = open_store(fe, dir, retention(10s));
    write_one(**s, put_op("a", "1"));
    write_one(**s, put_op("b", "1"));
    auto da = write_one(**s, erase_op("a"));
    (*s)->expire_changes(t0);
    auto db = write_one(**s, erase_op("b"));
    s.reset();
    s = open_store(fe, dir, retention(10s));
    REQUIRE(s->error.empty());
    CHECK(keys_of(list(**s, 0)) == "a- b- ");
    CHECK(list(**s, 0)[0].version == da.version);
    CHECK((*s)->current()->high_version() == db.version);
    (*s)->expire_changes(t0 + 100s);  // recovered tombstones count as deleted now
    CHECK(keys_of(list(**s, 0)) == "a- b- ");
    (*s)->expire_changes(t0 + 110s);
    CHECK(list(**s, 0).empty());
    CHECK((*s)->persisted_feed_floor() == db.version);
    s.reset();
    fe.power_cut(3);
    s = open_store(fe, dir, retention(10s));
    REQUIRE(s->error.empty());
    CHECK((*s)->current()->feed_floor() == db.version);
    CHECK(list(**s, 0).empty());  // removed tombstones at or below the floor do not come back
    CHECK((*s)->next_version() > db.version);
}

TEST_CASE("compaction keeps listed tombstones, across a restart") {
    live_document_guard guard;
    fault_env fe(3);
    make_dirs(fe);
    auto s = open_store(fe, dir, retention(3600s, 64));  // one batch per segment
    write_one(**s, put_op("a", std::string(500, 'x')));
    auto d = write_one(**s, erase_op("a"));
    write_one(**s, put_op("b", std::string(500, 'm')));
    write_one(**s, put_op("b", std::string(500, 'n')));
    s.reset();
    s = open_store(fe, dir, retention(3600s, 64));
    REQUIRE(s->error.empty());
    compact_fully(**s);  // everything is sealed: the tombstone's segment too
    CHECK((*s)->segments_deleted() > 0);
    s.reset();
    CHECK(tombstone_records(fe) >= 1);
    s = open_store(fe, dir, retention(3600s, 64));
    REQUIRE(s->error.empty());
    REQUIRE((*s)->current()->find_deleted("a"));
    CHECK((*s)->current()->find_deleted("a")->version() == d.version);
    CHECK((*s)->current()->find("a") == nullptr);
}

TEST_CASE("compaction drops removed tombstones once the floor is persisted, and disk stays bounded under overwrite and delete churn") {
    live_document_guard guard;
    fault_env fe(4);
    make_dirs(fe);
    constexpr std::uint64_t target = 16 * 1024;
    auto s = open_store(fe, dir, retention(2s, target));
    std::uint64_t most = 0;
    std::uint64_t tombstones = 0;
    for (int round = 0; round < 3000; ++round) {
        std::string key = "k" + std::to_string(round / 2 % 40);  // put, then delete the same key
        if (round % 2 == 0) write_one(**s, put_op(key, std::string(300, 'v')));
        else if (write_one(**s, erase_op(key)).outcome == write_outcome::deleted) ++tombstones;
        (*s)->expire_changes(t0 + std::chrono::seconds(round / 10));
        (*s)->compact_step();
        most = std::max(most, segment_bytes(fe, dir));
    }
    (*s)->expire_changes(t0 + 1000s);
    CHECK((*s)->persisted_feed_floor() > 0);
    CHECK(list(**s, 0).size() <= 40);
    compact_fully(**s);
    const std::uint64_t total = segment_bytes(fe, dir);
    // 40 keys of 300 bytes: live records are ~14 KiB; every tombstone ever written would be 1500 records
    MESSAGE("segment bytes at the end: " << total << ", most " << most << ", tombstones written " << tombstones);
    CHECK(total <= 8 * target);
    s.reset();
    CHECK(tombstone_records(fe) < tombstones / 4);
}

TEST_CASE("a failed write of the feed floor file keeps the tombstone records") {
    live_document_guard guard;
    fault_env fe(5);
    make_dirs(fe);
    store_options o = retention(1s, 64);
    o.commit_mark_idle = std::chrono::milliseconds(0);  // no sync but the floor file's
    auto s = open_store(fe, dir, o);
    write_one(**s, put_op("a", std::string(500, 'x')));
    auto d = write_one(**s, erase_op("a"));
    write_one(**s, put_op("b", std::string(500, 'm')));
    write_one(**s, put_op("b", std::string(500, 'n')));
    (*s)->expire_changes(t0);
    fe.fail_next(fault_op::rename, EIO);
    (*s)->expire_changes(t0 + 1s);  // removes a's tombstone; its floor is not persisted
    CHECK((*s)->current()->find_deleted("a") == nullptr);
    CHECK((*s)->feed_floor() >= d.version);
    CHECK((*s)->persisted_feed_floor() == 0);
    s.reset();
    s = open_store(fe, dir, o);  // everything sealed: the tombstone's segment is the oldest
    REQUIRE(s->error.empty());
    CHECK((*s)->current()->feed_floor() == 0);
    compact_fully(**s);
    s.reset();
    CHECK(tombstone_records(fe) == 1);  // kept: the floor on disk does not cover it
    s = open_store(fe, dir, o);
    REQUIRE(s->error.empty());
    REQUIRE((*s)->current()->find_deleted("a"));  // listed again rather than missed
    (*s)->expire_changes(t0 + 10s);
    (*s)->expire_changes(t0 + 11s);
    CHECK((*s)->persisted_feed_floor() >= d.version);
    s.reset();
    s = open_store(fe, dir, o);
    REQUIRE(s->error.empty());
    CHECK((*s)->current()->find_deleted("a") == nullptr);  // covered by the floor on disk now
    CHECK((*s)->current()->feed_floor() >= d.version);
}

TEST_CASE("a damaged feed floor file stops recovery with a message naming it") {
    live_document_guard guard;
    fault_env fe(6);
    make_dirs(fe);
    REQUIRE(write_feed_floor(fe, dir, 42));
    auto f = read_feed_floor(fe, dir);
    REQUIRE(f);
    CHECK(*f == 42);
    fe.overwrite(dir + "/feed_floor", 9, "x");
    auto s = open_store(fe, dir);
    CHECK(s->error.find("feed_floor") != std::string::npos);
}
