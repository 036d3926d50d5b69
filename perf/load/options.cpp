#include "options.hpp"

#include <arpa/inet.h>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>

namespace percore::load {

namespace {

template <typename T>
std::expected<T, std::string> parse_number(std::string_view name, std::string_view text, T lo, T hi) {
    T value{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size())
        return std::unexpected("--" + std::string(name) + ": not a number: " + std::string(text));
    if (!(value >= lo && value <= hi))
        return std::unexpected("--" + std::string(name) + ": out of range: " + std::string(text));
    return value;
}

std::expected<void, std::string> parse_url(std::string_view url, options& o) {
    constexpr std::string_view scheme = "http://";
    if (!url.starts_with(scheme)) return std::unexpected("--url: must start with http://");
    url.remove_prefix(scheme.size());
    if (auto slash = url.find('/'); slash != std::string_view::npos) url = url.substr(0, slash);
    auto colon = url.rfind(':');
    std::string_view host = colon == std::string_view::npos ? url : url.substr(0, colon);
    std::uint16_t port = 80;
    if (colon != std::string_view::npos) {
        auto p = parse_number<std::uint32_t>("url port", url.substr(colon + 1), 1, 65535);
        if (!p) return std::unexpected(p.error());
        port = static_cast<std::uint16_t>(*p);
    }
    std::string host_string(host == "localhost" ? std::string_view("127.0.0.1") : host);
    o.host = std::string(url);
    o.address = {};
    o.address.sin_family = AF_INET;
    o.address.sin_port = htons(port);
    if (inet_pton(AF_INET, host_string.c_str(), &o.address.sin_addr) != 1)
        return std::unexpected("--url: host must be an IPv4 address (or localhost): " + host_string);
    return {};
}

std::expected<void, std::string> parse_mix(std::string_view text, options& o) {
    o.get_percent = 0;
    o.put_percent = 0;
    while (!text.empty()) {
        auto comma = text.find(',');
        std::string_view item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        auto colon = item.find(':');
        if (colon == std::string_view::npos) return std::unexpected("--mix: expected get:P,put:Q");
        auto pct = parse_number<std::uint32_t>("mix", item.substr(colon + 1), 0, 100);
        if (!pct) return std::unexpected(pct.error());
        std::string_view verb = item.substr(0, colon);
        if (verb == "get") o.get_percent = *pct;
        else if (verb == "put") o.put_percent = *pct;
        else return std::unexpected("--mix: unknown request kind: " + std::string(verb));
    }
    if (o.get_percent + o.put_percent != 100) return std::unexpected("--mix: percentages must add up to 100");
    return {};
}

bool valid_app(std::string_view app) {
    if (app.empty() || app.size() > max_app_bytes || app[0] == '_') return false;
    for (char c : app)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    return true;
}

bool valid_path(std::string_view path) {
    if (path.empty() || path[0] != '/' || path.size() > max_path_bytes) return false;
    for (char c : path)   // it goes into the request line as is: no spaces, controls or non-ASCII
        if (c <= ' ' || c > '~') return false;
    return true;
}

bool token_char(char c) {   // RFC 9110 §5.6.2 tchar
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

// One --header 'Name: value' (see options.hpp); appends it to o.headers and o.header_block.
std::expected<void, std::string> parse_header(std::string_view text, options& o) {
    auto colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0)
        return std::unexpected("--header: expected 'Name: value'");
    std::string_view name = text.substr(0, colon);
    for (char c : name)
        if (!token_char(c)) return std::unexpected("--header: the name must be an HTTP token (no spaces)");
    for (std::string_view framed : {"host", "content-length", "transfer-encoding", "connection"})
        if (equal_ignoring_case(name, framed))
            return std::unexpected("--header: " + std::string(name) + " is set by percore-load itself");
    std::string_view value = text.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    for (char c : value)
        if (!(c == ' ' || c == '\t' || (c > ' ' && c <= '~')))
            return std::unexpected("--header: the value must be visible ASCII, spaces or tabs (no CR or LF)");
    if (o.headers.size() >= max_headers)
        return std::unexpected("--header: at most " + std::to_string(max_headers) + " of them");
    std::string field = std::string(name) + ": " + std::string(value);
    if (o.header_block.size() + field.size() + 2 > max_header_bytes)
        return std::unexpected("--header: at most " + std::to_string(max_header_bytes) + " bytes in all");
    o.header_block += field;
    o.header_block += "\r\n";
    o.headers.push_back(std::move(field));
    return {};
}

// Refuses option pairs that contradict each other (see the contract in options.hpp).
std::expected<void, std::string> check_combinations(const options& o) {
    if (!o.path.empty()) {
        if (o.put_percent > 0) return std::unexpected("--path: only GETs; not with a put share in --mix");
        if (o.prepare) return std::unexpected("--path: not with --prepare (it only GETs)");
        if (o.if_match) return std::unexpected("--path: not with --if-match (it only GETs)");
        if (o.style != request_style::percore) return std::unexpected("--path: not with --style etcd");
    }
    if (o.style == request_style::etcd && o.if_match)
        return std::unexpected("--if-match: not with --style etcd");
    return {};
}

}  // namespace

const char* style_name(request_style s) { return s == request_style::etcd ? "etcd" : "percore"; }

const char* usage_text() {
    return "usage: percore-load --url http://HOST:PORT [--connections N] [--threads N]\n"
           "  [--duration SECONDS (0 with --prepare: prepare only)] [--mode keep-alive|close] [--pipeline N] [--mix get:P,put:Q]\n"
           "  [--keys N] [--size BYTES] [--app NAME] [--if-match] [--rate R] [--json FILE|-]\n"
           "  [--prepare] [--path PATH] [--style percore|etcd] [--header 'Name: value' ...]\n"
           "  --path PATH: every request is GET PATH (judged by status 200 and framing only);\n"
           "    not with PUTs in --mix, --prepare, --if-match or --style etcd\n"
           "  --style etcd: speak etcd v3's JSON gateway (POST /v3/kv/put, /v3/kv/range) instead of\n"
           "    percore's document API; not with --if-match\n"
           "  --header 'Name: value': sent on every request (repeatable; e.g. Authorization: Bearer TOKEN);\n"
           "    not Host, Content-Length, Transfer-Encoding or Connection (--mode says that)\n"
           "  --rate R: R requests/s in all, each sent at its intended time, latency counted from it\n"
           "    (no coordinated omission); --connections 1 --rate R is one connection at a fixed rate\n"
           "  --app NAME: every document request goes to /NAME/kKEY, KEY < --keys (one app's keys)\n";
}

std::expected<options, std::string> parse_options(int argc, char** argv) {
    options o;
    bool have_url = false;
    parse_url("http://127.0.0.1:8080", o).value();
    for (int i = 1; i < argc; ++i) {
        std::string_view name = argv[i];
        if (!name.starts_with("--")) return std::unexpected("unexpected argument: " + std::string(name));
        name.remove_prefix(2);
        if (name == "if-match") { o.if_match = true; continue; }
        if (name == "prepare") { o.prepare = true; continue; }
        if (i + 1 >= argc) return std::unexpected("--" + std::string(name) + ": missing value");
        std::string_view value = argv[++i];
        std::expected<void, std::string> r{};
        auto set = [&](auto& field, auto lo, auto hi) {
            auto v = parse_number<std::remove_reference_t<decltype(field)>>(name, value, lo, hi);
            if (!v) r = std::unexpected(v.error());
            else field = *v;
        };
        if (name == "url") { r = parse_url(value, o); have_url = true; }
        else if (name == "connections") set(o.connections, 1u, max_connections);
        else if (name == "threads") set(o.threads, 1u, max_threads);
        else if (name == "duration") set(o.duration_s, 0.0, 86400.0);
        else if (name == "pipeline") set(o.pipeline, 1u, max_pipeline);
        else if (name == "keys") set(o.keys, std::uint64_t{1}, std::uint64_t{1} << 40);
        else if (name == "size") set(o.size, std::uint64_t{0}, max_body_size);
        else if (name == "rate") set(o.rate, 0.0, 1e9);
        else if (name == "json") o.json_path = std::string(value);
        else if (name == "mix") r = parse_mix(value, o);
        else if (name == "header") r = parse_header(value, o);
        else if (name == "app") {
            if (!valid_app(value)) r = std::unexpected("--app: 1-64 bytes of [a-z0-9_-], not starting with _");
            else o.app = std::string(value);
        } else if (name == "path") {
            if (!valid_path(value))
                r = std::unexpected("--path: must start with / and be 1-" + std::to_string(max_path_bytes) +
                                    " bytes of visible ASCII");
            else o.path = std::string(value);
        } else if (name == "style") {
            if (value == "percore") o.style = request_style::percore;
            else if (value == "etcd") o.style = request_style::etcd;
            else r = std::unexpected("--style: percore or etcd");
        } else if (name == "mode") {
            if (value == "keep-alive") o.mode = connection_mode::keep_alive;
            else if (value == "close") o.mode = connection_mode::close;
            else r = std::unexpected("--mode: keep-alive or close");
        } else {
            return std::unexpected("unknown option --" + std::string(name));
        }
        if (!r) return std::unexpected(r.error());
    }
    if (!have_url) return std::unexpected("--url is required");
    if (auto c = check_combinations(o); !c) return std::unexpected(c.error());
    if (o.duration_s == 0 && !o.prepare) return std::unexpected("--duration: 0 only with --prepare (prepare, then stop)");
    if (o.threads > o.connections) o.threads = o.connections;
    if (o.mode == connection_mode::close) o.pipeline = 1;   // one request per connection
    return o;
}

}  // namespace percore::load
