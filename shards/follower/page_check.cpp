#include "shards/follower/page_check.hpp"

#include "net/request_parser.hpp"
#include "net/response.hpp"
#include "net/route.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/base/encoding.hpp"
#include "shards/base/json_value.hpp"
#include "shards/base/limits.hpp"
#include "shards/deliveries/delivery_record.hpp"
#include "shards/feed/feed_cursor.hpp"
#include "shards/runtime/check.hpp"
#include "store/limits.hpp"

namespace percore::shards {

namespace {

using kind = json_value::kind;

// The member `name` of `object` as a string, moved out of it; false when absent or of another kind.
bool take_string(json_value& object, std::string_view name, std::string& out) {
    for (std::size_t i = 0; i < object.names.size(); ++i) {
        if (object.names[i] != name) continue;
        if (object.items[i].what != kind::string) return false;
        out = std::move(object.items[i].text);
        return true;
    }
    return false;
}

bool absent_or_null(const json_value& object, std::string_view name) {
    const json_value* v = object.find(name);
    return !v || v->what == kind::null;
}

// A change object of the page: its fields, the put's value decoded; the rules are check_change's.
result<page_change> read_change(json_value& c) {
    if (c.what != kind::object) return std::unexpected("a change is not an object");
    page_change out;
    if (!take_string(c, "app", out.app) || !take_string(c, "key", out.key))
        return std::unexpected("a change without an app or a key as strings");
    const json_value* deleted = c.find("deleted");
    if (!deleted || deleted->what != kind::boolean) return std::unexpected("a change without deleted as a boolean");
    out.deleted = deleted->flag;
    if (out.deleted) {
        if (!absent_or_null(c, "content_type") || !absent_or_null(c, "value_base64"))
            return std::unexpected("a deletion with a content type or a value");
        return out;
    }
    std::string base64;
    if (!take_string(c, "content_type", out.content_type) || !take_string(c, "value_base64", base64))
        return std::unexpected("a put without content_type or value_base64 as strings");
    auto bytes = decode_base64(base64);
    if (!bytes) return std::unexpected("a put whose value_base64 is not padded base64");
    std::string etag;
    if (!take_string(c, "etag", etag) || !net::parse_etag(etag, false, out.etag_version))
        return std::unexpected("a put whose etag is not an entity tag percore makes");
    out.value.assign(bytes->begin(), bytes->end());
    PERCORE_ASSERT(out.value.size() <= max_replication_page_bytes);  // 3/4 of its base64, inside the page
    return out;
}

// An app's token, or a replication token (scope replicate, no app: catalog.hpp), which a follower
// copies too so that its own followers may copy from it once it is promoted.
bool valid_token_record(std::string_view value) {
    auto t = decode_token_record(value);
    const bool owner_ok = t && (t->scope == token_scope::replicate ? t->app.empty() : net::valid_app_name(t->app));
    return owner_ok && t->prefix.size() <= net::max_key_bytes;
}

// A "_percore" change: a record kind the catalog has, its names by the rules, a put's value decoded
// as recovery decodes it.
result<void> check_catalog_change(const page_change& c) {
    std::string_view rest = c.key;
    const auto bad = [&](const char* what) { return result<void>(std::unexpected(problem(what))); };
    if (rest.starts_with(follower_records.substr(catalog_namespace.size() + 1))) return {};  // passed over
    if (rest.starts_with("app/")) {
        if (!net::valid_app_name(rest.substr(4))) return bad("an app record whose name breaks the app name rule");
        if (!c.deleted && !decode_app_record(c.value)) return bad("an app record that does not decode");
        return {};
    }
    if (rest.starts_with("deleted/")) {
        if (!net::valid_app_name(rest.substr(8))) return bad("a deleted-app record whose name breaks the app name rule");
        return {};
    }
    if (rest.starts_with("token/")) {
        const std::string_view id = rest.substr(6);
        if (id.size() != token_id_chars || !is_lower_hex(id)) return bad("a token record whose id is not a token id");
        if (!c.deleted && !valid_token_record(c.value)) return bad("a token record that does not decode");
        return {};
    }
    if (rest.starts_with("delivery/")) {
        const std::string_view names = rest.substr(9);
        const std::size_t slash = names.find('/');
        if (slash == std::string_view::npos || !net::valid_app_name(names.substr(0, slash)) ||
            !net::valid_app_name(names.substr(slash + 1)))
            return bad("a delivery record whose app or name breaks the name rule");
        if (!c.deleted && !decode_delivery_record(c.value)) return bad("a delivery record that does not decode");
        return {};
    }
    return bad("a catalog record of no kind the catalog has");
}

// The page's own members: last_cursor, pending, epoch, and the changes array's shape.
result<void> read_page_members(json_value& page, checked_page& out) {
    if (page.what != kind::object) return std::unexpected("the page is not a JSON object");
    if (!take_string(page, "last_cursor", out.last_cursor)) return std::unexpected("the page has no last_cursor string");
    if (out.last_cursor != "0" && !parse_cursor(out.last_cursor))
        return std::unexpected("the page's last_cursor is not a cursor");
    const json_value* pending = page.find("pending");
    auto count = pending ? pending->as_count() : std::nullopt;
    if (!count) return std::unexpected("the page's pending is not a count");
    out.pending = *count;
    if (const json_value* epoch = page.find("epoch")) {  // absent from a primary older than SPEC §12
        auto e = epoch->as_count();
        if (!e) return std::unexpected("the page's epoch is not a count");
        out.epoch = *e;
    }
    const json_value* changes = page.find("changes");
    if (!changes || changes->what != kind::array) return std::unexpected("the page has no changes array");
    if (changes->items.size() > max_replication_page_changes)
        return std::unexpected("the page holds more changes than the follower asked for");
    return {};
}

}  // namespace

result<void> check_change(const page_change& c) {
    const bool catalog = c.app == catalog_namespace;
    if (!catalog && !net::valid_app_name(c.app)) return std::unexpected("an app name that breaks the app name rule");
    if (const char* why = net::key_problem(c.key)) return std::unexpected(std::string("a key that breaks the key rule: ") + why);
    if (!c.deleted) {
        if (c.content_type.size() > max_replication_content_type_bytes)
            return std::unexpected("a content type longer than a request's header section");
        if (!net::valid_field_value(c.content_type))
            return std::unexpected("a content type that is not an HTTP field value (control characters)");
        // 0 stands for "no copied version"; from 2^63 on, the versions after it would wrap
        if (c.etag_version == 0 || c.etag_version >= store::version_limit)
            return std::unexpected("a put whose etag names a version no store hands out");
    } else if (!c.content_type.empty() || !c.value.empty()) {
        return std::unexpected("a deletion with a content type or a value");
    }
    if (catalog) return check_catalog_change(c);
    return {};
}

result<checked_page> read_replication_page(std::string_view body) {
    if (body.size() > max_replication_page_bytes) return std::unexpected("the page is over 64 MiB");
    auto parsed = parse_json(body, max_replication_page_bytes);
    if (!parsed) return std::unexpected("the page is not JSON: " + parsed.error().reason);
    checked_page out;
    if (auto members = read_page_members(*parsed, out); !members) return std::unexpected(std::move(members.error()));
    for (std::size_t i = 0; i < parsed->names.size(); ++i) {
        if (parsed->names[i] != "changes") continue;
        std::vector<json_value>& items = parsed->items[i].items;
        out.changes.reserve(items.size());
        for (json_value& item : items) {
            auto change = read_change(item);
            if (!change) return std::unexpected(std::move(change.error()));
            if (auto checked = check_change(*change); !checked) return std::unexpected(std::move(checked.error()));
            out.changes.push_back(std::move(*change));
            item = json_value{};  // its strings moved out; the rest is freed as the copy grows
        }
    }
    PERCORE_ASSERT(out.changes.size() <= max_replication_page_changes);
    return out;
}

}  // namespace percore::shards
