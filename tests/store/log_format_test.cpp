#include <doctest.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "store/crc32c.hpp"
#include "store/crc32c_internal.hpp"
#include "store/log_format.hpp"

using namespace percore::store;

namespace {

std::uint32_t crc_of(std::string_view s) { return crc32c(s.data(), s.size()); }

std::uint64_t le(std::string_view bytes, std::size_t offset, std::size_t width) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < width; ++i) v |= std::uint64_t(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
    return v;
}

void set_le(std::string& bytes, std::size_t offset, std::uint64_t v, std::size_t width) {
    for (std::size_t i = 0; i < width; ++i) bytes[offset + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// Recomputes a record's checksum after a test changed its fields on purpose.
void reseal(std::string& record) { set_le(record, 0, crc32c(record.data() + 4, record.size() - 4), 4); }

std::string one_record(record_kind kind, std::uint64_t version, std::string_view key, std::string_view type,
                       std::string_view value) {
    std::string out;
    encode_record(out, kind, version, key, type, value);
    return out;
}

decode_status decode(std::string_view bytes) {
    record_view r;
    std::size_t size = 0;
    return decode_record(bytes, r, size);
}

}  // namespace

TEST_CASE("crc32c of \"123456789\" is the standard check value E3069283") {
    CHECK(crc_of("123456789") == 0xE3069283u);
}

TEST_CASE("crc32c of no bytes is zero") {
    CHECK(crc32c(nullptr, 0) == 0u);
    CHECK(crc32c_extend(0x12345678u, nullptr, 0) == 0x12345678u);
}

TEST_CASE("crc32c matches the RFC 3720 vectors for 32 zero, 32 0xFF and 32 ascending bytes") {
    std::string zeros(32, '\0'), ones(32, '\xFF'), ascending(32, '\0');
    for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
    CHECK(crc_of(zeros) == 0x8A9136AAu);
    CHECK(crc_of(ones) == 0x62A8AB43u);
    CHECK(crc_of(ascending) == 0x46DD794Eu);
}

TEST_CASE("crc32c_extend over pieces equals crc32c over the whole") {
    const std::string text = "The quick brown fox jumps over the lazy dog, again and again and again.";
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
        std::uint32_t crc = crc32c(text.data(), cut);
        crc = crc32c_extend(crc, text.data() + cut, text.size() - cut);
        CHECK(crc == crc_of(text));
    }
}

TEST_CASE("the hardware and table crc32c agree on every length 0 to 300 at every alignment") {
    std::mt19937_64 rng(7);
    std::vector<unsigned char> buffer(300 + 16);
    for (auto& b : buffer) b = static_cast<unsigned char>(rng());
    const bool hardware = detail::crc32c_hardware_available();
    if (!hardware) MESSAGE("no CRC-32C instruction here: checking the table path against the dispatcher only");
    for (std::size_t length = 0; length <= 300; ++length) {
        for (std::size_t align = 0; align < 16; ++align) {
            const unsigned char* p = buffer.data() + align;
            const std::uint32_t seed = static_cast<std::uint32_t>(rng());
            const std::uint32_t table = detail::crc32c_table(seed, p, length);
            if (hardware) REQUIRE(detail::crc32c_hardware(seed, p, length) == table);
            REQUIRE(crc32c_extend(~seed, p, length) == ~table);
        }
    }
}

TEST_CASE("a record's bytes follow the drawn layout") {
    const std::string r = one_record(record_kind::put, 0x0102030405060708ull, "key", "text/plain", "value!");
    REQUIRE(r.size() == record_bytes(3, 10, 6));
    CHECK(le(r, 0, 4) == crc32c(r.data() + 4, r.size() - 4));
    CHECK(le(r, 4, 4) == r.size() - 8);
    CHECK(r[8] == 1);
    CHECK(r[9] == 0);
    CHECK(le(r, 10, 2) == 3);
    CHECK(le(r, 12, 2) == 10);
    CHECK(le(r, 14, 2) == 0);
    CHECK(le(r, 16, 8) == 0x0102030405060708ull);
    CHECK(le(r, 24, 4) == 6);
    CHECK(le(r, 28, 4) == 0);
    CHECK(r.substr(32) == "keytext/plainvalue!");
}

TEST_CASE("a put record round-trips") {
    const std::string r = one_record(record_kind::put, 42, "app/key", "application/json", "{\"a\":1}");
    record_view v;
    std::size_t size = 0;
    REQUIRE(decode_record(r, v, size) == decode_status::ok);
    CHECK(size == r.size());
    CHECK(v.kind == record_kind::put);
    CHECK(v.version == 42);
    CHECK(v.key == "app/key");
    CHECK(v.content_type == "application/json");
    CHECK(v.value == "{\"a\":1}");
    CHECK(v.value_offset == 32 + 7 + 16);
    CHECK(r.substr(v.value_offset, v.value.size()) == v.value);
}

TEST_CASE("a tombstone record round-trips") {
    const std::string r = one_record(record_kind::tombstone, 99, "app/gone", "", "");
    record_view v;
    std::size_t size = 0;
    REQUIRE(decode_record(r, v, size) == decode_status::ok);
    CHECK(size == 32 + 8);
    CHECK(v.kind == record_kind::tombstone);
    CHECK(v.version == 99);
    CHECK(v.key == "app/gone");
    CHECK(v.content_type.empty());
    CHECK(v.value.empty());
}

TEST_CASE("a put with an empty value and an empty content type round-trips") {
    const std::string r = one_record(record_kind::put, 1, "k", "", "");
    record_view v;
    std::size_t size = 0;
    REQUIRE(decode_record(r, v, size) == decode_status::ok);
    CHECK(v.kind == record_kind::put);
    CHECK(v.value.empty());
    CHECK(v.content_type.empty());
    CHECK(size == 33);
}

TEST_CASE("a record with a 1 MiB value round-trips") {
    std::string value(1u << 20, '\0');
    std::mt19937_64 rng(3);
    for (auto& c : value) c = static_cast<char>(rng());
    const std::string r = one_record(record_kind::put, 5, "big", "application/octet-stream", value);
    record_view v;
    std::size_t size = 0;
    REQUIRE(decode_record(r, v, size) == decode_status::ok);
    CHECK(size == r.size());
    CHECK(v.value == value);
}

TEST_CASE("a binary key with NUL bytes round-trips") {
    const std::string key("a\0b\0\xff\0", 6);
    const std::string r = one_record(record_kind::put, 8, key, "x", std::string("\0\0", 2));
    record_view v;
    std::size_t size = 0;
    REQUIRE(decode_record(r, v, size) == decode_status::ok);
    CHECK(v.key == key);
    CHECK(v.value == std::string("\0\0", 2));
}

TEST_CASE("records appended to one buffer decode one after another") {
    std::string log;
    for (int i = 0; i < 10; ++i)
        encode_record(log, i % 3 == 0 ? record_kind::tombstone : record_kind::put, i, "key" + std::to_string(i),
                      i % 3 == 0 ? "" : "t", i % 3 == 0 ? "" : std::string(i * 10, 'v'));
    std::string_view rest = log;
    for (int i = 0; i < 10; ++i) {
        record_view v;
        std::size_t size = 0;
        REQUIRE(decode_record(rest, v, size) == decode_status::ok);
        CHECK(v.version == static_cast<std::uint64_t>(i));
        CHECK(v.key == "key" + std::to_string(i));
        rest.remove_prefix(size);
    }
    CHECK(rest.empty());
}

TEST_CASE("every truncation of a record decodes as incomplete") {
    const std::string r = one_record(record_kind::put, 77, "some/key", "text/plain", "a value of some length");
    for (std::size_t cut = 0; cut < r.size(); ++cut) {
        CAPTURE(cut);
        CHECK(decode(std::string_view(r).substr(0, cut)) == decode_status::incomplete);
    }
    CHECK(decode(r) == decode_status::ok);
}

TEST_CASE("a flipped bit anywhere in a record makes it corrupt") {
    const std::string r = one_record(record_kind::put, 77, "some/key", "text/plain", "a value");
    const std::string t = one_record(record_kind::tombstone, 78, "some/key", "", "");
    for (const std::string& original : {r, t}) {
        for (std::size_t byte = 0; byte < original.size(); ++byte) {
            for (int bit = 0; bit < 8; ++bit) {
                std::string damaged = original;
                damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
                CAPTURE(byte);
                CAPTURE(bit);
                CHECK(decode(damaged) == decode_status::corrupt);
            }
        }
    }
}

TEST_CASE("fields that break the layout are corrupt even under a matching checksum") {
    const std::string good = one_record(record_kind::put, 1, "key", "t", "value");
    const std::string tomb = one_record(record_kind::tombstone, 1, "key", "", "");
    auto damaged = [](std::string r, std::size_t offset, std::uint64_t v, std::size_t width) {
        set_le(r, offset, v, width);
        reseal(r);
        return r;
    };
    CHECK(decode(damaged(good, 8, 0, 1)) == decode_status::corrupt);   // unknown kind
    CHECK(decode(damaged(good, 8, 3, 1)) == decode_status::corrupt);
    CHECK(decode(damaged(good, 8, 4, 1)) == decode_status::corrupt);   // a commit mark has no key
    CHECK(decode(damaged(good, 8, 5, 1)) == decode_status::corrupt);
    CHECK(decode(damaged(good, 9, 1, 1)) == decode_status::corrupt);   // reserved
    CHECK(decode(damaged(good, 14, 1, 2)) == decode_status::corrupt);
    CHECK(decode(damaged(good, 28, 1, 4)) == decode_status::corrupt);
    CHECK(decode(damaged(good, 4, le(good, 4, 4) - 1, 4)) == decode_status::corrupt);  // body too short for the fields

    // Key length 0 with the bytes moved to the content type: lengths add up, but a key is required.
    std::string no_key = good;
    set_le(no_key, 10, 0, 2);
    set_le(no_key, 12, 4, 2);
    reseal(no_key);
    CHECK(decode(no_key) == decode_status::corrupt);

    // A tombstone's bytes counted as a value instead of a key.
    std::string tomb_value = tomb;
    set_le(tomb_value, 10, 2, 2);
    set_le(tomb_value, 24, 1, 4);
    reseal(tomb_value);
    CHECK(decode(tomb_value) == decode_status::corrupt);
    std::string tomb_type = tomb;
    set_le(tomb_type, 10, 2, 2);
    set_le(tomb_type, 12, 1, 2);
    reseal(tomb_type);
    CHECK(decode(tomb_type) == decode_status::corrupt);
}

TEST_CASE("a value length over the maximum is corrupt without reading the value") {
    std::string r = one_record(record_kind::put, 1, "k", "", "");
    set_le(r, 24, std::uint64_t(max_record_value_bytes) + 1, 4);
    set_le(r, 4, 24 + 1 + std::uint64_t(max_record_value_bytes) + 1, 4);
    reseal(r);
    CHECK(decode(r) == decode_status::corrupt);
}

TEST_CASE("zero bytes are corrupt as a whole header and incomplete when shorter") {
    CHECK(decode(std::string(31, '\0')) == decode_status::incomplete);
    CHECK(decode(std::string(32, '\0')) == decode_status::corrupt);
    CHECK(decode(std::string(4096, '\0')) == decode_status::corrupt);
}

TEST_CASE("a segment header round-trips") {
    char bytes[segment_header_bytes];
    encode_segment_header(bytes, 7, 0x1122334455667788ull);
    CHECK(std::string_view(bytes, 8) == std::string_view("PCSEG\0\0\1", 8));
    segment_header h;
    REQUIRE(decode_segment_header(std::string_view(bytes, sizeof bytes), h));
    CHECK(h.format_version == log_format_version);
    CHECK(h.shard == 7);
    CHECK(h.segment_id == 0x1122334455667788ull);
    CHECK(le(std::string_view(bytes, sizeof bytes), 28, 4) == crc32c(bytes, 28));
}

TEST_CASE("a foreign, damaged, short or other-version segment header is refused") {
    char bytes[segment_header_bytes];
    encode_segment_header(bytes, 1, 2);
    const std::string good(bytes, sizeof bytes);
    segment_header h;
    CHECK_FALSE(decode_segment_header(good.substr(0, 31), h));
    CHECK_FALSE(decode_segment_header(std::string(32, '\0'), h));
    CHECK_FALSE(decode_segment_header(std::string("SQLite format 3\0 and then some more", 32), h));
    for (std::size_t i = 0; i < good.size(); ++i) {
        std::string damaged = good;
        damaged[i] = static_cast<char>(damaged[i] ^ 0x10);
        CAPTURE(i);
        CHECK_FALSE(decode_segment_header(damaged, h));
    }
    std::string other_version = good;
    set_le(other_version, 8, log_format_version + 1, 4);
    set_le(other_version, 28, crc32c(other_version.data(), 28), 4);
    CHECK_FALSE(decode_segment_header(other_version, h));
}

TEST_CASE("a segment header of format version 1 (before commit marks) is still read") {
    char bytes[segment_header_bytes];
    encode_segment_header(bytes, 1, 2);
    std::string v1(bytes, sizeof bytes);
    set_le(v1, 8, 1, 4);
    set_le(v1, 28, crc32c(v1.data(), 28), 4);
    segment_header h;
    REQUIRE(decode_segment_header(v1, h));
    CHECK(h.format_version == 1);
    CHECK(h.segment_id == 2);
}

TEST_CASE("a commit mark round-trips, names its segment and offset, and always starts with the same 28 bytes after its checksum") {
    std::string a;
    encode_commit_mark(a, 0x0102030405060708ull, 0x1122334455667788ull);
    REQUIRE(a.size() == commit_mark_bytes);
    record_view r;
    std::size_t size = 0;
    REQUIRE(decode_record(a, r, size) == decode_status::ok);
    CHECK(size == commit_mark_bytes);
    CHECK(r.kind == record_kind::commit_mark);
    CHECK(r.key.empty());
    CHECK(r.version == 0);
    const commit_mark m = decode_commit_mark(r.value);
    CHECK(m.segment_id == 0x0102030405060708ull);
    CHECK(m.offset == 0x1122334455667788ull);
    std::string b;
    encode_commit_mark(b, 9, 4096);
    CHECK(a.substr(commit_mark_pattern_offset, 28) == commit_mark_pattern());
    CHECK(b.substr(commit_mark_pattern_offset, 28) == commit_mark_pattern());
    CHECK(a.substr(0, 4) != b.substr(0, 4));
}

TEST_CASE("a commit mark with a key, a content type, a version or another value length is corrupt") {
    std::string mark;
    encode_commit_mark(mark, 1, 100);
    auto damaged = [&](std::size_t offset, std::uint64_t v, std::size_t width) {
        std::string r = mark;
        set_le(r, offset, v, width);
        reseal(r);
        return decode(r);
    };
    CHECK(damaged(16, 1, 8) == decode_status::corrupt);  // version
    CHECK(damaged(10, 1, 2) == decode_status::corrupt);  // a key byte taken from the value
    CHECK(damaged(12, 1, 2) == decode_status::corrupt);  // a content type byte
    std::string longer = mark + std::string(8, '\0');
    set_le(longer, 4, le(longer, 4, 4) + 8, 4);
    set_le(longer, 24, 24, 4);
    reseal(longer);
    CHECK(decode(longer) == decode_status::corrupt);
}

// Segment lists (log_format.hpp, "Segment list"): the value of a kind 3 record, encoded and decoded
// in log_format only.

TEST_CASE("a segment list round-trips, ids in order, 8 little-endian bytes each") {
    const std::vector<std::uint64_t> ids = {1, 2, 0x0102030405060708ull, ~0ull};
    const std::string v = encode_segment_list(ids);
    REQUIRE(v.size() == 8 * ids.size());
    CHECK(static_cast<unsigned char>(v[16]) == 0x08);  // least significant byte first
    CHECK(static_cast<unsigned char>(v[23]) == 0x01);
    auto back = decode_segment_list(v);
    REQUIRE(back.has_value());
    CHECK(*back == ids);

    // and inside a record, as the log writes it
    std::string rec;
    encode_record(rec, record_kind::segment_list, 7, {}, {}, v);
    record_view view;
    std::size_t size = 0;
    REQUIRE(decode_record(rec, view, size) == decode_status::ok);
    auto listed = decode_segment_list(view.value);
    REQUIRE(listed.has_value());
    CHECK(*listed == ids);
}

TEST_CASE("an empty segment list is no bytes and decodes to no ids") {
    const std::string v = encode_segment_list({});
    CHECK(v.empty());
    auto back = decode_segment_list(v);
    REQUIRE(back.has_value());
    CHECK(back->empty());
}

TEST_CASE("a segment list whose length is not a multiple of 8 is rejected") {
    const std::vector<std::uint64_t> ids = {5, 6};
    const std::string v = encode_segment_list(ids);
    for (std::size_t cut : {1u, 7u, 9u, 15u}) {
        auto r = decode_segment_list(std::string_view(v).substr(0, cut));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error() == EBADMSG);
    }
}

// Copy records (kind 5, format 3): a put whose ETag version is another board's (log_format.hpp).
namespace {

std::string copy_record(std::uint64_t version, std::uint64_t etag_version, std::string_view key,
                        std::string_view type, std::string_view value) {
    std::string out;
    encode_document_record(out, version, etag_version, key, type, value);
    return out;
}

}  // namespace

TEST_CASE("a copy record round-trips its local version, its ETag version and its value, 8 bytes after a put's") {
    const std::string r = copy_record(42, 0x0a0b0c0d0e0f1011ull, "app/key", "application/json", "{\"a\":1}");
    CHECK(r.size() == 32 + 7 + 16 + 8 + 7);
    CHECK(static_cast<unsigned char>(r[8]) == 5);
    CHECK(le(r, 4, 4) == r.size() - 8);  // the body counts the 8 bytes
    CHECK(le(r, 16, 8) == 42);
    CHECK(le(r, 24, 4) == 7);          // the value's bytes, without them
    CHECK(le(r, 32 + 7 + 16, 8) == 0x0a0b0c0d0e0f1011ull);
    record_view v;
    std::size_t size = 0;
    REQUIRE(decode_record(r, v, size) == decode_status::ok);
    CHECK(size == r.size());
    CHECK(v.kind == record_kind::copy);
    CHECK(v.holds_document());
    CHECK(v.version == 42);
    CHECK(v.copied_version == 0x0a0b0c0d0e0f1011ull);
    CHECK(v.etag_version() == 0x0a0b0c0d0e0f1011ull);
    CHECK(v.key == "app/key");
    CHECK(v.content_type == "application/json");
    CHECK(v.value == "{\"a\":1}");
    CHECK(v.value_offset == 32 + 7 + 16 + 8);
    CHECK(r.substr(v.value_offset, v.value.size()) == v.value);
    CHECK(record_bytes(7, 16, 7, true) == r.size());
}

TEST_CASE("a document record whose ETag version is its own version is written as a plain put") {
    const std::string r = copy_record(42, 42, "app/key", "text/plain", "v");
    CHECK(r == one_record(record_kind::put, 42, "app/key", "text/plain", "v"));
    record_view v;
    std::size_t size = 0;
    REQUIRE(decode_record(r, v, size) == decode_status::ok);
    CHECK(v.copied_version == 0);
    CHECK(v.etag_version() == 42);
}

TEST_CASE("a copy record in a segment of format 2 is corrupt, in format 3 it is read") {
    const std::string r = copy_record(42, 7, "app/key", "text/plain", "value");
    record_view v;
    std::size_t size = 0;
    CHECK(decode_record(r, v, size, 2) == decode_status::corrupt);
    CHECK(decode_record(r, v, size, 1) == decode_status::corrupt);
    CHECK(decode_record(r, v, size, 3) == decode_status::ok);
    CHECK(log_format_version == 3);
}

TEST_CASE("a copy record whose ETag version is 0 or whose body misses its 8 bytes is corrupt") {
    std::string zero = copy_record(42, 7, "k", "t", "value");
    set_le(zero, 32 + 1 + 1, 0, 8);
    reseal(zero);
    CHECK(decode(zero) == decode_status::corrupt);
    // a put's body length under kind 5: the header no longer agrees with itself
    std::string put = one_record(record_kind::put, 42, "k", "t", "value");
    put[8] = 5;
    reseal(put);
    CHECK(decode(put) == decode_status::corrupt);
}
