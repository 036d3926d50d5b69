#include <doctest.h>

#include <set>
#include <string>

#include "shards/apps/catalog.hpp"

using namespace percore::shards;

TEST_CASE("a token has the documented form and its id is found in it") {
    new_token t = make_token();
    CHECK(t.token.size() == token_bytes);
    CHECK(t.token.starts_with("pct_"));
    CHECK(t.id.size() == token_id_chars);
    auto id = token_id_of(t.token);
    REQUIRE(id);
    CHECK(*id == t.id);
}

TEST_CASE("tokens are different every time") {
    std::set<std::string> seen;
    for (int i = 0; i < 1000; ++i) seen.insert(make_token().token);
    CHECK(seen.size() == 1000);
}

TEST_CASE("strings that are not percore tokens have no id") {
    std::string good = make_token().token;
    for (std::string bad : {std::string(), std::string("pct_"), good.substr(1), good + "x", "pcx_" + good.substr(4),
                            good.substr(0, 4) + "0123456789ABCDEF" + good.substr(20),
                            good.substr(0, 20) + "-" + good.substr(21)})
        CHECK_FALSE(token_id_of(bad));
}

TEST_CASE("an app record keeps only the limited quota fields") {
    app_quota q;
    q.documents = 5;
    q.connections = 0;
    std::string record = encode_app_record(q);
    CHECK(record == R"({"quota":{"documents":5,"connections":0}})");
    auto back = decode_app_record(record);
    REQUIRE(back);
    CHECK(*back == q);
    CHECK(encode_app_record(app_quota{}) == R"({"quota":{}})");
}

TEST_CASE("a quota object refuses unknown fields and numbers that are not counts") {
    for (const char* text : {R"({"nope":1})", R"({"documents":-1})", R"({"bytes":"5"})", R"({"documents":1.0})"}) {
        auto v = parse_json(text);
        REQUIRE(v);
        CHECK_FALSE(quota_from_json(&*v));
    }
    auto v = parse_json(R"({"documents":null,"bytes":7})");
    auto q = quota_from_json(&*v);
    REQUIRE(q);
    CHECK(q->documents == unlimited);
    CHECK(q->bytes == 7);
    CHECK(quota_from_json(nullptr)->documents == unlimited);
}

TEST_CASE("a token record round-trips and malformed ones are refused") {
    token_record t;
    t.app = "notes";
    t.scope = token_scope::write;
    t.prefix = "a/\"b\"";
    t.expires = 1'900'000'000;
    t.created = 1'800'000'000;
    for (std::size_t i = 0; i < t.hash.size(); ++i) t.hash[i] = static_cast<std::uint8_t>(i * 7);
    auto back = decode_token_record(encode_token_record(t));
    REQUIRE(back);
    CHECK(back->app == t.app);
    CHECK(back->scope == t.scope);
    CHECK(back->prefix == t.prefix);
    CHECK(back->expires == t.expires);
    CHECK(back->created == t.created);
    CHECK(back->hash == t.hash);
    CHECK_FALSE(decode_token_record(R"({"app":"a"})"));
    CHECK_FALSE(decode_token_record(R"({"app":"a","scope":"root","prefix":"","expires":0,"created":0,"hash":")" +
                                    std::string(64, '0') + "\"}"));
    CHECK_FALSE(decode_token_record(R"({"app":"a","scope":"read","prefix":"","expires":0,"created":0,"hash":"00"})"));
}

TEST_CASE("a token record is recognised as its app's from its head alone, and not as another's") {
    token_record t;
    t.app = "notes";
    const std::string value = encode_token_record(t);
    CHECK(token_record_of(value, "notes"));
    CHECK_FALSE(token_record_of(value, "note"));
    CHECK_FALSE(token_record_of(value, "notes2"));
    CHECK_FALSE(token_record_of("{}", "notes"));
}
