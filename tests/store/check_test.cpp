// percore check (store/check.hpp) against recovery, on every kind of damage the recovery tests make
// (recovery_test.cpp, crash_test.cpp, store_failure_test.cpp, changes_test.cpp, reshard_test.cpp):
// the check's verdict is recovery's. Each case damages one shard directory in a fault_env, copies
// it, and then (agrees_with_recovery):
// - checks one copy without --repair, which changes no byte, and recovers it with shard_store: the
//   check says damaged exactly when recovery refuses, and then its first damage is recovery's
//   error, word for word (the file and the byte offset with it); otherwise it lists the repairs
//   recovery makes, in order (the same files, offsets and bytes cut), and the documents recovery
//   rebuilds;
// - checks the other copy with --repair: a damaged shard keeps every byte; an undamaged one gets
//   recovery's repairs, after which recovery has nothing left to repair.
#include <doctest.h>

#include <cerrno>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "store/check.hpp"
#include "store/data_layout.hpp"
#include "store/feed_floor.hpp"
#include "store/log_format.hpp"
#include "store/segment_reader.hpp"
#include "store_test_util.hpp"
#include "tests/store/durability_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

const std::string dir = "/data/shard-000";

void make_dirs(env& e) {
    REQUIRE(e.create_directory("/data"));
    REQUIRE(e.create_directory(dir));
    REQUIRE(e.sync_directory("/data"));
}

using file_state = std::vector<std::pair<std::string, std::string>>;

file_state files_of(fault_env& fe) {
    file_state out;
    for (const std::string& path : fe.files()) out.emplace_back(path, *fe.contents(path));
    return out;
}

std::string described(const std::vector<recovery_finding>& findings) {
    std::string out;
    for (const auto& f : findings) out += f.what + "\n";
    return out;
}

bool same_places(const std::vector<recovery_finding>& a, const std::vector<recovery_finding>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].kind != b[i].kind || a[i].file != b[i].file || a[i].offset != b[i].offset || a[i].bytes != b[i].bytes)
            return false;
    return true;
}

std::vector<recovery_finding> repairable_of(const std::vector<recovery_finding>& findings) {
    std::vector<recovery_finding> out;
    for (const auto& f : findings)
        if (f.repairable()) out.push_back(f);
    return out;
}

const recovery_finding* first_refusal(const shard_check& c) {
    for (const auto& f : c.findings)
        if (!f.repairable()) return &f;
    return nullptr;
}

// The documents and value bytes shard_store recovered into `s`, and the records it replayed; the
// segments it read too unless --repair removed some since the check.
void check_counts(const shard_check& c, durable_store& s, bool same_segments = true) {
    CHECK(c.documents == s->current()->document_count());
    CHECK(c.document_bytes == s->current()->value_bytes());
    CHECK(c.records == s.stats->records);
    if (same_segments) CHECK(c.segments == s.stats->segments);
}

// The comparison of the file comment, on the shard directory of `fe` (left recovered); returns the
// check without --repair.
shard_check agrees_with_recovery(fault_env& fe) {
    fault_env twin(99);
    make_dirs(twin);
    for (const auto& [path, bytes] : files_of(fe)) twin.write_file(path, bytes);

    const file_state before = files_of(fe);
    shard_check c = check_shard_directory(fe, dir, 0, false);
    INFO("the check found:\n" << described(c.findings));
    CHECK(files_of(fe) == before);  // a check without --repair writes nothing
    auto s = open_store(fe, dir);
    const recovery_finding* refusal = first_refusal(c);
    CHECK(c.damaged() == (refusal && refusal->kind != finding_kind::unreadable));
    if (refusal) {
        CHECK(refusal_line(*refusal) == s->error);
        CHECK_FALSE(s->error.empty());
    } else {
        REQUIRE(s->error == "");
        CHECK(same_places(c.findings, s->stats->findings));
        check_counts(c, *s);
    }
    s.reset();

    const file_state twin_before = files_of(twin);
    shard_check r = check_shard_directory(twin, dir, 0, true);
    CHECK(same_places(r.findings, c.findings));
    if (refusal) {
        CHECK(files_of(twin) == twin_before);  // --repair never touches a damaged shard
        CHECK(r.repaired.empty());
        return c;
    }
    CHECK(same_places(r.repaired, repairable_of(c.findings)));
    auto again = open_store(twin, dir);
    REQUIRE(again->error == "");
    CHECK(again->stats->findings.empty());  // nothing left for recovery to repair
    check_counts(c, *again, false);
    return c;
}

// Three puts and a delete, a large value kept in the file among them, one batch each; stopped
// cleanly (its last batch has a commit mark after it).
void write_some(fault_env& fe, store_options o = {}) {
    auto s = open_store(fe, dir, o);
    REQUIRE(s->error == "");
    write_one(**s, put_op("a", "value a"));
    write_one(**s, put_op("big", std::string(file_value_min_bytes, 'v')));
    write_one(**s, put_op("gone", "soon"));
    write_one(**s, erase_op("gone"));
    write_one(**s, put_op("c", "value c"));
}

store_options one_batch_per_segment() { return {0, true, 64, 1}; }

// The first 100 bytes of a 300-byte put: a batch a crash cut short.
std::string torn_record() {
    std::string torn;
    encode_record(torn, record_kind::put, 99, "b", "text/plain", std::string(300, 'b'));
    return torn.substr(0, 100);
}

// The check found one thing: this, here.
void only_finding(const shard_check& c, finding_kind kind, const std::string& file, std::uint64_t offset) {
    REQUIRE(c.findings.size() == 1);
    CHECK(c.findings[0].kind == kind);
    CHECK(c.findings[0].file == file);
    CHECK(c.findings[0].offset == offset);
}

std::size_t count_of(const shard_check& c, finding_kind kind) {
    std::size_t n = 0;
    for (const auto& f : c.findings) n += f.kind == kind;
    return n;
}

}  // namespace

TEST_CASE("an undamaged shard checks clean with the documents, bytes and records recovery rebuilds") {
    fault_env fe(1);
    make_dirs(fe);
    write_some(fe);
    shard_check c = agrees_with_recovery(fe);
    CHECK(c.findings.empty());
    CHECK(c.documents == 3);
    CHECK(c.document_bytes == 14 + file_value_min_bytes);
    CHECK(c.records == 5);
}

TEST_CASE("a torn tail of the last segment is found with the cut recovery makes, at every byte of the last batch") {
    std::string bytes;
    std::uint64_t batch_start = 0;
    {
        fault_env fe(3);
        make_dirs(fe);
        auto s = open_store(fe, dir);
        write_one(**s, put_op("a", "value a"));
        std::vector<write_op> last;
        last.push_back(put_op("c", std::string(100, 'c')));
        last.push_back(erase_op("a"));
        last.push_back(put_op("d", ""));
        write_all(**s, std::move(last));
        s.reset();
        auto records = records_of(fe, segment_path(dir, 1));
        batch_start = records[1].offset;
        bytes = fe.contents(segment_path(dir, 1))->substr(0, records.back().end);  // no commit mark
    }
    for (std::uint64_t cut = batch_start; cut < bytes.size(); cut += 7) {
        for (bool zeros : {false, true}) {
            CAPTURE(cut);
            CAPTURE(zeros);
            fault_env fe(4);
            make_dirs(fe);
            std::string torn = bytes.substr(0, cut);
            if (zeros) torn.resize(bytes.size(), '\0');
            fe.write_file(segment_path(dir, 1), torn);
            shard_check c = agrees_with_recovery(fe);
            CHECK_FALSE(c.damaged());
            if (cut > batch_start) CHECK(count_of(c, finding_kind::torn_tail) == 1);
        }
    }
}

TEST_CASE("a flipped byte in the last record with no commit mark after it is a torn tail, as recovery cuts it") {
    fault_env fe(5);
    make_dirs(fe);
    write_some(fe);
    const std::string seg = segment_path(dir, 1);
    const record_at c = record_for(records_of(fe, seg), "c");
    fe.write_file(seg, fe.contents(seg)->substr(0, c.end));
    flip_byte(fe, seg, c.end - 2);
    shard_check check = agrees_with_recovery(fe);
    only_finding(check, finding_kind::torn_tail, seg, c.offset);
    CHECK(check.findings[0].bytes == c.end - c.offset);
}

TEST_CASE("a flipped byte in the last record that a commit mark follows is damage at the record's offset") {
    for (int field : {0, 1}) {  // in its value; in its length field
        CAPTURE(field);
        fault_env fe(6);
        make_dirs(fe);
        write_some(fe);
        const std::string seg = segment_path(dir, 1);
        const record_at c = record_for(records_of(fe, seg), "c");
        REQUIRE(c.end + commit_mark_bytes == fe.contents(seg)->size());
        flip_byte(fe, seg, field == 0 ? c.end - 2 : c.offset + 4);
        shard_check check = agrees_with_recovery(fe);
        only_finding(check, finding_kind::damaged_record, seg, c.offset);
    }
}

TEST_CASE("a flipped byte in a middle record is damage naming the file and the record's offset") {
    fault_env fe(7);
    make_dirs(fe);
    write_some(fe);
    const std::string seg = segment_path(dir, 1);
    const record_at a = record_for(records_of(fe, seg), "a");
    flip_byte(fe, seg, a.end - 1);
    shard_check c = agrees_with_recovery(fe);
    only_finding(c, finding_kind::damaged_record, seg, a.offset);
}

TEST_CASE("a damaged record claiming the rest of the file is damage with a commit mark in it, a torn tail without") {
    fault_env fe(8);
    make_dirs(fe);
    write_some(fe);
    const std::string seg = segment_path(dir, 1);
    const record_at c = record_for(records_of(fe, seg), "c");
    std::string bytes = *fe.contents(seg);
    for (std::uint64_t at : {c.offset + 4, c.offset + 24}) bytes[at + 1] = static_cast<char>(bytes[at + 1] + 3);
    fe.write_file(seg, bytes);
    CHECK(agrees_with_recovery(fe).damaged());
    fault_env unmarked(9);
    make_dirs(unmarked);
    unmarked.write_file(seg, bytes.substr(0, c.end));
    CHECK(count_of(agrees_with_recovery(unmarked), finding_kind::torn_tail) == 1);
}

TEST_CASE("a zero-filled torn tail inside a value that holds an encoded record is a torn tail") {
    std::string inner;
    encode_record(inner, record_kind::put, 7, std::string("app\0x", 5), "text/plain", "an embedded record");
    fault_env fe(10);
    make_dirs(fe);
    {
        auto s = open_store(fe, dir);
        write_one(**s, put_op("a", "value a"));
        write_one(**s, put_op("backup", "backup:" + inner + std::string(2000, 'p')));
    }
    const std::string seg = segment_path(dir, 1);
    const record_at backup = record_for(records_of(fe, seg), "backup");
    const auto size = fe.contents(seg)->size();
    fe.overwrite(seg, backup.end - 1000, std::string(size - (backup.end - 1000), '\0'));
    CHECK(count_of(agrees_with_recovery(fe), finding_kind::torn_tail) == 1);
}

TEST_CASE("a segment file whose header is not ours is damage, wherever it is") {
    std::string big(2 << 20, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + 3);
    for (int where : {0, 1, 2, 3}) {  // a damaged header in the middle, the last; a large file before, after
        CAPTURE(where);
        fault_env fe(11);
        make_dirs(fe);
        write_some(fe, one_batch_per_segment());
        auto files = segment_files(fe, dir);
        REQUIRE(files.size() >= 3);
        std::string victim = where == 0 ? files[1] : where == 1 ? files.back() : segment_path(dir, where == 2 ? 0 : 99);
        if (where < 2) fe.overwrite(victim, 0, "XXXX");
        else fe.write_file(victim, big);
        shard_check c = agrees_with_recovery(fe);
        REQUIRE(first_refusal(c));
        CHECK(first_refusal(c)->kind == finding_kind::not_a_segment);
        CHECK(first_refusal(c)->file == victim);
        CHECK(count_of(c, finding_kind::missing_segment) == 0);  // there, only not readable
    }
}

TEST_CASE("a segment with the valid header of another segment is damage") {
    fault_env fe(12);
    make_dirs(fe);
    write_some(fe, one_batch_per_segment());
    auto files = segment_files(fe, dir);
    fe.write_file(files[1], *fe.contents(files[0]));
    shard_check c = agrees_with_recovery(fe);
    REQUIRE(first_refusal(c));
    CHECK(first_refusal(c)->kind == finding_kind::wrong_header);
    CHECK(first_refusal(c)->file == files[1]);
}

TEST_CASE("segments whose header never reached the disk are left over, removed by recovery and --repair") {
    char header[segment_header_bytes];
    encode_segment_header(header, 0, 50);
    std::string garbage(200, '\0');
    for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 7 + 3);
    for (const std::string& bytes : {std::string(), std::string(header, 20), std::string(32, '\0'), garbage}) {
        CAPTURE(bytes.size());
        fault_env fe(13);
        make_dirs(fe);
        write_some(fe);
        fe.write_file(segment_path(dir, 50), bytes);
        shard_check c = agrees_with_recovery(fe);
        only_finding(c, finding_kind::unwritten_segment, segment_path(dir, 50), 0);
    }
}

TEST_CASE("a torn tail followed only by segments that never got a header is a torn tail and leftovers") {
    fault_env fe(14);
    make_dirs(fe);
    write_some(fe);
    const std::string seg = segment_path(dir, 1);
    fe.write_file(seg, *fe.contents(seg) + torn_record());
    fe.write_file(segment_path(dir, 2), "");
    shard_check c = agrees_with_recovery(fe);
    CHECK(count_of(c, finding_kind::torn_tail) == 1);
    CHECK(count_of(c, finding_kind::unwritten_segment) == 1);
}

TEST_CASE("a torn tail in an older segment is damage") {
    fault_env fe(15);
    make_dirs(fe);
    write_some(fe, one_batch_per_segment());
    auto files = segment_files(fe, dir);
    const auto size = fe.contents(files[1])->size();
    fe.write_file(files[1], *fe.contents(files[1]) + torn_record());
    shard_check c = agrees_with_recovery(fe);
    REQUIRE(first_refusal(c));
    CHECK(first_refusal(c)->kind == finding_kind::cut_short);
    CHECK(first_refusal(c)->offset == size);
}

TEST_CASE("a missing segment the newest list names is damage, one finding per missing segment") {
    fault_env fe(16);
    make_dirs(fe);
    write_some(fe, one_batch_per_segment());
    auto files = segment_files(fe, dir);
    REQUIRE(files.size() >= 4);
    REQUIRE(fe.remove(files[0]));
    REQUIRE(fe.remove(files[2]));
    shard_check c = agrees_with_recovery(fe);
    CHECK(count_of(c, finding_kind::missing_segment) == 2);
    CHECK(first_refusal(c)->file == files[0]);
}

TEST_CASE("an older segment the newest list leaves out is a compaction leftover, read but not counted") {
    fault_env fe(17);
    make_dirs(fe);
    write_some(fe, one_batch_per_segment());
    auto files = segment_files(fe, dir);
    // a newest segment whose list leaves segment 1 out, as compaction's would
    const std::uint64_t id = files.size() + 1;
    char header[segment_header_bytes];
    encode_segment_header(header, 0, id);
    std::string newest(header, sizeof header);
    std::vector<std::uint64_t> listed;
    for (std::uint64_t i = 2; i < id; ++i) listed.push_back(i);
    encode_record(newest, record_kind::segment_list, 1000, {}, {}, encode_segment_list(listed));
    fe.write_file(segment_path(dir, id), newest);
    shard_check c = agrees_with_recovery(fe);
    only_finding(c, finding_kind::leftover_segment, files[0], 0);
    CHECK(c.documents == 2);  // "a", in segment 1, is not replayed
}

TEST_CASE("a version at or past 2^63 is damage naming the record") {
    fault_env fe(18);
    make_dirs(fe);
    write_some(fe, {0, true, 64ull << 20, std::uint64_t{1} << 63});
    shard_check c = agrees_with_recovery(fe);
    REQUIRE(first_refusal(c));
    CHECK(first_refusal(c)->kind == finding_kind::implausible_version);
    CHECK(first_refusal(c)->file == segment_path(dir, 1));
    CHECK(first_refusal(c)->offset == record_for(records_of(fe, segment_path(dir, 1)), "c").offset);
}

TEST_CASE("a damaged feed floor file is damage, found before the segments as recovery finds it") {
    fault_env fe(19);
    make_dirs(fe);
    write_some(fe);
    REQUIRE(write_feed_floor(fe, dir, 2));
    fe.overwrite(dir + "/" + feed_floor_file_name, 9, "x");
    shard_check c = agrees_with_recovery(fe);
    REQUIRE(first_refusal(c));
    CHECK(first_refusal(c)->kind == finding_kind::damaged_feed_floor);
}

TEST_CASE("files whose names are not segment names are not looked at") {
    fault_env fe(20);
    make_dirs(fe);
    write_some(fe);
    for (std::string name : {"notes.txt", "0000000000000002.seg.tmp", "000000000000000G.seg"})
        fe.write_file(dir + "/" + name, "garbage");
    CHECK(agrees_with_recovery(fe).findings.empty());
}

TEST_CASE("a segment that cannot be read leaves the check incomplete, as recovery refuses it") {
    fault_env fe(21);
    make_dirs(fe);
    write_some(fe);
    fe.fail_next(fault_op::read, EIO, 1000);
    shard_check c = check_shard_directory(fe, dir, 0, false);
    fe.clear_failures();
    CHECK_FALSE(c.damaged());
    CHECK(c.unreadable());
    REQUIRE(first_refusal(c));
    fe.fail_next(fault_op::read, EIO, 1000);
    auto s = open_store(fe, dir);
    CHECK(s->error == refusal_line(*first_refusal(c)));
}

TEST_CASE("after power cuts during writes and compaction, the check agrees with recovery") {
    std::mt19937_64 rng(7);
    int repaired = 0;
    for (std::uint64_t point = 1; point <= 40; ++point) {
        CAPTURE(point);
        fault_env fe(point);
        make_dirs(fe);
        crash_env ce(fe);
        store_options o{0, true, 2048, 1, std::chrono::milliseconds(0)};
        auto s = open_store(ce, dir, o);
        REQUIRE(s->error == "");
        ce.arm(point * 3, power_cut_kind{true, point, 0, false});
        for (int i = 0; i < 60 && !ce.crashed(); ++i) {
            std::string key = "k" + std::to_string(rng() % 6);
            (*s)->submit(rng() % 4 == 0 ? erase_op(key) : put_op(key, std::string(100 + rng() % 400, 'x')));
            drain(**s);
            if (i % 10 == 9) (*s)->compact_step();
        }
        s.reset();
        ce.revive();
        shard_check c = agrees_with_recovery(fe);
        CHECK_FALSE(c.damaged());  // crash_test: recovery succeeds after every power cut
        repaired += !c.findings.empty();
    }
    MESSAGE(repaired << " of 40 power cuts left something for recovery to repair");
    CHECK(repaired > 0);
}

// --- the data directory ---------------------------------------------------------------------------

namespace {

const std::string root = "/data";

unsigned owner_by_first_byte(std::string_view key, unsigned shards) {
    return key.empty() ? 0 : static_cast<unsigned char>(key[0]) % shards;
}

// A data directory of `shards` shards (FORMAT, layout 1) with a document in each shard.
void make_data_directory(fault_env& fe, unsigned shards) {
    auto layout = open_layout(fe, root, shards, owner_by_first_byte, [](const std::string&) {});
    REQUIRE(layout);
    for (unsigned i = 0; i < shards; ++i) {
        auto s = open_store(fe, layout->shard_directory(i), {i});
        REQUIRE(s->error == "");
        write_one(**s, put_op("doc" + std::to_string(i), "value"));
    }
}

}  // namespace

TEST_CASE("a data directory is checked with the layout and shard count its FORMAT names, and nothing is created") {
    fault_env fe(30);
    REQUIRE(fe.create_directory(root));
    make_data_directory(fe, 3);
    const file_state before = files_of(fe);
    auto report = check_data_directory(fe, root, false);
    REQUIRE(report);
    CHECK(files_of(fe) == before);
    CHECK(report->layout.shards == 3);
    REQUIRE(report->shards.size() == 3);
    for (const shard_check& c : report->shards) CHECK(c.documents == 1);
    CHECK(report->outcome() == check_report::verdict::clean);
    const auto lines = report_lines(*report);
    CHECK(lines.back().starts_with("percore check: clean (3 shards, 3 documents)"));
}

TEST_CASE("a missing shard directory or an unknown FORMAT is damage; no FORMAT and no segments is no data directory") {
    fault_env fe(31);
    REQUIRE(fe.create_directory(root));
    SUBCASE("a missing shard directory") {
        make_data_directory(fe, 2);
        for (const std::string& f : fe.files())
            if (f.starts_with(root + "/layout-1/shard-001/")) REQUIRE(fe.remove(f));
        REQUIRE(fe.remove(root + "/layout-1/shard-001"));
        auto report = check_data_directory(fe, root, true);
        REQUIRE(report);
        CHECK(report->outcome() == check_report::verdict::damaged);
        CHECK(report->shards[1].findings[0].kind == finding_kind::missing_shard_directory);
        CHECK_FALSE(open_layout(fe, root, 2, owner_by_first_byte, [](const std::string&) {}));
    }
    SUBCASE("a FORMAT of another data format version") {
        make_data_directory(fe, 1);
        fe.write_file(root + "/FORMAT", "percore-data 9\nlayout 1\nshards 1\n");
        auto report = check_data_directory(fe, root, false);
        REQUIRE(report);
        CHECK(report->outcome() == check_report::verdict::damaged);
        REQUIRE(report->format_damage.size() == 1);
        CHECK(report->format_damage[0].find("incompatible") != std::string::npos);
    }
    SUBCASE("an empty directory") {
        auto report = check_data_directory(fe, root, true);
        REQUIRE_FALSE(report);
        CHECK(report.error().find("no FORMAT") != std::string::npos);
        CHECK(fe.files().empty());
    }
}

TEST_CASE("the report names every damaged record with its file and offset, one line per shard, the verdict last") {
    fault_env fe(32);
    REQUIRE(fe.create_directory(root));
    make_data_directory(fe, 2);
    const std::string seg = root + "/layout-1/shard-001/" + segment_file_name(1);
    const record_at doc = record_for(records_of(fe, seg), "doc1");
    flip_byte(fe, seg, doc.offset + 20);
    auto report = check_data_directory(fe, root, false);
    REQUIRE(report);
    const auto lines = report_lines(*report);
    REQUIRE(lines.size() == 5);  // the header, shard 000, shard 001 and its damage, the verdict
    CHECK(lines[1].starts_with("shard 000: 1 document (5 bytes) in "));
    CHECK(lines[1].ends_with("; clean"));
    CHECK(lines[2].ends_with("; damaged"));
    CHECK(lines[3] == "shard 001: damaged: segment " + seg + " has a damaged record at byte " +
                          std::to_string(doc.offset) + " with valid records after it (bit rot?)");
    CHECK(lines[4].starts_with("percore check: damaged (1 of 2 shards)"));
}
