// Fuzz target: the list query of net/route (`/{app}/?prefix=&after=&limit=`), and parse_route
// around it.
//
// The input is a request-target: used as it is when it starts with '/' or "http", else as the query
// of a list path ("/fuzz/?" + input). Checked:
// - parse_route never reads or writes out of bounds (sanitizers) and never crashes;
// - deterministic: a second parse into a scratch full of other bytes gives the same route (kind,
//   reason, app, key, prefix, after, has_after, limit);
// - the documented limits (route.hpp, docs/decisions.md "List pages"): limit is 1..1000, 20 when
//   absent; prefix, after and key at most 1024 bytes; the app 1..64 bytes of [a-z0-9_-] not
//   starting with '_' (documents, lists and the /_apps administration routes); a document key is non-empty UTF-8 without NUL; every view points into the
//   target or the caller's scratch; bad routes carry a reason;
// - a list route says what its query says: an independent reading of the query (split on '&',
//   then '=', the last prefix/after/limit wins, every value percent-decoded: '+' is a space, %XX
//   escapes) gives the same prefix, after, has_after and limit, and is bad exactly when an escape in
//   a prefix/after/limit value is malformed, a prefix/after decodes past 1024 bytes, or a decoded
//   limit is not 1 to 4 digits worth 1..1000.
// Any difference or broken rule aborts (libFuzzer keeps the input).
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/route.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace percore::fuzz {

namespace {

using net::route;
using net::route_scratch;
using net::target_kind;

std::string describe(const route& r) {
    return "kind=" + std::to_string(static_cast<int>(r.kind)) + " reason=" + r.reason + " app=" + printable(r.app) +
           " key=" + printable(r.key) + " prefix=" + printable(r.prefix) + " after=" + printable(r.after) +
           " has_after=" + std::to_string(r.has_after) + " limit=" + std::to_string(r.limit);
}

bool same(const route& a, const route& b) {
    return a.kind == b.kind && std::strcmp(a.reason, b.reason) == 0 && a.app == b.app && a.key == b.key &&
           a.prefix == b.prefix && a.after == b.after && a.has_after == b.has_after && a.limit == b.limit;
}

bool within(std::string_view v, const void* begin, std::size_t size) {
    const auto* b = static_cast<const char*>(begin);
    return v.empty() || (v.data() >= b && v.data() + v.size() <= b + size);
}

int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// A reference decoding of a query value: '+' is a space, %XX a byte; nullopt when malformed or
// longer than max_key_bytes.
std::optional<std::string> decode_value(std::string_view v) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] == '%') {
            if (i + 2 >= v.size()) return std::nullopt;  // "%" needs two more bytes
            const int hi = hex(v[i + 1]);
            const int lo = hex(v[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else {
            out += v[i] == '+' ? ' ' : v[i];
        }
    }
    if (out.size() > net::max_key_bytes) return std::nullopt;
    return out;
}

struct expected_list {
    bool bad = false;
    std::string prefix;
    std::string after;
    bool has_after = false;
    std::uint32_t limit = net::default_list_limit;
};

// What the query of a list path asks for, read independently of route.cpp.
expected_list read_query(std::string_view query) {
    expected_list e;
    std::size_t start = 0;
    while (start < query.size()) {
        std::size_t amp = query.find('&', start);
        if (amp == std::string_view::npos) amp = query.size();
        const std::string_view pair = query.substr(start, amp - start);
        start = amp + 1;
        const std::size_t eq = pair.find('=');
        const std::string_view name = pair.substr(0, eq);
        const std::string_view value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
        if (name == "prefix" || name == "after") {
            auto decoded = decode_value(value);
            if (!decoded) {
                e.bad = true;
                return e;
            }
            if (name == "prefix") {
                e.prefix = *decoded;
            } else {
                e.after = *decoded;
                e.has_after = true;
            }
        } else if (name == "limit") {
            // Decoded like every query value (SPEC §2): "%31" is 1, "1+" is "1 " (not a number).
            const auto decoded = decode_value(value);
            bool digits = decoded && !decoded->empty() && decoded->size() <= 4;
            std::uint32_t n = 0;
            for (char c : decoded ? *decoded : std::string()) {
                if (c < '0' || c > '9') digits = false;
                else n = n * 10 + static_cast<std::uint32_t>(c - '0');
            }
            if (!digits || n < 1 || n > net::max_list_limit) {
                e.bad = true;
                return e;
            }
            e.limit = n;
        }
    }
    return e;
}

bool valid_app(std::string_view app) {
    if (app.empty() || app.size() > net::max_app_bytes || app[0] == '_') return false;
    for (char c : app)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    return true;
}

}  // namespace

int list_query_one_input(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const bool whole_target = input.starts_with("/") || input.starts_with("http");
    const std::string target = whole_target ? std::string(input) : "/fuzz/?" + std::string(input);

    // Scratch on the heap, so ASan sees every byte written past it.
    auto scratch = std::make_unique<route_scratch>();
    std::memset(scratch.get(), 0, sizeof(route_scratch));
    const route r = net::parse_route(target, *scratch);
    const std::string what = "target " + printable(target) + ": " + describe(r);

    auto other = std::make_unique<route_scratch>();
    std::memset(other.get(), 0xa5, sizeof(route_scratch));
    const route again = net::parse_route(target, *other);
    FUZZ_CHECK(same(r, again), what + "; again: " + describe(again));

    FUZZ_CHECK(r.limit >= 1 && r.limit <= net::max_list_limit, what);
    FUZZ_CHECK(r.prefix.size() <= net::max_key_bytes && r.after.size() <= net::max_key_bytes &&
                   r.key.size() <= net::max_key_bytes,
               what);
    FUZZ_CHECK(within(r.app, target.data(), target.size()), what);
    if (r.kind == target_kind::app_token || r.kind == target_kind::app_delivery)
        FUZZ_CHECK(within(r.key, target.data(), target.size()), what);
    else FUZZ_CHECK(within(r.key, scratch->key, sizeof scratch->key), what);
    FUZZ_CHECK(within(r.prefix, scratch->prefix, sizeof scratch->prefix), what);
    FUZZ_CHECK(within(r.after, scratch->after, sizeof scratch->after), what);
    FUZZ_CHECK(r.reason != nullptr, what);

    switch (r.kind) {
    case target_kind::bad:
        FUZZ_CHECK(r.reason[0] != '\0', what);
        break;
    case target_kind::document:
        FUZZ_CHECK(valid_app(r.app), what);
        FUZZ_CHECK(!r.key.empty() && std::memchr(r.key.data(), 0, r.key.size()) == nullptr, what);
        FUZZ_CHECK(net::valid_utf8(r.key), what);
        FUZZ_CHECK(r.prefix.empty() && r.after.empty() && !r.has_after && r.limit == net::default_list_limit, what);
        break;
    case target_kind::list:
        FUZZ_CHECK(valid_app(r.app) && r.key.empty(), what);
        if (!r.has_after) FUZZ_CHECK(r.after.empty(), what);
        break;
    case target_kind::app:
    case target_kind::app_tokens:  // /_apps/{app}, /_apps/{app}/tokens
    case target_kind::app_deliveries:  // /_apps/{app}/deliveries
        FUZZ_CHECK(valid_app(r.app) && r.key.empty() && r.prefix.empty() && !r.has_after, what);
        break;
    case target_kind::app_token:  // /_apps/{app}/tokens/{id}: the id is lowercase hex
        FUZZ_CHECK(valid_app(r.app) && !r.key.empty() && r.key.size() <= net::max_token_id_bytes, what);
        for (char c : r.key) FUZZ_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'), what);
        FUZZ_CHECK(r.prefix.empty() && !r.has_after, what);
        break;
    case target_kind::app_delivery:  // /_apps/{app}/deliveries/{name}: the name follows the app rule
        FUZZ_CHECK(valid_app(r.app) && valid_app(r.key), what);
        FUZZ_CHECK(r.prefix.empty() && !r.has_after, what);
        break;
    case target_kind::changes:  // /_changes/{app}: SPEC §8's parameters in range
        FUZZ_CHECK(valid_app(r.app) && r.key.empty() && !r.has_after, what);
        FUZZ_CHECK(r.limit >= 1 && r.limit <= net::max_list_limit, what);
        FUZZ_CHECK(r.timeout_s <= net::max_changes_timeout_s, what);
        FUZZ_CHECK(r.heartbeat_s >= 1 && r.heartbeat_s <= net::max_changes_heartbeat_s, what);
        FUZZ_CHECK(r.since.size() <= net::max_cursor_bytes && (r.has_since || r.since.empty()), what);
        break;
    default:
        FUZZ_CHECK(r.app.empty() && r.key.empty() && r.prefix.empty() && !r.has_after, what);
        break;
    }

    // A list path with a query: the route must say what the query says.
    if (!whole_target) {
        const expected_list e = read_query(input);
        if (e.bad) {
            FUZZ_CHECK(r.kind == target_kind::bad, what);
        } else {
            FUZZ_CHECK(r.kind == target_kind::list, what);
            FUZZ_CHECK(r.app == "fuzz", what);
            FUZZ_CHECK(r.prefix == e.prefix && r.after == e.after && r.has_after == e.has_after && r.limit == e.limit,
                       what + "; expected prefix=" + printable(e.prefix) + " after=" + printable(e.after) +
                           " has_after=" + std::to_string(e.has_after) + " limit=" + std::to_string(e.limit));
        }
    }
    return 0;
}

}  // namespace percore::fuzz

#ifdef PERCORE_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return percore::fuzz::list_query_one_input(data, size);
}
#endif
