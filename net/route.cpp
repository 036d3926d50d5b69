#include "net/route.hpp"

#include <cstring>
#include <utility>

#include "net/hex.hpp"

namespace percore::net {

namespace {

bool valid_app(std::string_view app) { return valid_app_name(app); }

route bad(const char* reason) {
    route r;
    r.kind = target_kind::bad;
    r.reason = reason;
    return r;
}

// `raw` is the query value as sent: it is percent-decoded ('+' is a space) like every list
// parameter (SPEC §2), then must be 1 to 4 decimal digits worth 1..1000.
bool parse_limit(std::string_view raw, std::uint32_t& out) {
    char decoded[4];
    const std::ptrdiff_t size = percent_decode(raw, decoded, sizeof decoded, true);
    if (size < 0) return false;  // a malformed escape, or more than 4 bytes
    const std::string_view v(decoded, static_cast<std::size_t>(size));
    if (v.empty()) return false;
    std::uint32_t n = 0;
    for (char c : v) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (n < 1 || n > max_list_limit) return false;
    out = n;
    return true;
}

// Seconds for timeout/heartbeat: 1 to 3 decimal digits worth min..max.
bool parse_seconds(std::string_view raw, std::uint32_t min, std::uint32_t max, std::uint32_t& out) {
    char decoded[4];
    const std::ptrdiff_t size = percent_decode(raw, decoded, sizeof decoded, true);
    if (size <= 0 || size > 3) return false;
    std::uint32_t n = 0;
    for (std::ptrdiff_t i = 0; i < size; ++i) {
        if (decoded[i] < '0' || decoded[i] > '9') return false;
        n = n * 10 + static_cast<std::uint32_t>(decoded[i] - '0');
    }
    if (n < min || n > max) return false;
    out = n;
    return true;
}

bool parse_feed(std::string_view raw, feed_mode& out) {
    if (raw == "normal") out = feed_mode::normal;
    else if (raw == "longpoll") out = feed_mode::longpoll;
    else if (raw == "continuous") out = feed_mode::continuous;
    else if (raw == "eventsource") out = feed_mode::eventsource;
    else return false;
    return true;
}

// The next name=value pair of a query string, consumed from `query`.
std::pair<std::string_view, std::string_view> next_param(std::string_view& query) {
    std::size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    std::size_t eq = pair.find('=');
    return {pair.substr(0, eq), eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1)};
}

// `rest` is what follows "/_changes": "/{app}" (a trailing slash allowed).
route parse_changes_route(std::string_view rest, std::string_view query, route_scratch& scratch) {
    if (rest.empty() || rest == "/") return route{};
    std::string_view app = rest.substr(1);
    if (app.ends_with('/')) app.remove_suffix(1);
    const bool replication = app == replication_feed_name;
    if (!replication && !valid_app(app)) return app.find('/') == std::string_view::npos ? bad("invalid app name") : route{};
    route r;
    r.kind = replication ? target_kind::replication : target_kind::changes;
    if (!replication) r.app = app;
    r.limit = default_changes_limit;
    while (!query.empty()) {
        auto [name, value] = next_param(query);
        if (name == "since") {
            std::ptrdiff_t n = percent_decode(value, scratch.since, max_cursor_bytes, true);
            if (n < 0) return bad("since is not a cursor");
            r.since = std::string_view(scratch.since, static_cast<std::size_t>(n));
            r.has_since = true;
        } else if (name == "feed") {
            if (!parse_feed(value, r.feed)) return bad("feed must be normal, longpoll, continuous or eventsource");
        } else if (name == "limit") {
            if (!parse_limit(value, r.limit)) return bad("limit must be 1 to 1000");
        } else if (name == "timeout") {
            if (!parse_seconds(value, 0, max_changes_timeout_s, r.timeout_s)) return bad("timeout must be 0 to 300");
        } else if (name == "heartbeat") {
            if (!parse_seconds(value, 1, max_changes_heartbeat_s, r.heartbeat_s)) return bad("heartbeat must be 1 to 300");
        } else if (name == "prefix") {
            std::ptrdiff_t n = percent_decode(value, scratch.prefix, max_key_bytes, true);
            if (n < 0) return bad("invalid prefix");
            r.prefix = std::string_view(scratch.prefix, static_cast<std::size_t>(n));
        }
    }
    if (replication && (r.feed == feed_mode::continuous || r.feed == feed_mode::eventsource))
        return bad("the replication feed is normal or longpoll");
    return r;
}

bool valid_token_id(std::string_view id) {
    if (id.empty() || id.size() > max_token_id_bytes) return false;
    for (char c : id)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

// `rest` is what follows "/_apps": "", "/", "/{app}", "/{app}/tokens", "/{app}/tokens/{id}",
// "/{app}/deliveries", "/{app}/deliveries/{name}".
route parse_admin_route(std::string_view rest) {
    route r;
    if (rest.empty() || rest == "/") {
        r.kind = target_kind::apps;
        return r;
    }
    rest = rest.substr(1);
    std::size_t slash = rest.find('/');
    r.app = rest.substr(0, slash);
    if (!valid_app(r.app)) return bad("invalid app name");
    if (slash == std::string_view::npos) {
        r.kind = target_kind::app;
        return r;
    }
    std::string_view sub = rest.substr(slash + 1);
    if (sub == "tokens" || sub == "tokens/") {
        r.kind = target_kind::app_tokens;
    } else if (sub.starts_with("tokens/") && valid_token_id(sub.substr(7))) {
        r.kind = target_kind::app_token;
        r.key = sub.substr(7);
    } else if (sub == "deliveries" || sub == "deliveries/") {
        r.kind = target_kind::app_deliveries;
    } else if (sub.starts_with("deliveries/")) {
        r.key = sub.substr(11);
        if (!valid_app_name(r.key)) return bad("invalid delivery name");
        r.kind = target_kind::app_delivery;
    } else {
        return route{};  // not_found, naming nothing
    }
    return r;
}

// "/_health/primary" and "/_health/replica", whose `lag` is a count of changes (SPEC §12).
route parse_health_route(std::string_view probe, std::string_view query) {
    route r;
    if (probe == "primary") {
        r.probe = health_probe::primary;
    } else if (probe == "replica") {
        r.probe = health_probe::replica;
    } else {
        return r;  // not_found
    }
    r.kind = target_kind::health;
    while (!query.empty()) {
        auto [name, value] = next_param(query);
        if (name != "lag") continue;
        if (value.empty() || value.size() > max_health_lag_digits) return bad("lag must be a count of changes");
        std::uint64_t n = 0;
        for (char c : value) {
            if (c < '0' || c > '9') return bad("lag must be a count of changes");
            n = n * 10 + static_cast<std::uint64_t>(c - '0');
        }
        r.has_lag = true;
        r.lag = n;
    }
    return r;
}

// `rest` is what follows "/_replication": "/tokens" (or "/tokens/") and "/tokens/{id}".
route parse_replication_route(std::string_view rest) {
    route r;
    if (rest == "/tokens" || rest == "/tokens/") {
        r.kind = target_kind::replication_tokens;
    } else if (rest.starts_with("/tokens/") && valid_token_id(rest.substr(8))) {
        r.kind = target_kind::replication_token;
        r.key = rest.substr(8);
    }
    return r;
}

}  // namespace

bool valid_app_name(std::string_view name) {
    if (name.empty() || name.size() > max_app_bytes || name[0] == '_') return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    return true;
}

std::ptrdiff_t percent_decode(std::string_view in, char* out, std::size_t max, bool plus_is_space) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= in.size()) return -1;
            int hi = hex_digit_value(in[i + 1]);
            int lo = hex_digit_value(in[i + 2]);
            if (hi < 0 || lo < 0) return -1;
            c = static_cast<char>(hi << 4 | lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (n == max) return -1;
        out[n++] = c;
    }
    return static_cast<std::ptrdiff_t>(n);
}

bool valid_utf8(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const auto* end = p + s.size();
    while (p < end) {
        unsigned char c = *p;
        if (c < 0x80) {
            ++p;
            continue;
        }
        std::size_t len;
        std::uint32_t cp;
        if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
        else return false;
        if (static_cast<std::size_t>(end - p) < len) return false;
        for (std::size_t i = 1; i < len; ++i) {
            if ((p[i] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;  // overlong
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        p += len;
    }
    return true;
}

route parse_route(std::string_view target, route_scratch& scratch) {
    if (target == "*") {  // asterisk-form (RFC 9112 §3.2.4): the server as a whole
        route r;
        r.kind = target_kind::asterisk;
        return r;
    }
    // absolute-form: drop scheme and authority
    if (target.starts_with("http://") || target.starts_with("https://")) {
        std::size_t authority = target.find("//") + 2;
        std::size_t slash = target.find('/', authority);
        target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
    if (target.empty() || target[0] != '/') return bad("malformed target");
    std::string_view query;
    if (std::size_t q = target.find('?'); q != std::string_view::npos) {
        query = target.substr(q + 1);
        target = target.substr(0, q);
    }
    std::string_view path = target.substr(1);
    if (path.empty()) return route{};
    if (path[0] == '_') {
        route r;
        if (path == "_health") r.kind = target_kind::health;
        else if (path.starts_with("_health/")) return parse_health_route(path.substr(8), query);
        else if (path == "_metrics") r.kind = target_kind::metrics;
        else if (path == "_stats") r.kind = target_kind::stats;
        else if (path == "_backup") r.kind = target_kind::backup;
        else if (path == "_apps" || path.starts_with("_apps/")) return parse_admin_route(path.substr(5));
        else if (path == "_changes" || path.starts_with("_changes/")) return parse_changes_route(path.substr(8), query, scratch);
        else if (path.starts_with("_replication/")) return parse_replication_route(path.substr(12));
        return r;
    }
    std::size_t slash = path.find('/');
    std::string_view app = path.substr(0, slash);
    if (!valid_app(app)) return bad("invalid app name");
    if (slash == std::string_view::npos) return bad("missing key");
    std::string_view raw_key = path.substr(slash + 1);
    route r;
    r.app = app;
    if (raw_key.empty()) {
        r.kind = target_kind::list;
        while (!query.empty()) {
            auto [name, value] = next_param(query);
            if (name == "prefix") {
                std::ptrdiff_t n = percent_decode(value, scratch.prefix, max_key_bytes, true);
                if (n < 0) return bad("invalid prefix");
                r.prefix = std::string_view(scratch.prefix, static_cast<std::size_t>(n));
            } else if (name == "after") {
                std::ptrdiff_t n = percent_decode(value, scratch.after, max_key_bytes, true);
                if (n < 0) return bad("invalid after");
                r.after = std::string_view(scratch.after, static_cast<std::size_t>(n));
                r.has_after = true;
            } else if (name == "limit") {
                if (!parse_limit(value, r.limit)) return bad("limit must be 1 to 1000");
            }
        }
        return r;
    }
    std::ptrdiff_t n = percent_decode(raw_key, scratch.key, max_key_bytes, false);
    if (n < 0) return bad("invalid key encoding or key longer than 1024 bytes");
    std::string_view key(scratch.key, static_cast<std::size_t>(n));
    if (const char* why = key_problem(key)) return bad(why);
    r.kind = target_kind::document;
    r.key = key;
    return r;
}

}  // namespace percore::net
