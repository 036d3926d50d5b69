#include "shards/base/json_text.hpp"

#include <charconv>
#include <cstring>

#include "shards/runtime/check.hpp"

namespace percore::shards {

void append_uint(std::string& out, std::uint64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, end);
}

// Seconds and bucket bounds as a decimal with up to nine places (nanoseconds), trailing zeros
// dropped. Integer arithmetic only: the shortest-float formatter of libstdc++ would add ~150 KiB
// of tables to the binary and to the idle RSS for the sake of two metrics.
void append_decimal(std::string& out, double v) {
    if (!(v >= 0)) v = 0;
    constexpr double max_seconds = 1e9;
    if (v > max_seconds) v = max_seconds;
    auto nanos = static_cast<std::uint64_t>(v * 1e9 + 0.5);
    append_uint(out, nanos / 1'000'000'000);
    std::uint64_t frac = nanos % 1'000'000'000;
    if (frac == 0) return;
    char digits[10] = {'.'};
    for (int i = 9; i >= 1; --i, frac /= 10) digits[i] = static_cast<char>('0' + frac % 10);
    int len = 10;
    while (digits[len - 1] == '0') --len;
    out.append(digits, static_cast<std::size_t>(len));
}

// num/den as a decimal with up to nine places, trailing zeros dropped; integer arithmetic only,
// and no 1e9 ceiling (a start time in Unix seconds is past it).
void append_ratio(std::string& out, std::uint64_t num, std::uint64_t den) {
    if (den == 0) den = 1;
    append_uint(out, num / den);
    std::uint64_t rest = num % den;
    if (rest == 0) return;
    // rest < den; for dens past 2^34 (never: clock ticks and page sizes) drop precision first
    while (den > (std::uint64_t{1} << 34)) {
        den >>= 1;
        rest >>= 1;
    }
    std::uint64_t frac = (rest * 1'000'000'000 + den / 2) / den;
    if (frac == 0) return;
    if (frac >= 1'000'000'000) frac = 999'999'999;
    char digits[10] = {'.'};
    for (int i = 9; i >= 1; --i, frac /= 10) digits[i] = static_cast<char>('0' + frac % 10);
    int len = 10;
    while (digits[len - 1] == '0') --len;
    out.append(digits, static_cast<std::size_t>(len));
}

namespace {

// Whether any of the eight bytes of `x` is below 0x20, '"' or '\\' (the bytes JSON escapes): the
// classic zero-byte test on x, x ^ '"'s and x ^ '\\'s, and a borrow test for "below 0x20" on the
// bytes under 0x80 (a byte of 0x80 or more is never escaped).
bool needs_escape(std::uint64_t x) {
    constexpr std::uint64_t ones = 0x0101010101010101ull;
    constexpr std::uint64_t highs = 0x8080808080808080ull;
    auto has_zero = [](std::uint64_t v) { return (v - ones) & ~v & highs; };
    const std::uint64_t below_space = (x - ones * 0x20) & ~x & highs;
    return (below_space | has_zero(x ^ (ones * '"')) | has_zero(x ^ (ones * '\\'))) != 0;
}

// The length of the prefix of `s` that needs no escape; eight bytes at a time (a delivery batch
// writes two strings a change: ~7 instructions a byte one at a time).
std::size_t plain_prefix(std::string_view s) {
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t x;
        std::memcpy(&x, s.data() + i, 8);
        if (needs_escape(x)) break;
    }
    while (i < s.size() && static_cast<unsigned char>(s[i]) >= 0x20 && s[i] != '"' && s[i] != '\\') ++i;
    return i;
}

}  // namespace

char* put_json_string(char* o, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    *o++ = '"';
    const std::size_t plain = plain_prefix(s);  // the common case: nothing to escape, one copy
    if (plain) std::memcpy(o, s.data(), plain);
    o += plain;
    for (const char ch : s.substr(plain)) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = ch;
        } else if (c < 0x20) {
            std::memcpy(o, "\\u00", 4);
            o[4] = hex[c >> 4];
            o[5] = hex[c & 0xf];
            o += 6;
        } else {
            *o++ = ch;
        }
    }
    *o++ = '"';
    return o;
}

// Strings of any length (a value can be one): grown once by exactly what put_json_string writes
// (the escapes counted first), so no 6x room for a long string.
void append_json_string(std::string& out, std::string_view s) {
    std::size_t bytes = s.size() + 2;
    for (std::size_t i = plain_prefix(s); i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') bytes += 1;
        else if (c < 0x20) bytes += 5;
    }
    const std::size_t at = out.size();
    out.resize(at + bytes);
    char* end = put_json_string(out.data() + at, s);
    PERCORE_ASSERT(end == out.data() + out.size());
}

}  // namespace percore::shards
