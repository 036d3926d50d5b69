// The held write results of --replication sync (shards/base/sync_holds.hpp) with a fake clock, and
// the watermarks followers raise (shards/base/sync_acks.hpp).
#include <doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shards/base/sync_acks.hpp"
#include "shards/base/sync_holds.hpp"

using namespace percore;
using namespace percore::shards;
using namespace std::chrono_literals;

namespace {

using clock_point = sync_holds::clock::time_point;
const clock_point t0 = clock_point{} + 1000s;  // the fake clock: time points the test moves

std::vector<store::write_result> results(std::initializer_list<std::uint64_t> tags) {
    std::vector<store::write_result> out;
    for (std::uint64_t t : tags) out.push_back(store::write_result{.tag = t});
    return out;
}

// (tag, acknowledged) of each result answered
using answers = std::vector<std::pair<std::uint64_t, bool>>;

answers release(sync_holds& h, std::uint64_t watermark, clock_point now) {
    answers out;
    h.release(watermark, now, [&](const store::write_result& r, bool acknowledged) { out.emplace_back(r.tag, acknowledged); });
    return out;
}

}  // namespace

TEST_CASE("a held result is answered once the watermark covers its batch's version") {
    sync_holds h(2s);
    h.hold(results({1, 2}), 10, t0);
    CHECK(release(h, 9, t0 + 1s).empty());
    CHECK(release(h, 10, t0 + 1s) == answers{{1, true}, {2, true}});
    CHECK(h.empty());
}

TEST_CASE("held results are answered in version order and only as far as the watermark reaches") {
    sync_holds h(2s);
    h.hold(results({1}), 10, t0);
    h.hold(results({2}), 11, t0);
    h.hold(results({3}), 12, t0);
    CHECK(release(h, 11, t0) == answers{{1, true}, {2, true}});
    CHECK(h.oldest_version() == 12);
    CHECK(release(h, 100, t0) == answers{{3, true}});
}

TEST_CASE("a held result no follower acknowledged within the timeout is answered as not acknowledged") {
    sync_holds h(2s);
    h.hold(results({1}), 10, t0);
    h.hold(results({2}), 11, t0 + 1s);
    CHECK(h.next_deadline() == t0 + 2s);
    CHECK(release(h, 0, t0 + 2s - 1ns).empty());
    CHECK(release(h, 0, t0 + 2s) == answers{{1, false}});
    CHECK(h.next_deadline() == t0 + 3s);
    CHECK(release(h, 11, t0 + 10s) == answers{{2, true}});  // acknowledged, though late, wins
    CHECK(h.next_deadline() == clock_point::max());
}

TEST_CASE("a follower's acknowledgement raises each shard's watermark only upwards and wakes the shards it moved") {
    std::vector<unsigned> woken;
    sync_acks acks(3, [&](unsigned s) { woken.push_back(s); });
    const std::uint64_t first[] = {5, 0, 7};
    CHECK(acks.acknowledge(first, 100) == 2);
    CHECK(woken == std::vector<unsigned>{0, 2});
    const std::uint64_t older[] = {4, 1, 7};
    woken.clear();
    CHECK(acks.acknowledge(older, 200) == 1);
    CHECK(woken == std::vector<unsigned>{1});
    CHECK(acks.watermark(0) == 5);
    CHECK(acks.watermark(1) == 1);
    CHECK(acks.watermark(2) == 7);
    CHECK(acks.last_ack_ns() == 200);
}

TEST_CASE("the sync set is the boards that acknowledged since a time, by name, each once") {
    shards::sync_acks acks(1, [](unsigned) {});
    acks.note_board("b3", 100);
    acks.note_board("b2", 200);
    acks.note_board("b3", 300);  // again: moves its time, not a second entry
    CHECK(acks.boards_since(0) == std::vector<std::string>{"b2", "b3"});
    CHECK(acks.boards_since(250) == std::vector<std::string>{"b3"});
    CHECK(acks.boards_since(301).empty());
}

TEST_CASE("the sync set remembers at most max_sync_boards boards whatever followers send") {
    shards::sync_acks acks(1, [](unsigned) {});
    for (std::size_t i = 0; i < shards::max_sync_boards + 5; ++i) acks.note_board("b" + std::to_string(i), 1);
    CHECK(acks.boards_since(0).size() == shards::max_sync_boards);
}
