// compactor (store/compactor.hpp): which segment compaction copies forward, and which tombstone
// records it keeps. The whole of compaction through a store: compaction_test.cpp.
#include <doctest.h>

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "store/compactor.hpp"
#include "store/log_format.hpp"
#include "store/segment_set.hpp"
#include "store/snapshot.hpp"

using namespace percore::store;

namespace {

// A segment's bytes (its header included) and how many of them are live.
struct segment_row {
    std::uint32_t id;
    std::uint64_t bytes;
    std::uint64_t live;
};

// The victim among `rows`, every segment below `sealed_below` sealed, `retiring` (if not 0) retired.
std::uint32_t victim_of(std::initializer_list<segment_row> rows, std::uint64_t sealed_below, std::uint32_t retiring = 0) {
    segment_set s;
    for (const segment_row& r : rows) {
        s.set_valid_bytes(r.id, r.bytes);
        s.add_live_bytes(r.id, r.live);
    }
    s.seal_below(sealed_below);
    if (retiring != 0) s.retire(retiring, sealed_below);
    return compaction_victim(s);
}

constexpr std::uint64_t header = segment_header_bytes;

record_view tombstone_record(std::uint64_t version) {
    record_view rec;
    rec.kind = record_kind::tombstone;
    rec.version = version;
    rec.key = std::string_view("app\0gone", 8);
    return rec;
}

}  // namespace

TEST_CASE("the victim is the sealed segment with the most dead bytes") {
    CHECK(victim_of({{1, header + 1000, 0}, {2, header + 3000, 1000}, {3, header + 1500, 0}}, 4) == 2);
}

TEST_CASE("a segment less than half dead is no victim") {
    CHECK(victim_of({{1, header + 1000, 600}}, 2) == 0);
}

TEST_CASE("a segment exactly half dead is a victim") {
    CHECK(victim_of({{1, 1000, 500 - header}}, 2) == 1);
}

TEST_CASE("the segment the log may still write to is no victim") {
    CHECK(victim_of({{1, header + 1000, 0}}, 1) == 0);
}

TEST_CASE("a retiring segment is no victim") {
    CHECK(victim_of({{1, header + 2000, 0}, {2, header + 1000, 0}}, 3, /*retiring=*/1) == 2);
}

TEST_CASE("a tombstone record outside the oldest segment is kept") {
    snapshot empty;
    CHECK(keep_tombstone(empty, tombstone_record(5), /*oldest=*/false, /*persisted_floor=*/10));
}

TEST_CASE("a removed tombstone record in the oldest segment is dropped once the persisted floor covers it") {
    snapshot empty;
    CHECK(keep_tombstone(empty, tombstone_record(5), true, 4));
    CHECK_FALSE(keep_tombstone(empty, tombstone_record(5), true, 5));
}
