// byte_range: a GET's Range field (RFC 9110 §14.1.2) against a document of `length` bytes.
//
// One range only: `bytes=first-last`, `bytes=first-`, `bytes=-suffix`. Anything percore does not
// serve as a range — several ranges, another unit, a malformed value — is `whole` (RFC 9110 §14.2:
// a server may ignore Range; SPEC §4: several ranges may be answered 200 with the whole
// document). A well-formed range that selects nothing (first past the end, a zero suffix, an empty
// document) is `unsatisfiable` (416 with `Content-Range: bytes */length`).
//
// Allocation-free; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace percore::net {

struct byte_range {
    enum class kind : std::uint8_t { whole, part, unsatisfiable };
    kind what = kind::whole;
    std::uint64_t first = 0;   // part: the bytes [first, last]
    std::uint64_t last = 0;

    std::uint64_t size() const { return last - first + 1; }
};

byte_range parse_byte_range(std::string_view value, std::uint64_t length);

// "bytes first-last/length" and "bytes */length" into `out` (content_range_bytes); returns the text.
inline constexpr std::size_t content_range_bytes = 6 + 3 * 20 + 2;
std::string_view format_content_range(std::uint64_t first, std::uint64_t last, std::uint64_t length, char* out);
std::string_view format_unsatisfied_range(std::uint64_t length, char* out);

}  // namespace percore::net
