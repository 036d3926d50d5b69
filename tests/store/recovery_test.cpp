// Recovery of one shard's store from damaged segment files (store/recovery.hpp, docs/store-format.md
// "Recovery"), through shard_store::recover() on a fault_env (and once on the real file system).
#include <doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "store/log_format.hpp"
#include "store/newest_segment.hpp"
#include "store/segment_reader.hpp"
#include "store/shard_store.hpp"
#include "store_test_util.hpp"
#include "tests/store/durability_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

const std::string dir = "/data/shard-000";

void make_dirs(env& e, const std::string& d = dir) {
    auto parent = d.substr(0, d.rfind('/'));
    REQUIRE(e.create_directory(parent));
    REQUIRE(e.create_directory(d));
    REQUIRE(e.sync_directory(parent));
}

std::string value_of_key(shard_store& s, const std::string& key) { return current_value(s, key); }

}  // namespace

TEST_CASE("a flipped byte in the last record with no commit mark after it is cut away like a torn write, and writes after the restart survive the next") {
    // The one case recovery cannot tell from a torn batch: a crash within commit_mark_idle of the
    // last batch's sync, before its mark was written (modelled by cutting the clean stop's mark).
    live_document_guard guard;
    fault_env fe(1);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    auto a = write_one(**s, put_op("a", "value a"));
    auto b = write_one(**s, put_op("b", "value b"));
    write_one(**s, put_op("c", "value c"));
    s.reset();

    const std::string seg = segment_path(dir, 1);
    auto records = records_of(fe, seg);
    const record_at& c = record_for(records, "c");
    REQUIRE(c.end + commit_mark_bytes == fe.contents(seg)->size());
    fe.write_file(seg, fe.contents(seg)->substr(0, c.end));
    flip_byte(fe, seg, c.end - 2);  // in c's value

    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    CHECK(s->stats->truncated_bytes == c.end - c.offset);
    CHECK(fe.contents(seg)->size() == c.offset);
    CHECK(fe.durable_contents(seg)->size() == c.offset);  // the cut is synced
    CHECK(value_of_key(**s, "a") == "value a");
    CHECK(value_of_key(**s, "b") == "value b");
    CHECK((*s)->current()->find("c") == nullptr);

    auto d = write_one(**s, put_op("d", "value d"));
    auto e = write_one(**s, put_op("e", "value e"));
    CHECK(d.version > b.version);
    s.reset();
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    CHECK(s->stats->truncated_bytes == 0);
    CHECK((*s)->current()->document_count() == 4);
    CHECK((*s)->current()->find("a")->version() == a.version);
    CHECK(value_of_key(**s, "d") == "value d");
    CHECK((*s)->current()->find("e")->version() == e.version);
    CHECK((*s)->current()->find("c") == nullptr);
}

TEST_CASE("a flipped byte in the last record of the newest segment refuses recovery once a commit mark follows it") {
    live_document_guard guard;
    fault_env fe(21);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    for (std::string k : {"a", "b", "c"}) write_one(**s, put_op(k, "value " + k));
    s.reset();  // a clean stop marks the last batch

    const std::string seg = segment_path(dir, 1);
    auto records = records_of(fe, seg);
    const record_at& c = record_for(records, "c");
    const auto size = fe.contents(seg)->size();
    REQUIRE(c.end + commit_mark_bytes == size);
    for (std::uint64_t at : {c.end - 2, c.offset + 4}) {  // in c's value; in its length field
        CAPTURE(at);
        fault_env damaged(22);
        make_dirs(damaged);
        damaged.write_file(seg, *fe.contents(seg));
        flip_byte(damaged, seg, at);
        auto again = open_store(damaged, dir);
        REQUIRE_FALSE(again->error.empty());
        CHECK(again->error.find(seg) != std::string::npos);
        CHECK(again->error.find("byte " + std::to_string(c.offset)) != std::string::npos);
        CHECK(damaged.contents(seg)->size() == size);  // nothing cut
    }
}

TEST_CASE("a damaged record whose length claims the rest of the file still refuses recovery when a commit mark lies in it") {
    // The length and the value length hit together keep the header consistent while claiming
    // a record that runs past the end of the file: only the mark's fixed bytes find the mark.
    live_document_guard guard;
    fault_env fe(23);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    for (std::string k : {"a", "b"}) write_one(**s, put_op(k, "value " + k));
    s.reset();
    const std::string seg = segment_path(dir, 1);
    auto records = records_of(fe, seg);
    const record_at& b = record_for(records, "b");
    std::string bytes = *fe.contents(seg);
    REQUIRE(b.end + commit_mark_bytes == bytes.size());
    const std::uint32_t more = 1000;
    auto add_le32 = [&](std::uint64_t at, std::uint32_t n) {
        std::uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v |= std::uint32_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
        v += n;
        for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
    };
    add_le32(b.offset + 4, more);   // body length
    add_le32(b.offset + 24, more);  // value length
    fe.write_file(seg, bytes);
    s = open_store(fe, dir);
    REQUIRE_FALSE(s->error.empty());
    CHECK(s->error.find("byte " + std::to_string(b.offset)) != std::string::npos);

    // the same damage with the mark gone (a crash before it was written) is a torn tail
    fe.write_file(seg, bytes.substr(0, b.end));
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    CHECK(s->stats->truncated_bytes == b.end - b.offset);
}

TEST_CASE("a flipped byte in a middle record with good records after it refuses recovery, naming the file and offset") {
    live_document_guard guard;
    fault_env fe(2);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    for (std::string k : {"a", "b", "c"}) write_one(**s, put_op(k, "value " + k));
    s.reset();

    const std::string seg = segment_path(dir, 1);
    auto records = records_of(fe, seg);
    const record_at& b = record_for(records, "b");
    const auto size = fe.contents(seg)->size();
    flip_byte(fe, seg, b.end - 1);

    s = open_store(fe, dir);
    REQUIRE_FALSE(s->error.empty());
    CHECK(s->error.find(seg) != std::string::npos);
    CHECK(s->error.find("byte " + std::to_string(b.offset)) != std::string::npos);
    CHECK(fe.contents(seg)->size() == size);  // nothing cut
    CHECK((*s)->current()->document_count() == 0);  // nothing published
}

TEST_CASE("a segment cut at every byte of its last batch recovers exactly the records before the cut") {
    // Build a segment: one batch (a, b), then a last batch of three records (c, tombstone of a, d).
    std::string bytes;
    std::vector<record_at> records;
    {
        fault_env fe(3);
        make_dirs(fe);
        auto s = open_store(fe, dir);
        std::vector<write_op> first;
        first.push_back(put_op("a", "value a"));
        first.push_back(put_op("b", "value b"));
        write_all(**s, std::move(first));
        std::vector<write_op> last;
        last.push_back(put_op("c", std::string(100, 'c')));
        last.push_back(erase_op("a"));
        last.push_back(put_op("d", ""));
        write_all(**s, std::move(last));
        s.reset();
        bytes = *fe.contents(segment_path(dir, 1));
        records = records_of(fe, segment_path(dir, 1));
    }
    REQUIRE(records.size() == 5);
    const std::uint64_t batch_start = records[2].offset;
    REQUIRE(records[4].end + commit_mark_bytes == bytes.size());
    bytes.resize(records[4].end);  // a crash cuts the last batch before its commit mark is written

    for (std::uint64_t cut = batch_start; cut <= bytes.size(); ++cut) {
        for (bool zeros : {false, true}) {
            // the file ends at `cut`, or (zeros) keeps its length with zeros from `cut` on
            CAPTURE(cut);
            CAPTURE(zeros);
            live_document_guard guard;
            fault_env fe(4);
            make_dirs(fe);
            std::string torn = bytes.substr(0, cut);
            if (zeros) torn.resize(bytes.size(), '\0');
            fe.write_file(segment_path(dir, 1), torn);
            auto s = open_store(fe, dir);
            REQUIRE(s->error.empty());
            std::uint64_t valid = batch_start;
            for (const auto& r : records)
                if (r.end <= cut) valid = std::max(valid, r.end);
            CHECK(fe.contents(segment_path(dir, 1))->size() == valid);
            CHECK(s->stats->truncated_bytes == torn.size() - valid);
            const snapshot& snap = *(*s)->current();
            CHECK(value_of_key(**s, "b") == "value b");
            CHECK((snap.find("c") != nullptr) == (cut >= records[2].end));
            CHECK((snap.find("a") != nullptr) == (cut < records[3].end));
            CHECK((snap.find("d") != nullptr) == (cut >= records[4].end));
        }
    }
}

// A file named like a segment that is not one of ours: a segment whose header is damaged but whose
// records are there, or a large file of something else, is refused, naming it (docs/store-format.md:
// "a segment header that is not ours"). Nothing is removed.
TEST_CASE("a file named like a segment that is not ours refuses recovery, naming the file") {
    live_document_guard guard;
    std::string big(2 << 20, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + 3);

    fault_env fe(5);
    make_dirs(fe);
    auto s = open_store(fe, dir, {0, true, 64, 1});  // one batch per segment
    write_one(**s, put_op("a", "value a"));
    write_one(**s, put_op("b", "value b"));
    write_one(**s, put_op("c", "value c"));
    s.reset();
    const auto files = segment_files(fe, dir);
    REQUIRE(files.size() == 3);

    SUBCASE("a segment with a damaged header and its records intact, in the middle") {
        fe.overwrite(files[1], 0, "XXXX");
        s = open_store(fe, dir);
        CHECK(s->error.find(files[1]) != std::string::npos);
        CHECK(s->error.find("not a percore segment") != std::string::npos);
    }
    SUBCASE("the same as the last segment") {
        fe.overwrite(files[2], 0, "XXXX");
        s = open_store(fe, dir);
        CHECK(s->error.find(files[2]) != std::string::npos);
    }
    SUBCASE("a large foreign file before and after the segments") {
        for (std::uint64_t id : {std::uint64_t{0}, std::uint64_t{99}}) {
            CAPTURE(id);
            fe.write_file(segment_path(dir, id), big);
            s = open_store(fe, dir);
            CHECK(s->error.find(segment_path(dir, id)) != std::string::npos);
            CHECK(fe.contents(segment_path(dir, id)) == big);
            REQUIRE(fe.remove(segment_path(dir, id)));
        }
        s = open_store(fe, dir);
        CHECK(s->error.empty());
    }
    CHECK(segment_files(fe, dir).size() == 3);
}

// store/recovery.hpp: "a segment whose header is not valid and in which no record can be found (a
// crash while creating it): removed; it cannot hold anything acknowledged" - wherever it is. (Note:
// docs/store-format.md still says only a last segment of at most 32 bytes is removed, and that a
// header that is not ours refuses to start; a small file of garbage named like a segment is now
// removed instead.)
TEST_CASE("a small file named like a segment with no header and no record in it is removed") {
    live_document_guard guard;
    std::string garbage(200, '\0');
    for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 7 + 3);
    fault_env fe(6);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    auto a = write_one(**s, put_op("a", "value a"));
    s.reset();
    fe.write_file(segment_path(dir, 50), garbage);
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    CHECK_FALSE(fe.exists(segment_path(dir, 50)));
    CHECK((*s)->current()->find("a")->version() == a.version);
}

TEST_CASE("files whose names are not segment names are left alone") {
    live_document_guard guard;
    fault_env fe(7);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    write_one(**s, put_op("a", "value a"));
    s.reset();
    for (std::string name : {"notes.txt", "0000000000000002.seg.tmp", "000000000000000G.seg", "00000000000002.seg",
                             "0000000000000003.SEG"})
        fe.write_file(dir + "/" + name, "garbage");
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    CHECK(value_of_key(**s, "a") == "value a");
    CHECK(fe.contents(dir + "/notes.txt") == "garbage");
    CHECK(fe.files().size() == 7);   // the five, the segment, and newest_segment
}

// Since 771291e every new segment begins with the list of the older segments that exist, and
// recovery refuses to start when one the newest list names is missing. (Before, the gap went
// unnoticed: the missing segment's documents were lost silently and a key deleted by a tombstone in
// it came back with its older value.)
TEST_CASE("a missing middle segment refuses recovery, naming it") {
    live_document_guard guard;
    fault_env fe(8);
    make_dirs(fe);
    auto s = open_store(fe, dir, {0, true, 64, 1});  // one batch per segment
    write_one(**s, put_op("old", "v1"));
    write_one(**s, put_op("lost", "v2"));
    write_one(**s, erase_op("old"));
    write_one(**s, put_op("kept", "v3"));
    s.reset();
    const auto files = segment_files(fe, dir);
    REQUIRE(files.size() == 4);

    SUBCASE("one in the middle") {
        REQUIRE(fe.remove(files[1]));
        s = open_store(fe, dir);
        CHECK(s->error.find(files[1]) != std::string::npos);
        CHECK(s->error.find("missing") != std::string::npos);
    }
    SUBCASE("two in the middle, one holding a tombstone") {
        REQUIRE(fe.remove(files[1]));
        REQUIRE(fe.remove(files[2]));
        s = open_store(fe, dir);
        CHECK_FALSE(s->error.empty());
        CHECK((*s)->current()->find("old") == nullptr);  // nothing was published
    }
    SUBCASE("the oldest") {
        REQUIRE(fe.remove(files[0]));
        s = open_store(fe, dir);
        CHECK(s->error.find(files[0]) != std::string::npos);
    }
}

// The NEWEST segment is listed by no segment; the shard's newest_segment file names it
// (newest_segment.hpp), so its loss is refused instead of losing its acknowledged writes silently.
TEST_CASE("a missing newest segment is detected: recovery refuses instead of starting without its writes") {
    live_document_guard guard;
    fault_env fe(13);
    make_dirs(fe);
    auto s = open_store(fe, dir, {0, true, 64, 1});
    write_one(**s, put_op("a", "v1"));
    write_one(**s, put_op("b", "v2"));
    s.reset();
    const auto files = segment_files(fe, dir);
    REQUIRE(files.size() == 2);
    REQUIRE(fe.remove(files[1]));
    s = open_store(fe, dir);
    CHECK(s->error.find("segment " + files[1] + " is missing") != std::string::npos);
}

TEST_CASE("a last segment of at most 32 bytes, whose header never reached the disk, is removed") {
    char header[segment_header_bytes];
    encode_segment_header(header, 0, 2);
    for (std::size_t size : {0, 1, 8, 31, 32}) {
        for (bool zeros : {false, true}) {
            if (size == 32 && !zeros) continue;  // a whole header: an empty segment, not a torn one
            CAPTURE(size);
            CAPTURE(zeros);
            live_document_guard guard;
            fault_env fe(9);
            make_dirs(fe);
            auto s = open_store(fe, dir);
            auto a = write_one(**s, put_op("a", "value a"));
            s.reset();
            fe.write_file(segment_path(dir, 2), zeros ? std::string(size, '\0') : std::string(header, size));

            s = open_store(fe, dir);
            REQUIRE(s->error.empty());
            CHECK_FALSE(fe.exists(segment_path(dir, 2)));
            CHECK(s->stats->next_segment_id >= 3);
            CHECK((*s)->current()->find("a")->version() == a.version);
            auto b = write_one(**s, put_op("b", "value b"));
            s.reset();
            s = open_store(fe, dir);
            REQUIRE(s->error.empty());
            CHECK((*s)->current()->find("b")->version() == b.version);
            CHECK(value_of_key(**s, "a") == "value a");
        }
    }
}

TEST_CASE("versions continue above the highest recovered one, a tombstone's included") {
    live_document_guard guard;
    fault_env fe(10);
    make_dirs(fe);
    auto s = open_store(fe, dir, {0, true, 64ull << 20, 100});
    auto a = write_one(**s, put_op("a", "1"));
    auto b = write_one(**s, put_op("b", "2"));
    auto gone = write_one(**s, erase_op("a"));
    REQUIRE(a.version == 100);
    REQUIRE(gone.version == 102);
    s.reset();

    s = open_store(fe, dir, {0, true, 64ull << 20, 1});
    REQUIRE(s->error.empty());
    CHECK(s->stats->max_version == gone.version);
    CHECK((*s)->next_version() == gone.version + 1);
    auto again = write_one(**s, put_op("a", "3"));
    CHECK(again.outcome == write_outcome::created);
    CHECK(again.version == gone.version + 1);
    CHECK((*s)->current()->find("b")->version() == b.version);
    s.reset();

    // a first_version above every recovered one wins
    s = open_store(fe, dir, {0, true, 64ull << 20, 5000});
    REQUIRE(s->error.empty());
    CHECK((*s)->next_version() == 5000);
}

// A torn write whose kept bytes end in zeros (the file's size reached the disk before its data) is
// what a power cut leaves. If the damaged record's value happens to contain the bytes of an encoded
// record (a document that stores a percore segment, a backup, a log...), segment_reader finds that
// "valid record after the damage" and calls the tail corrupt: recovery refuses to start after a
// plain power cut (SPEC §3, docs/store-format.md: only bit rot should refuse).
// BUG (store/segment_reader.cpp, classify_damage/valid_record_after): the search for a valid record
// after the damage also looks inside the damaged record's own claimed extent; a record that starts
// inside it cannot prove bit rot.
TEST_CASE("a zero-filled torn tail inside a value that holds an encoded record is cut, not refused") {
    live_document_guard guard;
    std::string inner;
    encode_record(inner, record_kind::put, 7, std::string("app\0x", 5), "text/plain", "an embedded record");
    std::string value = "backup:" + inner + std::string(2000, 'p');

    fault_env fe(11);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    auto a = write_one(**s, put_op("a", "value a"));
    std::vector<write_op> last;
    last.push_back(put_op("backup", value));
    last.push_back(put_op("z", std::string(50, 'z')));
    write_all(**s, std::move(last));
    s.reset();

    // The power cut kept the whole length of the last batch, but from the middle of the backup's
    // value on only zeros.
    const std::string seg = segment_path(dir, 1);
    auto records = records_of(fe, seg);
    const record_at& backup = record_for(records, "backup");
    const std::uint64_t zero_from = backup.end - 1000;  // after the embedded record
    const auto size = fe.contents(seg)->size();
    fe.overwrite(seg, zero_from, std::string(size - zero_from, '\0'));

    s = open_store(fe, dir);
    CHECK(s->error.empty());  // BUG: "... has a damaged record at byte N with valid records after it"
    if (s->error.empty()) {
        CHECK((*s)->current()->find("a")->version() == a.version);
        CHECK((*s)->current()->find("backup") == nullptr);
        CHECK(fe.contents(seg)->size() == backup.offset);
    }
}

// A crash while a segment was created, then another one right after the next start created the
// following segment: recovery removes the torn-header segment without syncing the directory, so the
// second power cut can undo that removal while keeping the newer segment. The torn segment is then no
// longer the last one. Until 771291e recovery refused to start here (found by the crash test, seeds
// 205, 416, 766 at 2829f2f); now a segment with a bad header and no record in it is removed wherever
// it is.
TEST_CASE("a torn-header segment removed by recovery stays removed when the power goes out again") {
    // Seeds decide which pending directory changes the second power cut keeps; some keep the
    // creation of segment 3 and undo the removal of segment 2.
    int resurrected = 0;
    for (std::uint64_t seed = 1; seed <= 16; ++seed) {
        CAPTURE(seed);
        live_document_guard guard;
        fault_env fe(12);
        make_dirs(fe);
        auto s = open_store(fe, dir);
        auto a = write_one(**s, put_op("a", "value a"));
        s.reset();
        // a crash while segment 2 was being created: its name reached the disk, its header did not
        fe.write_file(segment_path(dir, 2), "");

        crash_env ce(fe);
        // 1: recovery removes segment 2; 2: the log creates segment 3; 3: its header: the power goes out
        ce.arm(3, power_cut_kind{true, seed, 0, false});
        s = open_store(ce, dir);
        REQUIRE(s->error.empty());
        REQUIRE_FALSE(fe.exists(segment_path(dir, 2)));
        (*s)->submit(put_op("b", "never acknowledged"));
        std::vector<write_result> done;
        (*s)->advance_batches(done);
        wait_for_log(**s);
        REQUIRE(ce.crashed());
        (*s)->advance_batches(done);  // the failed append's answer (not an acknowledgement)
        s.reset();
        resurrected += fe.exists(segment_path(dir, 2)) && fe.exists(segment_path(dir, 3));

        s = open_store(fe, dir);
        CHECK(s->error.empty());
        if (s->error.empty()) CHECK((*s)->current()->find("a")->version() == a.version);
    }
    MESSAGE(resurrected << " of 16 power cuts brought the removed segment back next to a newer one");
}

// A segment whose creation failed is removed by the log (shard_log::open_next_segment), which then
// goes on appending to the previous segment; that removal is not synced. A power cut can bring the
// empty (or partly written) new segment back while the previous segment ends in a torn batch.
// Recovery calls that a torn OLDER segment ("cut short ... newer segments follow it") and refuses
// to start, although every newer segment holds no record and would be removed as such.
// BUG (store/recovery.cpp): `last` is decided before the record-less newer segments are set aside.
// Found by the crash test with injected failures (PERCORE_CRASH_SEEDS=6000: seeds 3906, 4428, 5946).
TEST_CASE("a torn tail followed only by segments that never got a header is cut, not refused") {
    live_document_guard guard;
    char header[segment_header_bytes];
    encode_segment_header(header, 0, 2);
    for (std::string leftover : {std::string(), std::string(header, 20), std::string(header, sizeof header)}) {
        CAPTURE(leftover.size());
        fault_env fe(14);
        make_dirs(fe);
        auto s = open_store(fe, dir);
        auto a = write_one(**s, put_op("a", "value a"));
        s.reset();
        const std::string seg = segment_path(dir, 1);
        const auto size = fe.contents(seg)->size();
        std::string torn;
        encode_record(torn, record_kind::put, 99, "b", "text/plain", std::string(300, 'b'));
        fe.write_file(seg, *fe.contents(seg) + torn.substr(0, 100));  // the batch in flight, torn
        fe.write_file(segment_path(dir, 2), leftover);                  // the failed creation, back
        if (leftover.size() == sizeof header) continue;  // a whole header would make it a real segment
        s = open_store(fe, dir);
        CHECK(s->error.empty());  // BUG: "segment .../0000000000000001.seg is cut short at byte N but newer segments follow it"
        if (s->error.empty()) {
            CHECK(fe.contents(seg)->size() == size);
            CHECK_FALSE(fe.exists(segment_path(dir, 2)));
            CHECK((*s)->current()->find("a")->version() == a.version);
        }
    }
}

TEST_CASE("a torn tail on a real file is cut at recovery and writes after the restart survive the next") {
    live_document_guard guard;
    char pattern[] = "/tmp/percore-recovery-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    const std::string root = pattern;
    const std::string d = root + "/shard-000";
    env& e = posix_env();
    REQUIRE(e.create_directory(d));

    auto s = open_store(e, d);
    auto a = write_one(**s, put_op("a", "value a"));
    auto b = write_one(**s, put_op("b", std::string(5000, 'b')));
    s.reset();
    const std::string seg = segment_path(d, 1);
    const auto size = std::filesystem::file_size(seg);
    {
        std::string torn;
        encode_record(torn, record_kind::put, 99, "c", "text/plain", std::string(300, 'c'));
        std::ofstream out(seg, std::ios::binary | std::ios::app);
        out.write(torn.data(), 150);  // half a record
    }
    s = open_store(e, d);
    REQUIRE(s->error.empty());
    CHECK(s->stats->truncated_bytes == 150);
    CHECK(std::filesystem::file_size(seg) == size);
    CHECK((*s)->current()->find("c") == nullptr);
    auto c = write_one(**s, put_op("c", "value c"));
    s.reset();
    s = open_store(e, d);
    REQUIRE(s->error.empty());
    CHECK((*s)->current()->find("a")->version() == a.version);
    CHECK((*s)->current()->find("b")->version() == b.version);
    CHECK(value_of_key(**s, "b") == std::string(5000, 'b'));
    CHECK((*s)->current()->find("c")->version() == c.version);
    s.reset();
    std::filesystem::remove_all(root);
}

TEST_CASE("recovery makes the documents it reads, small and in the file, in the store's pool") {
    live_document_guard guard;
    fault_env fe(1);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    write_one(**s, put_op("small", "value"));
    write_one(**s, put_op("large", std::string(file_value_min_bytes, 'v')));
    s.reset();
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    const document* small = (*s)->current()->find("small");
    const document* large = (*s)->current()->find("large");
    REQUIRE(small);
    REQUIRE(large);
    CHECK(small->pooled());
    CHECK(large->pooled());
    CHECK(large->in_file());
    CHECK(current_value(**s, "large") == std::string(file_value_min_bytes, 'v'));
}

TEST_CASE("a recovered document a reader retained goes back to the store's pool from the reader's thread") {
    live_document_guard guard;
    fault_env fe(1);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    const std::string value(20 * 1024, 'v');  // sent by reference: a reader may retain it
    write_one(**s, put_op("doc", value));
    s.reset();
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    const document* held = (*s)->current()->find("doc");
    REQUIRE(held);
    CHECK(held->pooled());  // the header is the pool's, the value a buffer of its own
    held->retain();
    write_one(**s, put_op("doc", "replaced"));
    (*s)->reclaim();
    const std::size_t live = (*s)->document_memory().live();
    std::thread([held, &value] {
        CHECK(held->value() == value);
        held->release();
    }).join();
    CHECK((*s)->document_memory().live() == live);  // returned, taken back at the next allocation
    write_one(**s, put_op("other", "v"));
    CHECK((*s)->document_memory().live() == live);  // one taken back, one made
}

// Same versions on every board (shard_store.hpp "Versions"): copies come back from the log with
// their primary's ETag version, and the store's own versions continue above it.
TEST_CASE("recovery restores a copy's ETag version and hands out versions above it") {
    live_document_guard guard;
    fault_env fe(11);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    auto copied = write_one(**s, copy_op("copied", "from the primary", 900000));
    REQUIRE(copied.outcome == write_outcome::created);
    const std::uint64_t local = (*s)->current()->find("copied")->version();
    REQUIRE(local < 900000);
    s.reset();
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    const document* d = (*s)->current()->find("copied");
    REQUIRE(d);
    CHECK(d->etag_version() == 900000);
    CHECK(d->version() == local);
    CHECK(value_of_key(**s, "copied") == "from the primary");
    CHECK((*s)->next_version() > 900000);
    CHECK(write_one(**s, put_op("mine", "v")).version > 900000);
}

TEST_CASE("a copy's value large enough to live in the file is read back right, before and after a restart") {
    live_document_guard guard;
    fault_env fe(12);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    std::string large(file_value_min_bytes + 123, '\0');
    for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>('a' + i % 23);
    write_one(**s, put_op("before", "a put first, so the copy's record does not start the batch"));
    REQUIRE(write_one(**s, copy_op("large", large, 777777)).outcome == write_outcome::created);
    const document* d = (*s)->current()->find("large");
    REQUIRE(d);
    CHECK(d->in_file());  // read from the copy record's value, 8 bytes after a put's
    CHECK(value_of_key(**s, "large") == large);
    std::string read;
    REQUIRE((*s)->read_value(*d, read));
    CHECK(read == large);
    s.reset();
    s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    d = (*s)->current()->find("large");
    REQUIRE(d);
    CHECK(d->in_file());
    CHECK(d->etag_version() == 777777);
    CHECK(value_of_key(**s, "large") == large);
}

TEST_CASE("the newest segment deleted is refused, naming it, though the older segments are whole") {
    live_document_guard guard;
    fault_env fe(1);
    make_dirs(fe);
    store_options o;
    o.segment_target_bytes = 200;   // a segment per batch or two
    auto s = open_store(fe, dir, o);
    for (int i = 0; i < 8; ++i) write_one(**s, put_op("k" + std::to_string(i), std::string(120, 'v')));
    s.reset();
    auto newest = read_newest_segment(fe, dir);
    REQUIRE(newest);
    REQUIRE(newest->has_value());
    const std::uint64_t id = **newest;
    REQUIRE(id >= 3);
    REQUIRE(fe.exists(segment_path(dir, id)));

    REQUIRE(fe.remove(segment_path(dir, id)));
    s = open_store(fe, dir, o);
    CHECK(s->error.find("segment " + segment_path(dir, id) + " is missing") != std::string::npos);

    REQUIRE(fe.remove(segment_path(dir, id - 1)));   // the newest two gone: the first missing is named
    s = open_store(fe, dir, o);
    CHECK(s->error.find("segment " + segment_path(dir, id - 1) + " to " + segment_file_name(id) + " is missing") !=
          std::string::npos);
}

TEST_CASE("a directory without a newest_segment file recovers as before, and a damaged one is refused") {
    live_document_guard guard;
    fault_env fe(1);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    write_one(**s, put_op("a", "value a"));
    s.reset();
    const std::string file = dir + "/" + newest_segment_file_name;
    const std::string kept = *fe.contents(file);
    REQUIRE(fe.remove(file));
    s = open_store(fe, dir);
    CHECK(s->error.empty());
    CHECK(value_of_key(**s, "a") == "value a");
    s.reset();
    std::string damaged = kept;
    damaged[9] ^= 0x01;
    fe.write_file(file, damaged);
    s = open_store(fe, dir);
    CHECK(s->error.find(file + " is damaged") != std::string::npos);
}
