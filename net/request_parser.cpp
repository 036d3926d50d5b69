#include "net/request_parser.hpp"

#include "net/address_policy.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>

namespace percore::net {

namespace {

// tchar (RFC 9110 §5.6.2)
constexpr std::array<bool, 256> make_token_table() {
    std::array<bool, 256> table{};
    for (int c = '0'; c <= '9'; ++c) table[c] = true;
    for (int c = 'a'; c <= 'z'; ++c) table[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) table[c] = true;
    for (char c : std::string_view("!#$%&'*+-.^_`|~")) table[static_cast<unsigned char>(c)] = true;
    return table;
}

// field-value bytes: HT, SP, VCHAR, obs-text
constexpr std::array<bool, 256> make_value_table() {
    std::array<bool, 256> table{};
    table['\t'] = true;
    for (int c = 0x20; c <= 0x7e; ++c) table[c] = true;
    for (int c = 0x80; c <= 0xff; ++c) table[c] = true;
    return table;
}

constexpr std::array<bool, 256> token_table = make_token_table();
constexpr std::array<bool, 256> value_table = make_value_table();

inline bool is_tchar(char c) { return token_table[static_cast<unsigned char>(c)]; }
inline bool is_value_byte(char c) { return value_table[static_cast<unsigned char>(c)]; }
inline bool is_visible(char c) { return c > 0x20 && c < 0x7f; }
inline bool is_ows(char c) { return c == ' ' || c == '\t'; }

// Eight bytes at a time: `at` moved past the words of line[at, limit) in which `ends_run(word)` is
// zero, not reading at or past `limit`; the caller's byte loop takes it from the first word that
// has a byte ending the run (or the last bytes short of a word).
constexpr std::uint64_t byte_ones = 0x0101010101010101ull, byte_highs = 0x8080808080808080ull;
template <class EndsRun>
inline std::size_t skip_words(const char* line, std::size_t at, std::size_t limit, EndsRun ends_run) {
    while (at + 8 <= limit) {
        std::uint64_t x;
        std::memcpy(&x, line + at, 8);
        if (ends_run(x)) break;
        at += 8;
    }
    return at;
}
// Non-zero when the word has a 0x7F byte (a zero byte of x ^ 0x7F…).
inline std::uint64_t has_del_byte(std::uint64_t x) {
    const std::uint64_t y = x ^ (0x7f * byte_ones);
    return (y - byte_ones) & ~y & byte_highs;
}

// The end of a field value's run of plain bytes (SP..0x7E and obs-text) from `at` (the caller's
// byte loop stops at HT, the line's end, a bad byte). A word has a byte below 0x20 (with its top
// bit clear) when (x - 0x20…) & ~x & 0x80… is non-zero. A bearer token or a user agent is 60-100
// bytes: a byte at a time was about 7 instructions each.
inline std::size_t skip_plain_value_bytes(const char* line, std::size_t at, std::size_t limit) {
    return skip_words(line, at, limit, [](std::uint64_t x) {
        return ((x - 0x20 * byte_ones) & ~x & byte_highs) | has_del_byte(x);
    });
}
// The end of a run of visible bytes (0x21-0x7E, is_visible) from `at` (the caller's byte loop
// stops at the space after the request-target, a bad byte). A word has a byte below 0x21 or from
// 0x80 up when ((x - 0x21…) | x) & 0x80… is non-zero (a byte of the others never borrows). A byte
// at a time was ~4 instructions a byte of every target.
inline std::size_t skip_visible_bytes(const char* line, std::size_t at, std::size_t limit) {
    return skip_words(line, at, limit,
                      [](std::uint64_t x) { return (((x - 0x21 * byte_ones) | x) & byte_highs) | has_del_byte(x); });
}
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool equal_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const char x = a[i];
        const char y = b[i];
        if (x == y) continue;
        if ((x ^ y) != 0x20) return false;
        const char lower = static_cast<char>(x | 0x20);
        if (lower < 'a' || lower > 'z') return false;
    }
    return true;
}

// Always inline: every field of every request is trimmed, and a call (which the parser's size
// kept out of line) was ~12 instructions a field (callgrind).
[[gnu::always_inline]] inline std::string_view trim_ows(std::string_view s) {
    const char* begin = s.data();
    const char* end = begin + s.size();
    while (begin < end && is_ows(*begin)) ++begin;
    while (end > begin && is_ows(end[-1])) --end;
    return std::string_view(begin, static_cast<std::size_t>(end - begin));
}

// reg-name bytes other than pct-encoded (RFC 3986 §3.2.2): unreserved and sub-delims.
constexpr std::array<bool, 256> make_reg_name_table() {
    std::array<bool, 256> table{};
    for (int c = '0'; c <= '9'; ++c) table[c] = true;
    for (int c = 'a'; c <= 'z'; ++c) table[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) table[c] = true;
    for (char c : std::string_view("-._~!$&'()*+,;=")) table[static_cast<unsigned char>(c)] = true;
    return table;
}

constexpr std::array<bool, 256> reg_name_table = make_reg_name_table();

inline bool is_reg_name_byte(char c) { return reg_name_table[static_cast<unsigned char>(c)]; }

inline bool is_hex(char c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }

// IPv4address: four dec-octets (0-255, no leading zeros), RFC 3986 §3.2.2.
bool valid_ipv4(std::string_view s) {
    std::size_t i = 0;
    for (int octet = 0; octet < 4; ++octet) {
        if (octet > 0) {
            if (i == s.size() || s[i] != '.') return false;
            ++i;
        }
        const std::size_t begin = i;
        unsigned value = 0;
        while (i < s.size() && is_digit(s[i]) && i - begin < 3) value = value * 10 + static_cast<unsigned>(s[i++] - '0');
        const std::size_t digits = i - begin;
        if (digits == 0 || value > 255 || (digits > 1 && s[begin] == '0')) return false;
    }
    return i == s.size();
}

// IPv6address (RFC 3986 §3.2.2): eight h16 pieces, or fewer around one "::", the last two of
// which may be an IPv4address.
bool valid_ipv6(std::string_view s) {
    const std::size_t n = s.size();
    std::size_t i = 0;
    int pieces = 0;
    bool elided = false;
    if (n >= 2 && s[0] == ':' && s[1] == ':') {
        elided = true;
        i = 2;
    }
    while (i < n) {
        std::size_t j = i;
        while (j < n && is_hex(s[j])) ++j;
        if (j < n && s[j] == '.') {
            if (!valid_ipv4(s.substr(i))) return false;
            pieces += 2;
            break;
        }
        if (j == i || j - i > 4) return false;
        ++pieces;
        i = j;
        if (i == n) break;
        if (s[i] != ':') return false;
        ++i;
        if (i < n && s[i] == ':') {
            if (elided) return false;
            elided = true;
            ++i;
        } else if (i == n) {
            return false;  // a single trailing colon
        }
    }
    if (n == 0 || (s[0] == ':' && !elided)) return false;
    return elided ? pieces <= 7 : pieces == 8;
}

// IPvFuture: "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ).
bool valid_ipvfuture(std::string_view s) {
    if (s.empty() || (s[0] | 0x20) != 'v') return false;
    std::size_t i = 1;
    while (i < s.size() && is_hex(s[i])) ++i;
    if (i == 1 || i == s.size() || s[i] != '.') return false;
    if (++i == s.size()) return false;
    for (; i < s.size(); ++i)
        if (!is_reg_name_byte(s[i]) && s[i] != ':') return false;
    return true;
}

// A Host field value (RFC 9110 §7.2, RFC 9112 §3.2): empty (the target URI has no authority), or
// uri-host [":" port] where uri-host is an IP-literal, an IPv4address or a reg-name. The host
// part must not be empty when a port follows (RFC 9110 §4.2.1: an empty host is invalid).
bool valid_host(std::string_view v) {
    const std::size_t n = v.size();
    if (n == 0) return true;
    std::size_t i = 0;
    if (v[0] == '[') {
        const std::size_t close = v.find(']');
        if (close == std::string_view::npos) return false;
        const std::string_view literal = v.substr(1, close - 1);
        if (!valid_ipv6(literal) && !valid_ipvfuture(literal)) return false;
        i = close + 1;
    } else {
        while (i < n) {
            if (v[i] == '%') {
                if (i + 2 >= n || !is_hex(v[i + 1]) || !is_hex(v[i + 2])) return false;
                i += 3;
            } else if (is_reg_name_byte(v[i])) {
                ++i;
            } else {
                break;
            }
        }
        if (i == 0) return false;
    }
    if (i == n) return true;
    if (v[i] != ':') return false;
    for (++i; i < n; ++i)
        if (!is_digit(v[i])) return false;
    return true;
}

constexpr parse_result fail(int status, const char* reason) { return {parse_outcome::error, status, reason}; }

constexpr parse_result ok() { return {parse_outcome::complete, 0, ""}; }

method method_from_text(std::string_view m) {
    switch (m.size()) {
    case 3:
        if (m == "GET") return method::get;
        if (m == "PUT") return method::put;
        break;
    case 4:
        if (m == "HEAD") return method::head;
        if (m == "POST") return method::post;
        break;
    case 5:
        if (m == "PATCH") return method::patch;
        break;
    case 6:
        if (m == "DELETE") return method::del;
        break;
    case 7:
        if (m == "OPTIONS") return method::options;
        break;
    default:
        break;
    }
    return method::other;
}

// Empty lines before the request line are skipped (RFC 9112 §2.2); returns where the line starts.
std::size_t skip_empty_lines(std::string_view buf) {
    std::size_t i = 0;
    for (;;) {
        if (i < buf.size() && buf[i] == '\n') {
            ++i;
        } else if (i + 1 < buf.size() && buf[i] == '\r' && buf[i + 1] == '\n') {
            i += 2;
        } else {
            return i;
        }
    }
}

parse_result parse_request_line(std::string_view line, request_head& head) {
    head = request_head{};
    const std::size_t n = line.size();
    std::size_t i = 0;
    while (i < n && is_tchar(line[i])) ++i;
    if (i == 0 || i == n || line[i] != ' ') return fail(400, "malformed request line");
    head.method_text = line.substr(0, i);
    head.verb = method_from_text(head.method_text);

    const std::size_t target_begin = ++i;
    i = skip_visible_bytes(line.data(), i, n);
    while (i < n && is_visible(line[i])) ++i;
    if (i == target_begin || i == n || line[i] != ' ') return fail(400, "malformed request line");
    head.target = line.substr(target_begin, i - target_begin);

    const std::string_view version = line.substr(i + 1);
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !is_digit(version[5]) || version[6] != '.' ||
        !is_digit(version[7])) {
        return fail(400, "malformed http version");
    }
    if (version[5] != '1') return fail(505, "http version not supported");
    head.version_minor = version[7] == '0' ? 0 : 1;
    return ok();
}

// A Content-Length value: one decimal number, or a list of equal ones ("5, 5").
parse_result parse_content_length(std::string_view value, std::uint64_t& out) {
    constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
    const std::size_t n = value.size();
    bool have = false;
    std::size_t i = 0;
    for (;;) {
        while (i < n && is_ows(value[i])) ++i;
        const std::size_t digits_begin = i;
        std::uint64_t number = 0;
        for (; i < n && is_digit(value[i]); ++i) {
            const auto digit = static_cast<std::uint64_t>(value[i] - '0');
            if (number > (max - digit) / 10) return fail(400, "invalid content-length");
            number = number * 10 + digit;
        }
        if (i == digits_begin) return fail(400, "invalid content-length");
        while (i < n && is_ows(value[i])) ++i;
        if (have && number != out) return fail(400, "conflicting content-length");
        out = number;
        have = true;
        if (i == n) return ok();
        if (value[i] != ',') return fail(400, "invalid content-length");
        ++i;
    }
}

struct coding_state {
    bool seen = false;
    bool last_chunked = false;
    bool other = false;
    int chunked_count = 0;
};

parse_result add_transfer_codings(std::string_view value, coding_state& codings) {
    codings.seen = true;
    for (;;) {
        const std::size_t comma = value.find(',');
        const std::string_view element = trim_ows(value.substr(0, comma));
        if (element.empty() || !is_tchar(element[0])) return fail(400, "invalid transfer-encoding");
        if (equal_ignoring_case(element, "chunked")) {
            ++codings.chunked_count;
            codings.last_chunked = true;
        } else {
            codings.other = true;
            codings.last_chunked = false;
        }
        if (comma == std::string_view::npos) return ok();
        value.remove_prefix(comma + 1);
    }
}

void add_connection_options(std::string_view value, bool& close, bool& keep_alive) {
    for (;;) {
        const std::size_t comma = value.find(',');
        const std::string_view option = trim_ows(value.substr(0, comma));
        if (equal_ignoring_case(option, "close")) {
            close = true;
        } else if (equal_ignoring_case(option, "keep-alive")) {
            keep_alive = true;
        }
        if (comma == std::string_view::npos) return;
        value.remove_prefix(comma + 1);
    }
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) { return equal_ignoring_case(a, b); }

// The same bytes as a value valid_host() accepted: valid (an empty value is not remembered).
bool request_parser::host_checked_before(std::string_view host) const {
    return !host.empty() && host.size() == remembered_host_size_ &&
           std::memcmp(host.data(), remembered_host_, host.size()) == 0;
}

void request_parser::remember_host(std::string_view host, bool loopback) {
    if (host.size() > remembered_host_bytes) return;
    std::memcpy(remembered_host_, host.data(), host.size());
    remembered_host_size_ = static_cast<std::uint8_t>(host.size());
    remembered_host_loopback_ = loopback;
}

bool request_head::find(std::string_view name, std::string_view& value) const {
    for (const header_field& field : fields) {
        if (equal_ignoring_case(field.name, name)) {
            value = field.value;
            return true;
        }
    }
    value = {};
    return false;
}

parse_result request_parser::parse(std::string_view buffered, request_head& head, std::span<header_field> field_storage) {
    const char* const data = buffered.data();
    const std::size_t n = buffered.size();
    if (searched_bytes_ > n || section_start_ > n) reset();

    bool line_parsed_now = false;
    if (!request_line_checked_) {
        const std::size_t line_start = skip_empty_lines(buffered);
        const std::size_t from = searched_bytes_ > line_start ? searched_bytes_ : line_start;
        const void* lf_hit = from < n ? std::memchr(data + from, '\n', n - from) : nullptr;
        if (lf_hit == nullptr) {
            searched_bytes_ = n;
            // Whatever follows, the line will be longer than the limit.
            const std::size_t max = limits_.max_request_line_bytes;
            if (n > 0 && (n - 1 > max || (n - 1 == max && data[n - 1] != '\r'))) {
                return fail(414, "request line too long");
            }
            return {};
        }
        const auto lf = static_cast<std::size_t>(static_cast<const char*>(lf_hit) - data);
        std::size_t line_end = lf;
        if (line_end > line_start && data[line_end - 1] == '\r') --line_end;
        if (line_end > limits_.max_request_line_bytes) return fail(414, "request line too long");
        const parse_result line_result = parse_request_line(buffered.substr(line_start, line_end - line_start), head);
        if (line_result.outcome == parse_outcome::error) return line_result;
        request_line_checked_ = true;
        section_start_ = lf + 1;
        searched_bytes_ = lf + 1;
        line_parsed_now = true;
    }

    // The head ends at a LF that closes an empty line ("\n\n" or "\n\r\n"); the request line's
    // LF sits just before section_start_, so looking back two bytes stays inside the buffer.
    std::size_t head_end = 0;
    for (std::size_t pos = searched_bytes_; pos < n;) {
        const void* lf_hit = std::memchr(data + pos, '\n', n - pos);
        if (lf_hit == nullptr) break;
        const auto lf = static_cast<std::size_t>(static_cast<const char*>(lf_hit) - data);
        if (data[lf - 1] == '\n' || (data[lf - 1] == '\r' && data[lf - 2] == '\n')) {
            head_end = lf + 1;
            break;
        }
        pos = lf + 1;
    }
    if (head_end == 0) {
        searched_bytes_ = n;
        if (n - section_start_ > limits_.max_header_section_bytes) return fail(431, "header section too large");
        return {};
    }
    if (head_end - section_start_ > limits_.max_header_section_bytes) return fail(431, "header section too large");

    if (!line_parsed_now) {
        const std::size_t line_start = skip_empty_lines(buffered);
        std::size_t line_end = section_start_ - 1;
        if (line_end > line_start && data[line_end - 1] == '\r') --line_end;
        const parse_result line_result = parse_request_line(buffered.substr(line_start, line_end - line_start), head);
        if (line_result.outcome == parse_outcome::error) return line_result;
    }

    const std::size_t capacity =
        field_storage.size() < limits_.max_header_fields ? field_storage.size() : limits_.max_header_fields;
    std::size_t count = 0;
    coding_state codings;
    bool close = false;
    bool keep_alive = false;
    std::size_t pos = section_start_;
    while (pos < head_end) {
        const char* const line = data + pos;
        const std::size_t room = head_end - pos;
        if (line[0] == '\n' || (line[0] == '\r' && line[1] == '\n')) break;
        if (is_ows(line[0])) return fail(400, "obsolete line folding");
        std::size_t colon = 0;
        while (is_tchar(line[colon])) ++colon;
        if (line[colon] != ':') {
            if (is_ows(line[colon])) return fail(400, "whitespace before colon");
            return fail(400, "malformed header field");
        }
        if (colon == 0) return fail(400, "empty header name");
        // Value bytes never include CR or LF, so the scan stops at the line's end or at a bad byte.
        std::size_t end = skip_plain_value_bytes(line, colon + 1, room);
        while (is_value_byte(line[end])) ++end;
        std::size_t next = end + 1;
        if (line[end] == '\r' && end + 1 < room && line[end + 1] == '\n') {
            next = end + 2;
        } else if (line[end] != '\n') {
            return fail(400, "invalid header value");
        }
        pos += next;
        if (count == limits_.max_header_fields || count == capacity) return fail(431, "too many header fields");

        const std::string_view name(line, colon);
        const std::string_view value = trim_ows(std::string_view(line + colon + 1, end - colon - 1));
        field_storage[count++] = {name, value};

        switch (name.size()) {
        case 4:
            if (equal_ignoring_case(name, "host")) {
                if (head.has_host) return fail(400, "duplicate host");
                if (host_checked_before(value)) {
                    head.host_is_loopback = remembered_host_loopback_;
                } else {
                    if (!valid_host(value)) return fail(400, "malformed Host");
                    head.host_is_loopback = loopback_authority(value);
                    remember_host(value, head.host_is_loopback);
                }
                head.has_host = true;
                head.host = value;
            }
            break;
        case 6:
            if (equal_ignoring_case(name, "expect")) {
                if (equal_ignoring_case(value, "100-continue")) {
                    head.expect_continue = true;
                } else {
                    head.expect_unsupported = true;
                }
            } else if (equal_ignoring_case(name, "origin") && !head.has_origin) {
                head.has_origin = true;
                head.origin = value;
            }
            break;
        case 10:
            if (equal_ignoring_case(name, "connection")) add_connection_options(value, close, keep_alive);
            break;
        case 14:
            if (equal_ignoring_case(name, "content-length")) {
                std::uint64_t length = 0;
                const parse_result r = parse_content_length(value, length);
                if (r.outcome == parse_outcome::error) return r;
                if (head.has_content_length && length != head.content_length) {
                    return fail(400, "conflicting content-length");
                }
                head.has_content_length = true;
                head.content_length = length;
            }
            break;
        case 17:
            if (equal_ignoring_case(name, "transfer-encoding")) {
                const parse_result r = add_transfer_codings(value, codings);
                if (r.outcome == parse_outcome::error) return r;
            }
            break;
        default:
            break;
        }
    }

    if (codings.seen) {
        if (head.version_minor == 0) return fail(400, "transfer-encoding in http/1.0");
        if (head.has_content_length) return fail(400, "content-length with transfer-encoding");
        if (!codings.last_chunked) return fail(400, "transfer-encoding not ending in chunked");
        if (codings.chunked_count > 1) return fail(400, "chunked applied twice");
        if (codings.other) return fail(501, "unsupported transfer coding");
        head.chunked = true;
    }
    if (head.version_minor == 1 && !head.has_host) return fail(400, "missing host");

    head.connection = close ? connection_option::close
                      : keep_alive ? connection_option::keep_alive
                                   : connection_option::none;
    head.fields = std::span<const header_field>(field_storage.data(), count);
    head.head_bytes = head_end;
    return ok();
}

bool valid_field_value(std::string_view value) {
    if (!value.empty() && (is_ows(value.front()) || is_ows(value.back()))) return false;
    for (char c : value)
        if (!is_value_byte(c)) return false;
    return true;
}

}  // namespace percore::net
