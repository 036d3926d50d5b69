#include "shards/feed/feed_cursor.hpp"

#include <charconv>

#include "net/limits.hpp"
#include "store/crc32c.hpp"

namespace percore::shards {

namespace {

void append_hex(std::string& out, std::uint64_t v) {
    char buf[16];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, 16);
    out.append(buf, end);
}

// One hex field of at most 16 digits, the whole of `s`.
bool read_hex(std::string_view s, std::uint64_t& out) {
    if (s.empty() || s.size() > 16) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    if (s.size() > 1 && s[0] == '0') return false;  // one text per cursor
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
    return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

void append_cursor(std::string& out, const feed_cursor& c) {
    const std::size_t start = out.size();
    append_hex(out, c.directory_id);
    out.push_back('-');
    append_hex(out, c.generation);
    out.push_back('-');
    for (std::size_t i = 0; i < c.versions.size(); ++i) {
        if (i) out.push_back('.');
        append_hex(out, c.versions[i]);
    }
    const std::uint32_t crc = store::crc32c(out.data() + start, out.size() - start);
    out.push_back('-');
    append_hex(out, crc);
}

std::string cursor_text(const feed_cursor& c) {
    std::string s;
    append_cursor(s, c);
    return s;
}

result<feed_cursor> parse_cursor(std::string_view text) {
    constexpr const char* not_ours = "since is not a cursor";
    if (text.empty() || text.size() > net::max_cursor_bytes) return std::unexpected(not_ours);
    const std::size_t last = text.rfind('-');
    if (last == std::string_view::npos) return std::unexpected(not_ours);
    std::uint64_t crc = 0;
    if (!read_hex(text.substr(last + 1), crc) || crc > 0xffffffffu) return std::unexpected(not_ours);
    std::string_view body = text.substr(0, last);
    if (store::crc32c(body.data(), body.size()) != crc) return std::unexpected(not_ours);
    feed_cursor c;
    const std::size_t first = body.find('-');
    const std::size_t second = first == std::string_view::npos ? first : body.find('-', first + 1);
    if (second == std::string_view::npos) return std::unexpected(not_ours);
    if (!read_hex(body.substr(0, first), c.directory_id) ||
        !read_hex(body.substr(first + 1, second - first - 1), c.generation))
        return std::unexpected(not_ours);
    std::string_view rest = body.substr(second + 1);
    for (;;) {
        const std::size_t dot = rest.find('.');
        std::uint64_t v = 0;
        if (!read_hex(rest.substr(0, dot), v)) return std::unexpected(not_ours);
        c.versions.push_back(v);
        if (dot == std::string_view::npos) break;
        rest = rest.substr(dot + 1);
    }
    return c;
}

std::uint64_t cursor_position(std::string_view text) {
    auto cursor = parse_cursor(text);
    if (!cursor) return 0;
    std::uint64_t sum = 0;
    for (std::uint64_t v : cursor->versions) sum = v > UINT64_MAX - sum ? UINT64_MAX : sum + v;
    return sum;
}

}  // namespace percore::shards
