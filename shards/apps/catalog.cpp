#include "shards/apps/catalog.hpp"

#include "crypto/digest.hpp"
#include "net/hex.hpp"
#include "shards/base/json_text.hpp"
#include "shards/base/encoding.hpp"
#include "store/document.hpp"

namespace percore::shards {

namespace {

constexpr std::string_view quota_fields[] = {"documents", "bytes", "max_document_bytes", "requests_per_second",
                                             "connections"};

std::uint64_t* quota_field(app_quota& q, std::string_view name) {
    if (name == "documents") return &q.documents;
    if (name == "bytes") return &q.bytes;
    if (name == "max_document_bytes") return &q.max_document_bytes;
    if (name == "requests_per_second") return &q.requests_per_second;
    if (name == "connections") return &q.connections;
    return nullptr;
}

void fill_random(unsigned char* out, std::size_t n) {
    crypto::random_bytes(std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(out), n));
}

}  // namespace

std::string_view scope_name(token_scope s) {
    switch (s) {
    case token_scope::read: return "read";
    case token_scope::write: return "write";
    case token_scope::admin: return "admin";
    case token_scope::replicate: return "replicate";
    }
    return "read";
}

std::optional<token_scope> parse_scope(std::string_view s) {
    if (s == "read") return token_scope::read;
    if (s == "write") return token_scope::write;
    if (s == "admin") return token_scope::admin;
    return std::nullopt;
}

new_token make_token() {
    unsigned char id[token_id_chars / 2];
    unsigned char secret[32];
    fill_random(id, sizeof id);
    fill_random(secret, sizeof secret);
    new_token t;
    append_hex(t.id, std::span<const std::uint8_t>(id, sizeof id));
    t.token.reserve(token_bytes);
    t.token.append(token_prefix);
    t.token.append(t.id);
    t.token.push_back('_');
    append_base64url(t.token, std::span<const std::uint8_t>(secret, sizeof secret));
    return t;
}

std::string make_admin_token() {
    unsigned char secret[32];
    fill_random(secret, sizeof secret);
    std::string t = "pca_";
    append_base64url(t, std::span<const std::uint8_t>(secret, sizeof secret));
    return t;
}

std::optional<std::string_view> token_id_of(std::string_view token) {
    if (token.size() != token_bytes || !token.starts_with(token_prefix)) return std::nullopt;
    std::string_view id = token.substr(token_prefix.size(), token_id_chars);
    if (!is_lower_hex(id) || token[token_prefix.size() + token_id_chars] != '_') return std::nullopt;
    return id;
}

std::string catalog_key(std::string_view records, std::string_view name) {
    std::string key(records);
    key.append(name);
    return key;
}

std::string delivery_records_of(std::string_view app) {
    std::string key = catalog_key(delivery_records, app);
    key.push_back('/');
    return key;
}

std::string delivery_key(std::string_view app, std::string_view name) { return delivery_records_of(app).append(name); }

void submit_catalog_write(store_client& stores, std::uint64_t tag, std::string key, std::string_view value,
                          store::precondition pre, bool erase) {
    store::write_op w;
    w.tag = tag;
    w.pre = std::move(pre);
    const unsigned owner = stores.owner_of(key);
    if (erase) {
        w.kind = store::write_kind::erase;
        w.key = std::move(key);
    } else {
        w.kind = store::write_kind::put;
        w.doc = store::copy_document(key, "application/json", value);
    }
    stores.submit(owner, std::move(w));
}

void append_quota_json(std::string& out, const app_quota& q) {
    app_quota copy = q;
    out.push_back('{');
    bool first = true;
    for (std::string_view name : quota_fields) {
        std::uint64_t v = *quota_field(copy, name);
        if (v == unlimited) continue;
        if (!first) out.push_back(',');
        first = false;
        append_json_string(out, name);
        out.push_back(':');
        append_uint(out, v);
    }
    out.push_back('}');
}

result<app_quota> quota_from_json(const json_value* quota) {
    app_quota q;
    if (!quota || quota->what == json_value::kind::null) return q;
    if (quota->what != json_value::kind::object) return std::unexpected("quota must be an object");
    for (std::size_t i = 0; i < quota->names.size(); ++i) {
        const std::string& name = quota->names[i];
        const json_value& v = quota->items[i];
        std::uint64_t* field = quota_field(q, name);
        if (!field) return std::unexpected("unknown quota field '" + name + "'");
        if (v.what == json_value::kind::null) continue;
        auto n = v.as_count();
        if (!n) return std::unexpected("quota " + name + " must be a whole number");
        *field = *n;
    }
    return q;
}

std::string encode_app_record(const app_quota& q) {
    std::string out = "{\"quota\":";
    append_quota_json(out, q);
    out.push_back('}');
    return out;
}

result<app_quota> decode_app_record(std::string_view value) {
    auto v = parse_json(value);
    if (!v) return std::unexpected(v.error());
    if (v->what != json_value::kind::object) return std::unexpected("app record is not an object");
    return quota_from_json(v->find("quota"));
}

bool token_record_of(std::string_view value, std::string_view app) {
    constexpr std::string_view head = "{\"app\":";
    if (!value.starts_with(head)) return false;
    std::string quoted;
    append_json_string(quoted, app);
    value.remove_prefix(head.size());
    return value.starts_with(quoted) && value.substr(quoted.size()).starts_with(',');
}

std::string encode_token_record(const token_record& t) {
    std::string out = "{\"app\":";
    append_json_string(out, t.app);
    out.append(",\"scope\":\"").append(scope_name(t.scope)).append("\",\"prefix\":");
    append_json_string(out, t.prefix);
    out.append(",\"expires\":");
    append_uint(out, static_cast<std::uint64_t>(t.expires));
    out.append(",\"created\":");
    append_uint(out, static_cast<std::uint64_t>(t.created));
    out.append(",\"hash\":\"");
    append_hex(out, t.hash);
    out.append("\"}");
    return out;
}

result<token_record> decode_token_record(std::string_view value) {
    auto v = parse_json(value);
    if (!v) return std::unexpected(v.error());
    const json_value *app = v->find("app"), *scope = v->find("scope"), *prefix = v->find("prefix"),
                     *expires = v->find("expires"), *created = v->find("created"), *hash = v->find("hash");
    if (!app || !scope || !prefix || !expires || !created || !hash || app->what != json_value::kind::string ||
        scope->what != json_value::kind::string || prefix->what != json_value::kind::string ||
        hash->what != json_value::kind::string || hash->text.size() != 64 || !is_lower_hex(hash->text) ||
        !expires->as_count() || !created->as_count())
        return std::unexpected("malformed token record");
    auto s = scope->text == "replicate" ? std::optional(token_scope::replicate) : parse_scope(scope->text);
    // a replication token belongs to no app, and every other token to one
    if (!s || (*s == token_scope::replicate) != app->text.empty()) return std::unexpected("malformed token record");
    token_record t;
    t.app = app->text;
    t.scope = *s;
    t.prefix = prefix->text;
    t.expires = static_cast<std::int64_t>(*expires->as_count());
    t.created = static_cast<std::int64_t>(*created->as_count());
    for (std::size_t i = 0; i < 32; ++i)
        t.hash[i] = static_cast<std::uint8_t>(net::hex_digit_value(hash->text[2 * i]) << 4 | net::hex_digit_value(hash->text[2 * i + 1]));
    return t;
}

}  // namespace percore::shards
