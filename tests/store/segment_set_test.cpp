// segment_set (store/segment_set.hpp): a compacted segment's file is deleted only once a segment
// list that leaves it out is durable (an append returned ok in a later segment), its handle leaves
// the next published table, and the retired segments are bounded.
#include <doctest.h>

#include <cerrno>
#include <memory>
#include <string>

#include "store/limits.hpp"
#include "store/segment_set.hpp"
#include "tests/store/fault_env.hpp"

using namespace percore::store;
using percore::store::testing::fault_env;

namespace {

const std::string dir = "/data/shard-000";

// A shard directory with segment files 1..count of a few bytes each, durable, and a segment_set
// attached to it.
struct segments_on_disk {
    fault_env fe;
    segment_set s;

    explicit segments_on_disk(std::uint32_t count) {
        REQUIRE(fe.create_directory("/data"));
        REQUIRE(fe.create_directory(dir));
        for (std::uint32_t id = 1; id <= count; ++id) {
            auto f = fe.open_writable(dir + "/" + segment_file_name(id));
            REQUIRE(f);
            REQUIRE((*f)->append(std::string(64, 's')));
            REQUIRE((*f)->sync());
        }
        REQUIRE(fe.sync_directory(dir));
        REQUIRE(fe.sync_directory("/data"));
        s.attach(fe, dir);
    }
};

append_result appended_to(std::uint64_t segment_id, int error = 0) {
    append_result r;
    r.segment_id = segment_id;
    r.error = error;
    return r;
}

}  // namespace

TEST_CASE("a retired segment is deleted only after an append to a segment started after its retirement") {
    segments_on_disk disk(1);
    auto& [fe, s] = disk;
    s.set_valid_bytes(1, 64);
    s.retire(1, /*after_segment=*/2);

    s.delete_retired(appended_to(2));  // the log's segment when it was retired: its list names 1
    CHECK(s.retiring() == 1);
    CHECK(fe.exists(s.path(1)));

    s.delete_retired(appended_to(3));
    CHECK(s.retiring() == 0);
    CHECK(s.deleted() == 1);
    CHECK_FALSE(fe.exists(s.path(1)));
    CHECK(s.usage().count(1) == 0);
}

TEST_CASE("a failed append deletes no retired segment") {
    segments_on_disk disk(1);
    auto& [fe, s] = disk;
    s.retire(1, 2);
    s.delete_retired(appended_to(3, EIO));
    CHECK(s.retiring() == 1);
    CHECK(fe.exists(s.path(1)));
}

TEST_CASE("a deleted segment's handle leaves the next published table, and readers of the old one keep it") {
    segments_on_disk disk(1);
    auto& [fe, s] = disk;
    REQUIRE(s.open(1));
    auto published = s.table_for_publication();
    CHECK_FALSE(s.table_changed());
    s.retire(1, 2);
    s.delete_retired(appended_to(3));
    CHECK(s.table_changed());
    CHECK(s.find_open(1) == nullptr);
    CHECK(published->find(1) != nullptr);
    CHECK(s.table_for_publication()->find(1) == nullptr);
    CHECK_FALSE(s.table_changed());
}

TEST_CASE("without a directory attached no segment is opened") {
    segment_set s;
    CHECK_FALSE(s.open(1));
    CHECK(s.find_open(1) == nullptr);
}

TEST_CASE("the retired segments reach their bound by count") {
    segment_set s;
    for (std::uint32_t id = 1; id < max_retired_segments; ++id) s.retire(id, 100);
    CHECK_FALSE(s.retirement_full(~std::uint64_t{0}));
    s.retire(max_retired_segments, 100);
    CHECK(s.retirement_full(~std::uint64_t{0}));
}

TEST_CASE("the retired segments reach their bound by bytes") {
    segment_set s;
    s.set_valid_bytes(1, 600);
    s.set_valid_bytes(2, 400);
    s.retire(1, 5);
    CHECK_FALSE(s.retirement_full(1000));
    s.retire(2, 5);
    CHECK(s.retirement_full(1000));
}

TEST_CASE("the empty roll is no longer due once the last retired segment is deleted") {
    segments_on_disk disk(2);
    auto& [fe, s] = disk;
    s.retire(1, 3);
    s.retire(2, 4);
    s.set_roll_due();
    s.delete_retired(appended_to(4));
    CHECK(s.retiring() == 1);
    CHECK(s.roll_due());
    s.delete_retired(appended_to(5));
    CHECK(s.retiring() == 0);
    CHECK_FALSE(s.roll_due());
}

TEST_CASE("a batch's bytes count once, its live bytes add up") {
    segment_set s;
    s.note_appended(3, 500, 400);
    s.note_appended(3, 800, 250);
    s.remove_live_bytes(3, 100);
    CHECK(s.usage().at(3).bytes == 800);
    CHECK(s.usage().at(3).live_bytes == 550);
}

TEST_CASE("every change compaction_victim reads moves usage_changes, and a seal that seals nothing does not") {
    segments_on_disk disk(2);
    auto& s = disk.s;
    std::uint64_t seen = s.usage_changes();
    auto moved = [&] {
        const bool m = s.usage_changes() != seen;
        seen = s.usage_changes();
        return m;
    };
    s.set_valid_bytes(1, 64);
    CHECK(moved());
    s.note_appended(1, 128, 32);
    CHECK(moved());
    s.add_live_bytes(1, 16);
    CHECK(moved());
    s.remove_live_bytes(1, 16);
    CHECK(moved());
    s.seal_below(2);
    CHECK(moved());
    s.seal_below(2);
    CHECK_FALSE(moved());
    s.retire(1, /*after_segment=*/2);
    CHECK(moved());
    s.delete_retired(appended_to(3));
    CHECK(moved());
    s.keep_only({2});
    CHECK(moved());
}
