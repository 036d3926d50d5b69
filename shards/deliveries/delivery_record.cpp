#include "shards/deliveries/delivery_record.hpp"

#include <span>

#include "crypto/digest.hpp"
#include "shards/base/json_text.hpp"
#include "shards/base/encoding.hpp"
#include "shards/base/json_value.hpp"
#include "shards/base/limits.hpp"

namespace percore::shards {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equal_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != b[i]) return false;
    return true;
}

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool valid_reg_name(std::string_view host) {
    if (host.empty()) return false;
    for (char c : host)
        if (!is_alnum(c) && c != '.' && c != '-') return false;
    return true;
}

bool valid_ip_literal(std::string_view host) {  // "[…]"
    if (host.size() < 3) return false;
    for (char c : host.substr(1, host.size() - 2))
        if (!is_alnum(c) && c != ':' && c != '.') return false;
    return true;
}

// `authority` is host[:port] (no userinfo): fills host and port, or says why not.
std::optional<std::string> split_authority(std::string_view authority, delivery_url& out) {
    std::string_view host = authority, port;
    if (authority.starts_with('[')) {
        std::size_t close = authority.find(']');
        if (close == std::string_view::npos) return "url host has an unclosed '['";
        host = authority.substr(0, close + 1);
        std::string_view after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after[0] != ':') return "url has characters after its host";
            port = after.substr(1);
            if (port.empty()) return "url port must be a number from 1 to 65535";
        }
        if (!valid_ip_literal(host)) return "url host is not a valid IP literal";
    } else if (std::size_t colon = authority.find(':'); colon != std::string_view::npos) {
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
        if (port.empty()) return "url port must be a number from 1 to 65535";
    }
    if (!host.starts_with('[') && !valid_reg_name(host)) return "url host must be a name of A-Z a-z 0-9 . - or an IP";
    out.host.assign(host);
    if (port.empty()) return std::nullopt;
    std::uint32_t n = 0;
    if (port.size() > 5) return "url port must be a number from 1 to 65535";
    for (char c : port) {
        if (c < '0' || c > '9') return "url port must be a number from 1 to 65535";
        n = n * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (n < 1 || n > 65535) return "url port must be a number from 1 to 65535";
    out.port = static_cast<std::uint16_t>(n);
    return std::nullopt;
}

void append_time(std::string& out, std::int64_t t) { append_uint(out, static_cast<std::uint64_t>(t > 0 ? t : 0)); }

}  // namespace

std::string_view state_name(delivery_state s) {
    switch (s) {
    case delivery_state::active: return "active";
    case delivery_state::retrying: return "retrying";
    case delivery_state::failed: return "failed";
    case delivery_state::disabled: return "disabled";
    }
    return "active";
}

std::optional<delivery_state> parse_delivery_state(std::string_view s) {
    for (delivery_state d : {delivery_state::active, delivery_state::retrying, delivery_state::failed,
                             delivery_state::disabled})
        if (state_name(d) == s) return d;
    return std::nullopt;
}

result<delivery_url> parse_delivery_url(std::string_view url) {
    if (url.empty()) return std::unexpected("url is empty");
    if (url.size() > max_delivery_url_bytes) return std::unexpected("url is longer than 2048 bytes");
    for (char c : url)
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
            return std::unexpected("url holds a space, a control or a non-ASCII character");
    if (url.find('#') != std::string_view::npos) return std::unexpected("url must not have a fragment");
    const std::size_t sep = url.find("://");
    if (sep == std::string_view::npos) return std::unexpected("url must begin with http:// or https://");
    delivery_url out;
    const std::string_view scheme = url.substr(0, sep);
    if (equal_ignoring_case(scheme, "https")) out.https = true;
    else if (!equal_ignoring_case(scheme, "http")) return std::unexpected("url scheme must be http or https");
    out.port = out.https ? 443 : 80;
    const std::string_view rest = url.substr(sep + 3);
    const std::size_t end = rest.find_first_of("/?");
    const std::string_view authority = rest.substr(0, end);
    if (authority.find('@') != std::string_view::npos) return std::unexpected("url must not hold user information");
    if (auto why = split_authority(authority, out)) return std::unexpected(std::move(*why));
    std::string_view target = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    if (!target.starts_with('/')) out.target.push_back('/');
    out.target.append(target);
    return out;
}

delivery_secrets make_delivery_secrets() {
    delivery_secrets s;
    std::array<std::uint8_t, signing_secret_bytes> key{};
    crypto::random_bytes(key);
    crypto::random_bytes(s.seal_key);
    s.signing_secret.assign(signing_secret_prefix);
    append_base64(s.signing_secret, key);
    key.fill(0);
    return s;
}

std::string make_batch_id() {
    std::array<std::uint8_t, 16> id{};
    crypto::random_bytes(id);
    std::string out = "msg_";
    append_hex(out, id);
    return out;
}

std::optional<std::string> signing_key_of(std::string_view signing_secret) {
    if (!signing_secret.starts_with(signing_secret_prefix)) return std::nullopt;
    auto key = decode_base64(signing_secret.substr(signing_secret_prefix.size()));
    if (!key || key->empty()) return std::nullopt;
    return std::string(key->begin(), key->end());
}

std::string encode_delivery_record(const delivery_record& d) {
    std::string out = "{\"url\":";
    append_json_string(out, d.url);
    out.append(",\"prefix\":");
    append_json_string(out, d.prefix);
    out.append(d.seal ? ",\"seal\":true" : ",\"seal\":false");
    out.append(d.seal_key_shown ? ",\"seal_key_shown\":true" : ",\"seal_key_shown\":false");
    out.append(",\"ca_pem\":");
    append_json_string(out, d.ca_pem);
    if (!d.ca_file.empty()) {  // a record from before ca_pem keeps saying so (delivery_record.hpp)
        out.append(",\"ca_file\":");
        append_json_string(out, d.ca_file);
    }
    out.append(",\"signing_secret\":");
    append_json_string(out, d.secrets.signing_secret);
    out.append(",\"seal_key\":\"");
    append_hex(out, d.secrets.seal_key);
    out.append("\",\"cursor\":");
    append_json_string(out, d.cursor);
    out.append(",\"cursor_moved\":");
    append_time(out, d.cursor_moved_unix_ms);
    out.append(",\"state\":\"").append(state_name(d.state)).append("\",\"attempts\":");
    append_uint(out, d.attempts);
    out.append(",\"last_status\":");
    if (d.last_status) append_uint(out, static_cast<std::uint64_t>(*d.last_status));
    else out.append("null");
    out.append(",\"last_error\":");
    if (d.last_error) append_json_string(out, *d.last_error);
    else out.append("null");
    out.append(",\"next_attempt\":");
    append_time(out, d.next_attempt_unix_ms);
    out.append(",\"batch_id\":");
    append_json_string(out, d.batch_id);
    out.append(",\"created\":");
    append_time(out, d.created_unix_ms);
    out.append(",\"updated\":");
    append_time(out, d.updated_unix_ms);
    out.push_back('}');
    return out;
}

namespace {

// The fields a record must have, by kind; any missing or ill-typed one makes it malformed.
struct record_reader {
    const json_value& v;
    bool ok = true;

    const std::string& text(std::string_view name) {
        static const std::string none;
        const json_value* f = v.find(name);
        if (!f || f->what != json_value::kind::string) ok = false;
        return ok ? f->text : none;
    }
    // A string member that records of older versions lack (absent: empty).
    const std::string& optional_text(std::string_view name) {
        static const std::string none;
        return v.find(name) ? text(name) : none;
    }
    bool flag(std::string_view name) {
        const json_value* f = v.find(name);
        if (!f || f->what != json_value::kind::boolean) ok = false;
        return ok && f->flag;
    }
    std::uint64_t count(std::string_view name) {
        const json_value* f = v.find(name);
        auto n = f ? f->as_count() : std::nullopt;
        if (!n) ok = false;
        return n.value_or(0);
    }
    const json_value* nullable(std::string_view name, json_value::kind k) {
        const json_value* f = v.find(name);
        if (!f || (f->what != json_value::kind::null && f->what != k)) ok = false;
        return ok && f->what == k ? f : nullptr;
    }
};

bool read_settings(record_reader& in, delivery_record& d) {
    d.url = in.text("url");
    d.prefix = in.text("prefix");
    d.seal = in.flag("seal");
    d.seal_key_shown = in.flag("seal_key_shown");
    d.ca_pem = in.optional_text("ca_pem");   // absent in records written before it
    d.ca_file = in.optional_text("ca_file");  // present only in those
    d.secrets.signing_secret = in.text("signing_secret");
    auto key = decode_hex(in.text("seal_key"));
    if (!in.ok || !key || key->size() != seal_key_bytes || !parse_delivery_url(d.url) ||
        !signing_key_of(d.secrets.signing_secret))
        return false;
    std::copy(key->begin(), key->end(), d.secrets.seal_key.begin());
    return true;
}

bool read_progress(record_reader& in, delivery_record& d) {
    d.cursor = in.text("cursor");
    d.cursor_moved_unix_ms = static_cast<std::int64_t>(in.count("cursor_moved"));
    auto state = parse_delivery_state(in.text("state"));
    const std::uint64_t attempts = in.count("attempts");
    const json_value* status = in.nullable("last_status", json_value::kind::number);
    const json_value* error = in.nullable("last_error", json_value::kind::string);
    d.next_attempt_unix_ms = static_cast<std::int64_t>(in.count("next_attempt"));
    d.batch_id = in.text("batch_id");
    d.created_unix_ms = static_cast<std::int64_t>(in.count("created"));
    d.updated_unix_ms = static_cast<std::int64_t>(in.count("updated"));
    if (!in.ok || !state || attempts > UINT32_MAX) return false;
    d.state = *state;
    d.attempts = static_cast<std::uint32_t>(attempts);
    if (status) {
        auto n = status->as_count();
        if (!n || *n > 999) return false;
        d.last_status = static_cast<int>(*n);
    }
    if (error) d.last_error = error->text;
    return true;
}

}  // namespace

result<delivery_record> decode_delivery_record(std::string_view value) {
    auto v = parse_json(value);
    if (!v) return std::unexpected(v.error());
    if (v->what != json_value::kind::object) return std::unexpected("delivery record is not an object");
    record_reader in{*v};
    delivery_record d;
    if (!read_settings(in, d) || !read_progress(in, d)) return std::unexpected("malformed delivery record");
    return d;
}

}  // namespace percore::shards
