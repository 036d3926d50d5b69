#include <doctest.h>

#include <string>

#include "net/byte_range.hpp"

using percore::net::byte_range;
using percore::net::parse_byte_range;

namespace {
bool part(const byte_range& r, std::uint64_t first, std::uint64_t last) {
    return r.what == byte_range::kind::part && r.first == first && r.last == last;
}
}  // namespace

TEST_CASE("one byte range selects its bytes, clipped to the document") {
    CHECK(part(parse_byte_range("bytes=0-9", 100), 0, 9));
    CHECK(part(parse_byte_range("bytes=90-", 100), 90, 99));
    CHECK(part(parse_byte_range("bytes=-10", 100), 90, 99));
    CHECK(part(parse_byte_range("bytes=50-1000", 100), 50, 99));
    CHECK(part(parse_byte_range("bytes=-1000", 100), 0, 99));
    CHECK(part(parse_byte_range(" bytes=0-0 ", 100), 0, 0));
}

TEST_CASE("a range that selects nothing is unsatisfiable") {
    CHECK(parse_byte_range("bytes=100-", 100).what == byte_range::kind::unsatisfiable);
    CHECK(parse_byte_range("bytes=100-200", 100).what == byte_range::kind::unsatisfiable);
    CHECK(parse_byte_range("bytes=-0", 100).what == byte_range::kind::unsatisfiable);
    CHECK(parse_byte_range("bytes=0-", 0).what == byte_range::kind::unsatisfiable);
}

TEST_CASE("several ranges, other units and malformed values are served whole") {
    for (const char* v : {"bytes=0-1,5-6", "items=0-1", "bytes=5-2", "bytes=a-b", "bytes=", "bytes=-", "bytes 0-1",
                          "bytes=+1-2", "bytes=1-2-3", "bytes=99999999999999999999-"})
        CHECK_MESSAGE(parse_byte_range(v, 100).what == byte_range::kind::whole, v);
}

TEST_CASE("Content-Range is written as RFC 9110 §14.4 draws it") {
    char out[percore::net::content_range_bytes];
    CHECK(percore::net::format_content_range(0, 9, 100, out) == "bytes 0-9/100");
    CHECK(percore::net::format_unsatisfied_range(100, out) == "bytes */100");
    CHECK(percore::net::format_content_range(~0ull - 1, ~0ull - 1, ~0ull, out).size() <= percore::net::content_range_bytes);
}
