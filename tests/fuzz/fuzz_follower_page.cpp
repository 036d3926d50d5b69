// Fuzz target: a replication page as a follower reads it (shards/follower/page_check.hpp,
// read_replication_page; SPEC §10 "The follower trusts no page"). The input is the body of a
// primary's 200 answer to GET /_changes/_all; the seeds are real pages of a real primary
// (corpus/follower_page/, tests/fuzz/capture_follower_pages.py).
//
// Checked:
// - nothing crashes, asserts, reads out of bounds or leaks (sanitizers), whatever the page holds;
// - deterministic: a second read gives the same verdict (and the same reason, or the same page);
// - a refused page says why (a non-empty reason);
// - an accepted page holds only what the rules allow, checked here independently of the code under
//   test: at most max_replication_page_changes changes; last_cursor "0" or a cursor that prints back
//   as itself; every app 1..64 of [a-z0-9_-] not starting with '_', or "_percore"; every key
//   1..1024 bytes of UTF-8 without NUL; a put's content type at most the header bound, of HT, SP,
//   VCHAR and bytes >= 0x80 only, no whitespace at its ends; a deletion with no content type or
//   value; every "_percore" key of a kind the catalog has;
// - an accepted page, written again as the primary writes pages (replication_page.cpp), is
//   accepted again with the very same changes, cursor and pending: nothing was lost or changed
//   between the text and what the follower submits.
#include <cstdint>
#include <string>
#include <string_view>

#include "shards/base/encoding.hpp"
#include "shards/base/json_text.hpp"
#include "shards/base/limits.hpp"
#include "shards/feed/feed_cursor.hpp"
#include "shards/follower/page_check.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace percore::fuzz {

namespace {

using shards::checked_page;
using shards::page_change;

bool app_name_ok(std::string_view app) {
    if (app == "_percore") return true;
    if (app.empty() || app.size() > 64 || app[0] == '_') return false;
    for (char c : app)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    return true;
}

// UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF.
bool utf8_ok(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const std::size_t n = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (std::size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
        const auto b1 = static_cast<unsigned char>(n > 1 ? s[i + 1] : 0);
        if ((b == 0xe0 && b1 < 0xa0) || (b == 0xed && b1 > 0x9f) || (b == 0xf0 && b1 < 0x90) || (b == 0xf4 && b1 > 0x8f))
            return false;
        i += n;
    }
    return true;
}

bool content_type_ok(std::string_view t) {
    if (t.size() > 16 * 1024) return false;
    if (!t.empty() && (t.front() == ' ' || t.front() == '\t' || t.back() == ' ' || t.back() == '\t')) return false;
    for (char c : t) {
        const auto b = static_cast<unsigned char>(c);
        if ((b < 0x20 && b != '\t') || b == 0x7f) return false;
    }
    return true;
}

bool catalog_key_ok(std::string_view key) {
    for (std::string_view kind : {"app/", "deleted/", "token/", "delivery/", "follower/"})
        if (key.starts_with(kind)) return true;
    return false;
}

void check_accepted(const checked_page& p, const std::string& what) {
    FUZZ_CHECK(p.changes.size() <= shards::max_replication_page_changes, what);
    if (p.last_cursor != "0") {
        auto c = shards::parse_cursor(p.last_cursor);
        FUZZ_CHECK(c && shards::cursor_text(*c) == p.last_cursor, what);
    }
    for (const page_change& c : p.changes) {
        const std::string which = what + " change=" + printable(c.app) + "/" + printable(c.key);
        FUZZ_CHECK(app_name_ok(c.app), which);
        FUZZ_CHECK(!c.key.empty() && c.key.size() <= 1024 && c.key.find('\0') == std::string::npos, which);
        FUZZ_CHECK(utf8_ok(c.key), which);
        if (c.deleted) FUZZ_CHECK(c.content_type.empty() && c.value.empty(), which);
        else FUZZ_CHECK(content_type_ok(c.content_type), which);
        if (c.app == "_percore") FUZZ_CHECK(catalog_key_ok(c.key), which);
        FUZZ_CHECK(shards::check_change(c).has_value(), which);
    }
}

// The page as replication_page.cpp writes it.
std::string written_again(const checked_page& p) {
    std::string out = "{\"changes\":[";
    for (std::size_t i = 0; i < p.changes.size(); ++i) {
        const page_change& c = p.changes[i];
        out.append(i ? ",{\"app\":" : "{\"app\":");
        shards::append_json_string(out, c.app);
        out.append(",\"key\":");
        shards::append_json_string(out, c.key);
        out.append(",\"etag\":\"\\\"0000000000000001\\\"\"");
        if (c.deleted) {
            out.append(",\"deleted\":true,\"content_type\":null,\"value_base64\":null}");
            continue;
        }
        out.append(",\"deleted\":false,\"content_type\":");
        shards::append_json_string(out, c.content_type);
        out.append(",\"value_base64\":\"");
        shards::append_base64(out, shards::bytes_of(c.value));
        out.append("\"}");
    }
    out.append("],\"last_cursor\":");
    shards::append_json_string(out, p.last_cursor);
    out.append(",\"pending\":").append(std::to_string(p.pending)).append("}");
    return out;
}

bool same_page(const checked_page& a, const checked_page& b) {
    if (a.last_cursor != b.last_cursor || a.pending != b.pending || a.changes.size() != b.changes.size()) return false;
    for (std::size_t i = 0; i < a.changes.size(); ++i) {
        const page_change &x = a.changes[i], &y = b.changes[i];
        if (x.app != y.app || x.key != y.key || x.deleted != y.deleted || x.content_type != y.content_type ||
            x.value != y.value)
            return false;
    }
    return true;
}

}  // namespace

int follower_page_one_input(const std::uint8_t* data, std::size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    const std::string what = "page=" + printable(body);
    auto page = shards::read_replication_page(body);
    auto again = shards::read_replication_page(body);
    FUZZ_CHECK(page.has_value() == again.has_value(), what);
    if (!page) {
        FUZZ_CHECK(!page.error().reason.empty() && page.error().reason == again.error().reason, what);
        return 0;
    }
    FUZZ_CHECK(same_page(*page, *again), what);
    check_accepted(*page, what);
    const std::string text = written_again(*page);
    auto reread = shards::read_replication_page(text);
    FUZZ_CHECK(reread.has_value(), what + " written again=" + printable(text) +
                                       (reread ? std::string() : " refused: " + reread.error().reason));
    FUZZ_CHECK(same_page(*page, *reread), what + " written again=" + printable(text));
    return 0;
}

}  // namespace percore::fuzz

#ifdef PERCORE_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return percore::fuzz::follower_page_one_input(data, size);
}
#endif
