// request_parser: an incremental HTTP/1.1 request-head parser that allocates nothing.
//
// Contract
// - parse() is given every byte buffered so far for the current request, starting at its first
//   byte. After `incomplete` the caller buffers more and calls again with the same bytes plus the
//   new ones; the only state kept between calls is how far the end of the head has been searched,
//   so the outcome (and the head) is the same for every split of the input.
// - On `complete`, `head` holds string_views into the caller's buffer (valid while those bytes are)
//   and head.head_bytes says where the body (or the next request) starts. Header fields are
//   stored in the caller-provided `field_storage` (at least limits.max_header_fields entries).
// - On `error`, result.status is the HTTP status to answer with (400, 414, 431, 501, 505) and
//   result.reason a short static text for the JSON error body. Every error breaks framing: the
//   caller answers and closes.
// - Checks happen in a fixed order (request line first, as soon as its end is seen; then the header
//   section), so an early error is the same error a whole-buffer parse reports.
// Thread: one parser per connection; not shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "net/limits.hpp"

namespace percore::net {

enum class method : std::uint8_t { get, head, put, del, post, options, patch, other };

enum class connection_option : std::uint8_t { none, keep_alive, close };

struct header_field {
    std::string_view name;   // as sent (compare case-insensitively)
    std::string_view value;  // leading and trailing whitespace removed
};

struct request_head {
    method verb = method::other;
    std::string_view method_text;
    std::string_view target;          // request-target as sent
    int version_minor = 1;            // HTTP/1.0 -> 0, HTTP/1.1 -> 1 (1.x with x > 1 is treated as 1)
    bool has_content_length = false;
    std::uint64_t content_length = 0;
    bool chunked = false;             // Transfer-Encoding ends in chunked (validated)
    connection_option connection = connection_option::none;  // from Connection tokens
    bool expect_continue = false;     // Expect: 100-continue
    bool expect_unsupported = false;  // any other Expect value (answer 417)
    bool has_host = false;
    std::string_view host;
    bool host_is_loopback = false;    // host names this machine (net/address_policy.hpp: loopback_authority)
    bool has_origin = false;          // the first Origin field (a browser's: SPEC §7's check with auth off)
    std::string_view origin;
    std::span<const header_field> fields;  // every field, in order
    std::size_t head_bytes = 0;            // request line + header section + empty line

    // First field with this name (case-insensitive), or an empty view and false.
    bool find(std::string_view name, std::string_view& value) const;
};

enum class parse_outcome : std::uint8_t { incomplete, complete, error };

struct parse_result {
    parse_outcome outcome = parse_outcome::incomplete;
    int status = 0;              // on error
    const char* reason = "";     // on error: short static text
};

class request_parser {
public:
    explicit request_parser(header_limits limits = {}) : limits_(limits) {}

    parse_result parse(std::string_view buffered, request_head& head, std::span<header_field> field_storage);

    // Forget the search position; call before parsing the next request on the connection.
    void reset() { searched_bytes_ = 0; section_start_ = 0; request_line_checked_ = false; }

    const header_limits& limits() const { return limits_; }

private:
    bool host_checked_before(std::string_view host) const;
    void remember_host(std::string_view host, bool loopback);

    header_limits limits_;
    std::size_t searched_bytes_ = 0;     // bytes already known not to end the head
    std::size_t section_start_ = 0;      // first byte after the request line, once it is checked
    bool request_line_checked_ = false;  // request line seen whole and valid
    // The last Host value found valid on this connection (a client sends the same one on every
    // request: its check was ~90 of a pipelined GET's ~3,100 instructions). Up to
    // remembered_host_bytes; longer ones are checked every time.
    static constexpr std::size_t remembered_host_bytes = 64;
    static_assert(remembered_host_bytes <= 0xff, "its size fits remembered_host_size_");
    std::uint8_t remembered_host_size_ = 0;   // 0: none
    bool remembered_host_loopback_ = false;   // whether it names this machine (SPEC §7's check with auth off)
    char remembered_host_[remembered_host_bytes];
};

// Case-insensitive ASCII comparison, for header names and tokens.
bool iequals(std::string_view a, std::string_view b);

// A field value as parse() hands it over (RFC 9110 §5.5): HT, SP, VCHAR and obs-text bytes only (no
// CR, LF, NUL or other control), no whitespace at either end; empty is a value. What a request's
// Content-Type may be, so what a stored document may be answered with.
bool valid_field_value(std::string_view value);

}  // namespace percore::net
