#include <doctest.h>

#include <cerrno>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "store/crc32c.hpp"
#include "store/log_format.hpp"
#include "store/segment_reader.hpp"
#include "tests/store/fault_env.hpp"

using namespace percore::store;
using percore::store::testing::fault_env;
using percore::store::testing::fault_op;

namespace {

const std::string seg_path = "/data/shard-000/00000001.seg";

struct built_segment {
    std::string bytes;
    std::vector<std::uint64_t> offsets;  // where each record starts
};

std::string segment_header_bytes_for(std::uint32_t shard, std::uint64_t id) {
    char h[segment_header_bytes];
    encode_segment_header(h, shard, id);
    return std::string(h, sizeof h);
}

built_segment build(int records, std::size_t value_bytes = 20) {
    built_segment s;
    s.bytes = segment_header_bytes_for(0, 1);
    for (int i = 0; i < records; ++i) {
        s.offsets.push_back(s.bytes.size());
        if (i % 4 == 3)
            encode_record(s.bytes, record_kind::tombstone, 100 + i, "k" + std::to_string(i), "", "");
        else
            encode_record(s.bytes, record_kind::put, 100 + i, "k" + std::to_string(i), "text/plain",
                          std::string(value_bytes, static_cast<char>('a' + i % 26)));
    }
    return s;
}

struct read_result {
    std::vector<std::uint64_t> versions;
    std::vector<std::uint64_t> offsets;
    segment_reader::end_state end = segment_reader::end_state::none;
    std::uint64_t valid_bytes = 0;
    int error = 0;
};

read_result read_all(env& e, const std::string& path = seg_path) {
    auto reader = segment_reader::open(e, path);
    REQUIRE(reader.has_value());
    read_result out;
    record_view r;
    std::uint64_t offset = 0;
    while (reader->next(r, offset)) {
        out.versions.push_back(r.version);
        out.offsets.push_back(offset);
    }
    out.end = reader->end();
    out.valid_bytes = reader->valid_bytes();
    out.error = reader->error();
    return out;
}

}  // namespace

TEST_CASE("a segment that ends after its last record reads back clean") {
    fault_env e;
    const built_segment s = build(10);
    e.write_file(seg_path, s.bytes);
    auto reader = segment_reader::open(e, seg_path);
    REQUIRE(reader.has_value());
    CHECK(reader->header().shard == 0);
    CHECK(reader->header().segment_id == 1);
    record_view r;
    std::uint64_t offset = 0;
    for (int i = 0; i < 10; ++i) {
        REQUIRE(reader->next(r, offset));
        CHECK(offset == s.offsets[i]);
        CHECK(r.version == 100u + i);
        CHECK(r.key == "k" + std::to_string(i));
        CHECK(r.kind == (i % 4 == 3 ? record_kind::tombstone : record_kind::put));
    }
    CHECK_FALSE(reader->next(r, offset));
    CHECK(reader->end() == segment_reader::end_state::clean);
    CHECK(reader->valid_bytes() == s.bytes.size());
    CHECK(reader->file_bytes() == s.bytes.size());
    CHECK(reader->error() == 0);
}

TEST_CASE("a segment with only its header is clean with nothing in it") {
    fault_env e;
    e.write_file(seg_path, segment_header_bytes_for(3, 9));
    const read_result got = read_all(e);
    CHECK(got.versions.empty());
    CHECK(got.end == segment_reader::end_state::clean);
    CHECK(got.valid_bytes == segment_header_bytes);
}

TEST_CASE("a missing segment file is ENOENT") {
    fault_env e;
    auto reader = segment_reader::open(e, seg_path);
    REQUIRE_FALSE(reader.has_value());
    CHECK(reader.error() == ENOENT);
}

TEST_CASE("a file too short for a segment header is EBADMSG") {
    fault_env e;
    const std::string header = segment_header_bytes_for(0, 1);
    for (std::size_t cut = 0; cut < header.size(); ++cut) {
        e.write_file(seg_path, header.substr(0, cut));
        auto reader = segment_reader::open(e, seg_path);
        REQUIRE_FALSE(reader.has_value());
        CHECK(reader.error() == EBADMSG);
    }
}

TEST_CASE("a file with a foreign header is EBADMSG") {
    fault_env e;
    built_segment s = build(3);
    s.bytes[5] = 'X';
    e.write_file(seg_path, s.bytes);
    auto reader = segment_reader::open(e, seg_path);
    REQUIRE_FALSE(reader.has_value());
    CHECK(reader.error() == EBADMSG);
}

TEST_CASE("the last record cut at any byte is a torn tail ending at the record before it") {
    fault_env e;
    const built_segment s = build(5);
    const std::uint64_t last = s.offsets.back();
    for (std::uint64_t cut = last; cut < s.bytes.size(); ++cut) {
        CAPTURE(cut);
        e.write_file(seg_path, std::string_view(s.bytes).substr(0, cut));
        const read_result got = read_all(e);
        CHECK(got.versions.size() == 4);
        CHECK(got.valid_bytes == last);
        CHECK(got.end == (cut == last ? segment_reader::end_state::clean : segment_reader::end_state::torn_tail));
    }
}

TEST_CASE("a file cut inside an earlier record keeps the records before the cut") {
    fault_env e;
    const built_segment s = build(6);
    e.write_file(seg_path, std::string_view(s.bytes).substr(0, s.offsets[2] + 40));
    const read_result got = read_all(e);
    CHECK(got.versions == std::vector<std::uint64_t>{100, 101});
    CHECK(got.end == segment_reader::end_state::torn_tail);
    CHECK(got.valid_bytes == s.offsets[2]);
}

TEST_CASE("a zero-filled tail after the records, as from preallocation, is a torn tail") {
    fault_env e;
    const built_segment s = build(5);
    for (std::size_t zeros : {1u, 31u, 32u, 33u, 4096u, 3u << 20}) {
        CAPTURE(zeros);
        e.write_file(seg_path, s.bytes + std::string(zeros, '\0'));
        const read_result got = read_all(e);
        CHECK(got.versions.size() == 5);
        CHECK(got.end == segment_reader::end_state::torn_tail);
        CHECK(got.valid_bytes == s.bytes.size());
    }
}

TEST_CASE("random bytes after the records with no valid record among them are a torn tail") {
    fault_env e;
    const built_segment s = build(5);
    std::mt19937_64 rng(11);
    std::string garbage(100000, '\0');
    for (auto& c : garbage) c = static_cast<char>(rng());
    e.write_file(seg_path, s.bytes + garbage);
    const read_result got = read_all(e);
    CHECK(got.versions.size() == 5);
    CHECK(got.end == segment_reader::end_state::torn_tail);
    CHECK(got.valid_bytes == s.bytes.size());
}

TEST_CASE("a flipped byte in a middle record followed by good records is corrupt") {
    const built_segment s = build(7);
    const std::uint64_t start = s.offsets[3];
    const std::uint64_t end = s.offsets[4];
    for (std::uint64_t at = start; at < end; ++at) {
        CAPTURE(at);
        fault_env e;
        std::string damaged = s.bytes;
        damaged[at] = static_cast<char>(damaged[at] ^ 0x40);
        e.write_file(seg_path, damaged);
        const read_result got = read_all(e);
        CHECK(got.versions == std::vector<std::uint64_t>{100, 101, 102});
        CHECK(got.end == segment_reader::end_state::corrupt);
        CHECK(got.valid_bytes == start);
    }
}

TEST_CASE("a flipped byte in the last record is a torn tail, as a torn write would look") {
    const built_segment s = build(5);
    const std::uint64_t last = s.offsets.back();
    for (std::uint64_t at = last; at < s.bytes.size(); ++at) {
        CAPTURE(at);
        fault_env e;
        std::string damaged = s.bytes;
        damaged[at] = static_cast<char>(damaged[at] ^ 0x01);
        e.write_file(seg_path, damaged);
        const read_result got = read_all(e);
        CHECK(got.versions.size() == 4);
        CHECK(got.end == segment_reader::end_state::torn_tail);
        CHECK(got.valid_bytes == last);
    }
}

TEST_CASE("a damaged record followed by a zero-filled tail is a torn tail") {
    fault_env e;
    built_segment s = build(5);
    s.bytes[s.offsets[4] + 33] ^= 0x7F;
    e.write_file(seg_path, s.bytes + std::string(8192, '\0'));
    const read_result got = read_all(e);
    CHECK(got.versions.size() == 4);
    CHECK(got.end == segment_reader::end_state::torn_tail);
    CHECK(got.valid_bytes == s.offsets[4]);
}

TEST_CASE("a 3 MiB value spanning buffer refills reads back whole between small records") {
    fault_env e;
    std::string bytes = segment_header_bytes_for(0, 1);
    std::string big(3u << 20, '\0');
    std::mt19937_64 rng(5);
    for (auto& c : big) c = static_cast<char>(rng());
    encode_record(bytes, record_kind::put, 1, "before", "", std::string(1000, 'b'));
    // Puts the large record's header just before the first 1 MiB boundary.
    encode_record(bytes, record_kind::put, 2, "pad", "", std::string((1u << 20) - bytes.size() - 32 - 3 - 10, 'p'));
    const std::uint64_t big_offset = bytes.size();
    encode_record(bytes, record_kind::put, 3, "big", "application/octet-stream", big);
    encode_record(bytes, record_kind::put, 4, "after", "", "tail");
    e.write_file(seg_path, bytes);

    auto reader = segment_reader::open(e, seg_path);
    REQUIRE(reader.has_value());
    record_view r;
    std::uint64_t offset = 0;
    REQUIRE(reader->next(r, offset));
    CHECK(r.key == "before");
    REQUIRE(reader->next(r, offset));
    CHECK(r.key == "pad");
    REQUIRE(reader->next(r, offset));
    CHECK(offset == big_offset);
    CHECK(r.key == "big");
    CHECK(r.value == big);
    REQUIRE(reader->next(r, offset));
    CHECK(r.key == "after");
    CHECK(r.value == "tail");
    CHECK_FALSE(reader->next(r, offset));
    CHECK(reader->end() == segment_reader::end_state::clean);
}

TEST_CASE("a 3 MiB value cut short is a torn tail") {
    fault_env e;
    std::string bytes = segment_header_bytes_for(0, 1);
    encode_record(bytes, record_kind::put, 1, "small", "", "x");
    const std::uint64_t big_offset = bytes.size();
    encode_record(bytes, record_kind::put, 2, "big", "", std::string(3u << 20, 'v'));
    e.write_file(seg_path, std::string_view(bytes).substr(0, bytes.size() - 1000));
    const read_result got = read_all(e);
    CHECK(got.versions == std::vector<std::uint64_t>{1});
    CHECK(got.end == segment_reader::end_state::torn_tail);
    CHECK(got.valid_bytes == big_offset);
}

TEST_CASE("thousands of records across many buffer refills read back in order") {
    fault_env e;
    const built_segment s = build(6000, 999);
    e.write_file(seg_path, s.bytes);
    const read_result got = read_all(e);
    REQUIRE(got.versions.size() == 6000);
    for (std::size_t i = 0; i < got.versions.size(); ++i) CHECK(got.versions[i] == 100 + i);
    CHECK(got.offsets == s.offsets);
    CHECK(got.end == segment_reader::end_state::clean);
}

TEST_CASE("a damaged record deep in a large segment is corrupt when a good one follows past a refill") {
    fault_env e;
    built_segment s = build(6000, 999);
    s.bytes[s.offsets[4000] + 10] ^= 0x02;  // key length: the header no longer adds up
    e.write_file(seg_path, s.bytes);
    const read_result got = read_all(e);
    CHECK(got.versions.size() == 4000);
    CHECK(got.end == segment_reader::end_state::corrupt);
    CHECK(got.valid_bytes == s.offsets[4000]);
}

TEST_CASE("a read error is reported through error() and is not an end") {
    fault_env e;
    const built_segment s = build(6000, 999);
    e.write_file(seg_path, s.bytes);
    auto reader = segment_reader::open(e, seg_path);
    REQUIRE(reader.has_value());
    e.fail_next(fault_op::read, EIO);
    record_view r;
    std::uint64_t offset = 0;
    int records = 0;
    while (reader->next(r, offset)) ++records;
    CHECK(records > 0);
    CHECK(records < 6000);
    CHECK(reader->error() == EIO);
    CHECK(reader->end() == segment_reader::end_state::none);
    CHECK_FALSE(reader->next(r, offset));
}

TEST_CASE("a segment written through posix_env reads back through it") {
    char dir_template[] = "/tmp/percore-segment-XXXXXX";
    REQUIRE(::mkdtemp(dir_template) != nullptr);
    const std::string path = std::string(dir_template) + "/00000001.seg";
    const built_segment s = build(50, 5000);
    {
        auto w = posix_env().open_writable(path);
        REQUIRE(w.has_value());
        REQUIRE((*w)->append(std::span<const char>(s.bytes.data(), s.bytes.size())).has_value());
        REQUIRE((*w)->append(std::span<const char>("\0\0\0\0\0\0\0", 7)).has_value());
        REQUIRE((*w)->sync().has_value());
    }
    const read_result got = read_all(posix_env(), path);
    CHECK(got.versions.size() == 50);
    CHECK(got.end == segment_reader::end_state::torn_tail);
    CHECK(got.valid_bytes == s.bytes.size());
    CHECK(posix_env().remove(path).has_value());
    CHECK(posix_env().remove(dir_template).has_value());
}

// Copy records (log_format.hpp, kind 5) exist from format 3 on: in an older segment one is damage.
namespace {

// A segment of format `format`: a put, a copy, a put.
std::string segment_with_a_copy(std::uint32_t format) {
    std::string bytes = segment_header_bytes_for(0, 1);
    bytes[8] = static_cast<char>(format);
    const std::uint32_t crc = crc32c(bytes.data(), 28);
    for (int i = 0; i < 4; ++i) bytes[28 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
    encode_record(bytes, record_kind::put, 100, "before", "text/plain", "b");
    encode_document_record(bytes, 101, 5000, "copied", "text/plain", "c");
    encode_record(bytes, record_kind::put, 102, "after", "text/plain", "a");
    return bytes;
}

}  // namespace

TEST_CASE("a copy record in a segment of format 2 is corrupt, with the records after it kept from being read") {
    fault_env e;
    e.write_file(seg_path, segment_with_a_copy(2));
    const read_result got = read_all(e);
    CHECK(got.versions == std::vector<std::uint64_t>{100});
    CHECK(got.end == segment_reader::end_state::corrupt);
}

TEST_CASE("a copy record in a segment of format 3 reads back with its ETag version") {
    fault_env e;
    e.write_file(seg_path, segment_with_a_copy(3));
    auto reader = segment_reader::open(e, seg_path);
    REQUIRE(reader.has_value());
    CHECK(reader->header().format_version == 3);
    record_view r;
    std::uint64_t offset = 0;
    REQUIRE(reader->next(r, offset));
    REQUIRE(reader->next(r, offset));
    CHECK(r.kind == record_kind::copy);
    CHECK(r.version == 101);
    CHECK(r.copied_version == 5000);
    CHECK(r.value == "c");
    REQUIRE(reader->next(r, offset));
    CHECK(r.version == 102);
    CHECK_FALSE(reader->next(r, offset));
    CHECK(reader->end() == segment_reader::end_state::clean);
}
