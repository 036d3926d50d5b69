#include "net/byte_range.hpp"

#include <charconv>

namespace percore::net {

namespace {

bool ows(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view v) {
    while (!v.empty() && ows(v.front())) v.remove_prefix(1);
    while (!v.empty() && ows(v.back())) v.remove_suffix(1);
    return v;
}

// Digits only (no sign, no spaces), at most 19 of them: a larger position is past any document.
bool number(std::string_view s, std::uint64_t& out) {
    if (s.empty() || s.size() > 19) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

byte_range parse_byte_range(std::string_view value, std::uint64_t length) {
    byte_range whole;
    value = trim(value);
    if (value.size() < 6 || !(value.substr(0, 6) == "bytes=" || value.substr(0, 6) == "BYTES=" ||
                              value.substr(0, 6) == "Bytes="))
        return whole;   // another unit
    std::string_view spec = trim(value.substr(6));
    if (spec.find(',') != std::string_view::npos) return whole;   // several ranges: the whole document
    std::size_t dash = spec.find('-');
    if (dash == std::string_view::npos) return whole;
    std::string_view a = spec.substr(0, dash), b = spec.substr(dash + 1);
    byte_range r;
    if (a.empty()) {   // a suffix: the last b bytes
        std::uint64_t suffix;
        if (!number(b, suffix)) return whole;
        if (suffix == 0 || length == 0) return {byte_range::kind::unsatisfiable, 0, 0};
        r.first = suffix >= length ? 0 : length - suffix;
        r.last = length - 1;
        r.what = byte_range::kind::part;
        return r;
    }
    std::uint64_t first, last = 0;
    if (!number(a, first)) return whole;
    if (!b.empty()) {
        if (!number(b, last) || last < first) return whole;   // invalid: ignored (RFC 9110 §14.1.1)
    }
    if (first >= length) return {byte_range::kind::unsatisfiable, 0, 0};
    r.first = first;
    r.last = b.empty() || last >= length ? length - 1 : last;
    r.what = byte_range::kind::part;
    return r;
}

namespace {
char* put_decimal(std::uint64_t v, char* at) {
    auto [end, ec] = std::to_chars(at, at + 20, v);
    (void)ec;   // 20 digits hold every uint64
    return end;
}
}  // namespace

std::string_view format_content_range(std::uint64_t first, std::uint64_t last, std::uint64_t length, char* out) {
    char* at = out;
    for (char c : std::string_view("bytes ")) *at++ = c;
    at = put_decimal(first, at);
    *at++ = '-';
    at = put_decimal(last, at);
    *at++ = '/';
    at = put_decimal(length, at);
    return {out, static_cast<std::size_t>(at - out)};
}

std::string_view format_unsatisfied_range(std::uint64_t length, char* out) {
    char* at = out;
    for (char c : std::string_view("bytes */")) *at++ = c;
    at = put_decimal(length, at);
    return {out, static_cast<std::size_t>(at - out)};
}

}  // namespace percore::net
