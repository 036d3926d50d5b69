// The follower's page check (shards/follower/page_check.hpp): a page the primary made is taken,
// with its values decoded; each field outside SPEC §2/§7's rules refuses the whole page.
#include <doctest.h>

#include <string>
#include <vector>

#include "shards/apps/catalog.hpp"
#include "shards/base/encoding.hpp"
#include "shards/base/json_text.hpp"
#include "shards/base/limits.hpp"
#include "shards/deliveries/delivery_record.hpp"
#include "shards/feed/feed_cursor.hpp"
#include "shards/follower/page_check.hpp"

using namespace percore;
using namespace percore::shards;

namespace {

const std::string cursor = cursor_text(feed_cursor{0x5eed, 1, {3, 7}});

// One change as replication_page.cpp writes it; `content_type` and `base64` are JSON texts as
// they go into the page (so a test can put a number or null there).
std::string change_json(std::string_view app, std::string_view key, bool deleted, std::string_view content_type,
                        std::string_view base64) {
    std::string out = "{\"app\":";
    append_json_string(out, app);
    out.append(",\"key\":");
    append_json_string(out, key);
    out.append(",\"etag\":\"\\\"0000000000000001\\\"\",\"deleted\":").append(deleted ? "true" : "false");
    out.append(",\"content_type\":").append(content_type).append(",\"value_base64\":").append(base64).append("}");
    return out;
}
std::string json_text(std::string_view s) {
    std::string out;
    append_json_string(out, s);
    return out;
}
std::string put(std::string_view app, std::string_view key, std::string_view value,
                std::string_view content_type = "text/plain") {
    std::string b64 = "\"";
    append_base64(b64, bytes_of(value));
    b64.push_back('"');
    return change_json(app, key, false, json_text(content_type), b64);
}
std::string erase(std::string_view app, std::string_view key) { return change_json(app, key, true, "null", "null"); }

std::string page(const std::vector<std::string>& changes, std::string_view last = cursor, std::string_view pending = "0") {
    std::string out = "{\"changes\":[";
    for (std::size_t i = 0; i < changes.size(); ++i) out.append(i ? "," : "").append(changes[i]);
    out.append("],\"last_cursor\":").append(json_text(last)).append(",\"pending\":").append(pending).append("}");
    return out;
}

// The page of one change, with a good change before it: refused whole, with a reason.
void check_refused(const std::string& bad_change) {
    auto p = read_replication_page(page({put("notes", "fine", "x"), bad_change}));
    CHECK_FALSE(p.has_value());
    if (!p) CHECK_FALSE(p.error().reason.empty());
}

token_record a_token(std::string app) {
    token_record t;
    t.app = std::move(app);
    t.scope = token_scope::write;
    t.created = 1;
    return t;
}

}  // namespace

TEST_CASE("a page as the primary makes it is accepted, its values decoded and its cursor and pending kept") {
    auto p = read_replication_page(page({put("notes", "a/é", std::string("\0bin\xff", 5), "application/json; charset=utf-8"),
                                         erase("notes", "gone"),
                                         put("_percore", "app/notes", encode_app_record(app_quota{}), "application/json")},
                                        cursor, "12"));
    REQUIRE(p);
    REQUIRE(p->changes.size() == 3);
    CHECK(p->changes[0].app == "notes");
    CHECK(p->changes[0].key == "a/é");
    CHECK(p->changes[0].value == std::string("\0bin\xff", 5));
    CHECK(p->changes[0].content_type == "application/json; charset=utf-8");
    CHECK(p->changes[1].deleted);
    CHECK(p->changes[1].value.empty());
    CHECK(p->changes[2].app == "_percore");
    CHECK(p->last_cursor == cursor);
    CHECK(p->pending == 12);
}

TEST_CASE("an empty page at the feed's beginning is accepted") {
    auto p = read_replication_page(page({}, "0"));
    REQUIRE(p);
    CHECK(p->changes.empty());
    CHECK(p->last_cursor == "0");
}

TEST_CASE("a page that is not JSON is refused") {
    CHECK_FALSE(read_replication_page(page({put("notes", "a", "x")}).substr(0, 30)));
}

TEST_CASE("a page over 64 MiB is refused before it is parsed") {
    std::string body = page({put("notes", "a", "x")});
    body.resize(max_replication_page_bytes + 1, ' ');
    auto p = read_replication_page(body);
    REQUIRE_FALSE(p);
    CHECK(p.error().reason.find("64 MiB") != std::string::npos);
}

TEST_CASE("a page that is not an object, or lacks changes, last_cursor or pending, is refused") {
    CHECK_FALSE(read_replication_page("[]"));
    CHECK_FALSE(read_replication_page("{\"last_cursor\":\"0\",\"pending\":0}"));
    CHECK_FALSE(read_replication_page("{\"changes\":[],\"pending\":0}"));
    CHECK_FALSE(read_replication_page("{\"changes\":[],\"last_cursor\":\"0\"}"));
    CHECK_FALSE(read_replication_page("{\"changes\":{},\"last_cursor\":\"0\",\"pending\":0}"));
}

TEST_CASE("a last_cursor that is not a cursor is refused") {
    CHECK_FALSE(read_replication_page(page({}, "c1")));
    CHECK_FALSE(read_replication_page(page({}, cursor + "&x=\r\n")));
    CHECK_FALSE(read_replication_page(page({}, "")));
}

TEST_CASE("a pending that is not a count is refused") {
    CHECK_FALSE(read_replication_page(page({}, cursor, "-1")));
    CHECK_FALSE(read_replication_page(page({}, cursor, "\"3\"")));
}

TEST_CASE("a page with more changes than the follower asks for is refused") {
    std::vector<std::string> changes(max_replication_page_changes + 1, erase("notes", "a"));
    CHECK_FALSE(read_replication_page(page(changes)));
}

TEST_CASE("a change that is not an object, or lacks app, key or deleted, is refused") {
    check_refused("[]");
    check_refused("{\"key\":\"k\",\"deleted\":true}");
    check_refused("{\"app\":\"notes\",\"deleted\":true}");
    check_refused("{\"app\":\"notes\",\"key\":\"k\"}");
    check_refused("{\"app\":\"notes\",\"key\":\"k\",\"deleted\":1}");
}

TEST_CASE("an app name of 65 bytes is refused") { check_refused(put(std::string(65, 'a'), "k", "x")); }

TEST_CASE("an empty app name, or one outside [a-z0-9_-] or starting with '_', is refused") {
    check_refused(erase("", "k"));
    check_refused(put("Notes", "k", "x"));
    check_refused(put("_apps", "k", "x"));
}

TEST_CASE("a key of 1024 bytes is accepted and one of 1025 bytes refused") {
    CHECK(read_replication_page(page({put("notes", std::string(1024, 'k'), "x")})));
    check_refused(put("notes", std::string(1025, 'k'), "x"));
}

TEST_CASE("an empty key, a key with NUL and a key that is not UTF-8 are refused") {
    check_refused(erase("notes", ""));
    check_refused(erase("notes", std::string("a\0b", 3)));
    // the JSON reader takes only UTF-8 strings, so the check itself is asked directly
    CHECK_FALSE(check_change(page_change{"notes", "\xc3\x28", true, "", ""}));
}

TEST_CASE("a content type holding CR LF (a header injection) is refused") {
    check_refused(put("notes", "k", "x", "text/plain\r\nSet-Cookie: a=b"));
}

TEST_CASE("a content type with a control character or whitespace at an end is refused") {
    check_refused(put("notes", "k", "x", std::string("text/plain\0", 11)));
    check_refused(put("notes", "k", "x", "text/\x7f"));
    check_refused(put("notes", "k", "x", " text/plain"));
}

TEST_CASE("a content type longer than a request's header section is refused") {
    CHECK(read_replication_page(page({put("notes", "k", "x", std::string(max_replication_content_type_bytes, 't'))})));
    check_refused(put("notes", "k", "x", std::string(max_replication_content_type_bytes + 1, 't')));
}

TEST_CASE("a value_base64 that does not decode, or a put without one, is refused") {
    check_refused(change_json("notes", "k", false, "\"text/plain\"", "\"abc\""));
    check_refused(change_json("notes", "k", false, "\"text/plain\"", "\"ab!=\""));
    check_refused(change_json("notes", "k", false, "\"text/plain\"", "null"));
    check_refused(change_json("notes", "k", false, "null", "\"\""));
}

TEST_CASE("a deletion carrying a content type or a value is refused") {
    check_refused(change_json("notes", "k", true, "\"text/plain\"", "null"));
}

TEST_CASE("an app record with a bad name or a value that does not decode is refused") {
    check_refused(put("_percore", "app/" + std::string(65, 'a'), encode_app_record(app_quota{})));
    check_refused(put("_percore", "app/notes", "{\"quota\":{\"documents\":-1}}"));
    check_refused(put("_percore", "app/notes", "not json"));
    check_refused(erase("_percore", "deleted/_bad"));
}

TEST_CASE("a token record that does not decode, names a bad app or has a bad id is refused") {
    const std::string id = "0123456789abcdef";
    CHECK(read_replication_page(page({put("_percore", "token/" + id, encode_token_record(a_token("notes")))})));
    check_refused(put("_percore", "token/" + id, "{\"app\":\"notes\"}"));
    check_refused(put("_percore", "token/" + id, encode_token_record(a_token(std::string(65, 'a')))));
    check_refused(erase("_percore", "token/XYZ"));
}

TEST_CASE("a replication token record (no app, scope replicate) is accepted, and an app-less one of another scope refused") {
    const std::string id = "0123456789abcdef";
    token_record replication = a_token("");
    replication.scope = token_scope::replicate;
    CHECK(read_replication_page(page({put("_percore", "token/" + id, encode_token_record(replication))})));
    check_refused(put("_percore", "token/" + id, encode_token_record(a_token(""))));
    token_record of_an_app = a_token("notes");
    of_an_app.scope = token_scope::replicate;
    check_refused(put("_percore", "token/" + id, encode_token_record(of_an_app)));
}

TEST_CASE("a delivery record as the primary writes it is accepted") {
    delivery_record d;
    d.url = "https://hooks.example.com/in";
    d.secrets = make_delivery_secrets();
    d.cursor = cursor;
    CHECK(read_replication_page(page({put("_percore", "delivery/notes/hook", encode_delivery_record(d))})));
}

TEST_CASE("a delivery record that does not decode or names a bad app is refused") {
    check_refused(put("_percore", "delivery/notes/hook", "{}"));
    check_refused(erase("_percore", "delivery/notes"));
    check_refused(erase("_percore", "delivery/" + std::string(65, 'a') + "/hook"));
}

TEST_CASE("a catalog record of no kind the catalog has is refused") {
    check_refused(put("_percore", "planted/x", "{}"));
}

TEST_CASE("a follower's own record in a page is accepted: the follower passes it over") {
    CHECK(read_replication_page(page({put("_percore", "follower/cursor", "{}")})));
}

TEST_CASE("a deletion of a catalog record needs only its name to follow the rules") {
    CHECK(read_replication_page(page({erase("_percore", "app/notes"), erase("_percore", "deleted/notes"),
                                      erase("_percore", "token/0123456789abcdef"),
                                      erase("_percore", "delivery/notes/hook")})));
}

// Same versions on every board (SPEC §10): a put's etag becomes the copy's ETag version.
TEST_CASE("a put's etag is read as the primary's ETag version") {
    auto p = read_replication_page(page({put("notes", "k", "v")}));
    REQUIRE(p.has_value());
    REQUIRE(p->changes.size() == 1);
    CHECK(p->changes[0].etag_version == 1);
}

TEST_CASE("a put whose etag is missing, not percore's form, 0 or from 2^63 on refuses the page") {
    const std::string good = put("notes", "k", "v");
    const std::string etag = "\"etag\":\"\\\"0000000000000001\\\"\",";
    REQUIRE(good.find(etag) != std::string::npos);
    for (std::string_view other : {"", "\"etag\":\"\\\"00000000000000zz\\\"\",", "\"etag\":\"W/\\\"0000000000000001\\\"\",",
                                   "\"etag\":\"\\\"0000000000000000\\\"\",", "\"etag\":\"\\\"8000000000000000\\\"\",",
                                   "\"etag\":1,"}) {
        CAPTURE(other);
        std::string bad = good;
        bad.replace(bad.find(etag), etag.size(), other);
        check_refused(bad);
    }
    // a deletion's etag is not read (a delete is a plain erase)
    std::string deletion = erase("notes", "gone");
    deletion.replace(deletion.find(etag), etag.size(), "");
    CHECK(read_replication_page(page({deletion})).has_value());
}

TEST_CASE("a page's epoch is read, 0 when the primary sent none, and a page whose epoch is no count is refused") {
    std::string p = page({}, "0");
    CHECK(read_replication_page(p)->epoch == 0);
    std::string with = p.substr(0, p.size() - 1) + ",\"epoch\":46}";
    auto read = read_replication_page(with);
    REQUIRE(read);
    CHECK(read->epoch == 46);
    CHECK_FALSE(read_replication_page(p.substr(0, p.size() - 1) + ",\"epoch\":\"46\"}"));
    CHECK_FALSE(read_replication_page(p.substr(0, p.size() - 1) + ",\"epoch\":-1}"));
}
