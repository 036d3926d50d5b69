#include <doctest.h>

#include <string>

#include "net/route.hpp"

using namespace percore::net;

namespace {
route parse(std::string_view target) {
    static route_scratch scratch;
    return parse_route(target, scratch);
}
}  // namespace

TEST_CASE("a document path names its app and its percent-decoded key") {
    route r = parse("/notes/a%20b/c%2Fd?ignored=1");
    REQUIRE(r.kind == target_kind::document);
    CHECK(r.app == "notes");
    CHECK(r.key == "a b/c/d");
}

TEST_CASE("a plus sign in a key path is kept as a plus") {
    route r = parse("/notes/a+b");
    REQUIRE(r.kind == target_kind::document);
    CHECK(r.key == "a+b");
}

TEST_CASE("the server endpoints are recognised and other underscore paths are not found") {
    CHECK(parse("/_health").kind == target_kind::health);
    CHECK(parse("/_metrics").kind == target_kind::metrics);
    CHECK(parse("/_stats?x=1").kind == target_kind::stats);
    CHECK(parse("/_nothing").kind == target_kind::not_found);
    CHECK(parse("/_health/x").kind == target_kind::not_found);
    CHECK(parse("/").kind == target_kind::not_found);
}

TEST_CASE("an app that breaks the naming rules is a bad request") {
    CHECK(parse("/Notes/k").kind == target_kind::bad);
    CHECK(parse("/a.b/k").kind == target_kind::bad);
    CHECK(parse("/" + std::string(65, 'a') + "/k").kind == target_kind::bad);
    CHECK(parse("/" + std::string(64, 'a') + "/k").kind == target_kind::document);
    CHECK(parse("/a-b_c9/k").kind == target_kind::document);
    CHECK(parse("/notes").kind == target_kind::bad);
}

TEST_CASE("a key that breaks the rules is a bad request") {
    CHECK(parse("/a/%00").kind == target_kind::bad);
    CHECK(parse("/a/%zz").kind == target_kind::bad);
    CHECK(parse("/a/%4").kind == target_kind::bad);
    CHECK(parse("/a/%ff%fe").kind == target_kind::bad);          // not UTF-8
    CHECK(parse("/a/%c0%af").kind == target_kind::bad);          // overlong
    CHECK(parse("/a/%ed%a0%80").kind == target_kind::bad);       // surrogate
    CHECK(parse("/a/%e2%82%ac").kind == target_kind::document);  // euro sign
    CHECK(parse("/a/" + std::string(1024, 'k')).kind == target_kind::document);
    CHECK(parse("/a/" + std::string(1025, 'k')).kind == target_kind::bad);
}

TEST_CASE("key_problem names the broken key rule, the same the route answers, and none for a good key") {
    CHECK(key_problem("a/b \xe2\x82\xac") == nullptr);
    CHECK(key_problem(std::string(1024, 'k')) == nullptr);
    CHECK(std::string_view(key_problem("")) == "empty key");
    CHECK(std::string_view(key_problem(std::string(1025, 'k'))) == "key longer than 1024 bytes");
    CHECK(std::string_view(key_problem(std::string("a\0b", 3))) == "key contains NUL");
    CHECK(std::string_view(key_problem("\xc0\xaf")) == "key is not valid UTF-8");
    CHECK(std::string_view(parse("/a/%00").reason) == "key contains NUL");
}

TEST_CASE("a list path reads prefix after and limit with plus as space") {
    route r = parse("/a/?prefix=x+y&after=x%2Bz&limit=7&other=1");
    REQUIRE(r.kind == target_kind::list);
    CHECK(r.app == "a");
    CHECK(r.prefix == "x y");
    CHECK(r.after == "x+z");
    CHECK(r.has_after);
    CHECK(r.limit == 7);
    route d = parse("/a/");
    REQUIRE(d.kind == target_kind::list);
    CHECK(d.limit == 20);
    CHECK_FALSE(d.has_after);
}

TEST_CASE("a list limit outside 1 to 1000 is a bad request") {
    CHECK(parse("/a/?limit=0").kind == target_kind::bad);
    CHECK(parse("/a/?limit=1001").kind == target_kind::bad);
    CHECK(parse("/a/?limit=ten").kind == target_kind::bad);
    CHECK(parse("/a/?limit=").kind == target_kind::bad);
    CHECK(parse("/a/?limit=1000").kind == target_kind::list);
    CHECK(parse("/a/?limit=%31%30%30%31").kind == target_kind::bad);  // 1001, decoded
    CHECK(parse("/a/?limit=%30").kind == target_kind::bad);
    CHECK(parse("/a/?limit=%2B5").kind == target_kind::bad);  // "+5"
    CHECK(parse("/a/?limit=5+").kind == target_kind::bad);    // "5 "
    CHECK(parse("/a/?limit=%3").kind == target_kind::bad);    // a malformed escape
    CHECK(parse("/a/?limit=%zz").kind == target_kind::bad);
}

TEST_CASE("a list limit is percent-decoded before it is read") {
    route r = parse("/a/?limit=%31");
    REQUIRE(r.kind == target_kind::list);
    CHECK(r.limit == 1);
    route full = parse("/a/?limit=%31%30%30%30");
    REQUIRE(full.kind == target_kind::list);
    CHECK(full.limit == 1000);
    route mixed = parse("/a/?limit=1%35&prefix=%70");
    REQUIRE(mixed.kind == target_kind::list);
    CHECK(mixed.limit == 15);
    CHECK(mixed.prefix == "p");
}

TEST_CASE("the asterisk-form target names the server as a whole") {
    CHECK(parse("*").kind == target_kind::asterisk);
    CHECK(parse("*x").kind == target_kind::bad);
    CHECK(parse("/*").kind == target_kind::bad);
}

TEST_CASE("an absolute-form target is routed by its path") {
    route r = parse("http://example.com:8080/app/key");
    REQUIRE(r.kind == target_kind::document);
    CHECK(r.key == "key");
}

TEST_CASE("the administration routes name the app and a token id") {
    CHECK(parse("/_apps/").kind == target_kind::apps);
    CHECK(parse("/_apps").kind == target_kind::apps);
    route app = parse("/_apps/notes");
    CHECK(app.kind == target_kind::app);
    CHECK(app.app == "notes");
    CHECK(parse("/_apps/notes/tokens").kind == target_kind::app_tokens);
    route token = parse("/_apps/notes/tokens/0123456789abcdef");
    CHECK(token.kind == target_kind::app_token);
    CHECK(token.app == "notes");
    CHECK(token.key == "0123456789abcdef");
}

TEST_CASE("the health probes name primary or replica, the replica with its lag in changes") {
    CHECK(parse("/_health").probe == health_probe::status);
    route primary = parse("/_health/primary");
    CHECK(primary.kind == target_kind::health);
    CHECK(primary.probe == health_probe::primary);
    route replica = parse("/_health/replica");
    CHECK(replica.probe == health_probe::replica);
    CHECK_FALSE(replica.has_lag);
    route within = parse("/_health/replica?lag=1000&x=y");
    CHECK(within.has_lag);
    CHECK(within.lag == 1000);
    CHECK(parse("/_health/replica?lag=0").lag == 0);
    CHECK(parse("/_health/replica?lag=999999999999").lag == 999999999999u);
    for (const char* target : {"/_health/replica?lag=", "/_health/replica?lag=-1", "/_health/replica?lag=1x",
                               "/_health/replica?lag=1000000000000"})
        CHECK_MESSAGE(parse(target).kind == target_kind::bad, target);
    for (const char* target : {"/_health/", "/_health/other", "/_health/primary/x"})
        CHECK_MESSAGE(parse(target).kind == target_kind::not_found, target);
}

TEST_CASE("the replication token routes name a token id and no app") {
    CHECK(parse("/_replication/tokens").kind == target_kind::replication_tokens);
    CHECK(parse("/_replication/tokens/").kind == target_kind::replication_tokens);
    route token = parse("/_replication/tokens/0123456789abcdef");
    CHECK(token.kind == target_kind::replication_token);
    CHECK(token.key == "0123456789abcdef");
    CHECK(token.app.empty());
    for (const char* target : {"/_replication", "/_replication/", "/_replication/other", "/_replication/tokens/XYZ",
                               "/_replication/tokens/12/3", "/_replicationx/tokens"})
        CHECK_MESSAGE(parse(target).kind == target_kind::not_found, target);
}

TEST_CASE("a bad app name under /_apps is 400 and an unknown administration path names nothing") {
    CHECK(parse("/_apps/Notes").kind == target_kind::bad);
    CHECK(parse("/_apps/_x/tokens").kind == target_kind::bad);
    for (const char* target : {"/_apps/notes/other", "/_apps/notes/tokens/ABC", "/_apps/notes/tokens/0123456789abcdef0123456789abcdef0",
                               "/_appsx", "/_apps/notes/tokens/12/3"}) {
        route r = parse(target);
        CHECK_MESSAGE(r.kind == target_kind::not_found, target);
        CHECK(r.app.empty());
    }
}

TEST_CASE("the deliveries of an app are listed with or without a trailing slash") {
    for (const char* target : {"/_apps/notes/deliveries", "/_apps/notes/deliveries/"}) {
        route r = parse(target);
        CHECK_MESSAGE(r.kind == target_kind::app_deliveries, target);
        CHECK(r.app == "notes");
    }
}

TEST_CASE("a delivery route names its app and the delivery's name") {
    route r = parse("/_apps/notes/deliveries/hook-1_a");
    CHECK(r.kind == target_kind::app_delivery);
    CHECK(r.app == "notes");
    CHECK(r.key == "hook-1_a");
}

TEST_CASE("a delivery name of 64 characters is accepted and one of 65 is 400") {
    CHECK(parse("/_apps/notes/deliveries/" + std::string(64, 'a')).kind == target_kind::app_delivery);
    CHECK(parse("/_apps/notes/deliveries/" + std::string(65, 'a')).kind == target_kind::bad);
}

TEST_CASE("a delivery name outside the app name rule is 400") {
    for (const char* target : {"/_apps/notes/deliveries/Hook", "/_apps/notes/deliveries/_x", "/_apps/notes/deliveries/a/b",
                               "/_apps/notes/deliveries/a%20b", "/_apps/notes/deliveries/a.b"}) {
        route r = parse(target);
        CHECK_MESSAGE(r.kind == target_kind::bad, target);
        CHECK(std::string_view(r.reason) == "invalid delivery name");
    }
}

TEST_CASE("a delivery of an invalid app name is 400 for the app") {
    route r = parse("/_apps/No/deliveries/hook");
    CHECK(r.kind == target_kind::bad);
    CHECK(std::string_view(r.reason) == "invalid app name");
}

TEST_CASE("a change feed target names its app and takes the defaults of SPEC §8") {
    route r = parse("/_changes/notes");
    CHECK(r.kind == target_kind::changes);
    CHECK(r.app == "notes");
    CHECK(r.feed == feed_mode::normal);
    CHECK(r.limit == 100);
    CHECK(r.timeout_s == 30);
    CHECK(r.heartbeat_s == 30);
    CHECK_FALSE(r.has_since);
    CHECK(parse("/_changes/notes/").kind == target_kind::changes);
}

TEST_CASE("a change feed's parameters are percent-decoded and read") {
    route r = parse("/_changes/notes?since=ab%2Ecd&feed=longpoll&limit=7&timeout=0&heartbeat=5&prefix=a%2Fb&x=1");
    REQUIRE(r.kind == target_kind::changes);
    CHECK(r.since == "ab.cd");
    CHECK(r.has_since);
    CHECK(r.feed == feed_mode::longpoll);
    CHECK(r.limit == 7);
    CHECK(r.timeout_s == 0);
    CHECK(r.heartbeat_s == 5);
    CHECK(r.prefix == "a/b");
    CHECK(parse("/_changes/notes?feed=continuous").feed == feed_mode::continuous);
    CHECK(parse("/_changes/notes?feed=eventsource").feed == feed_mode::eventsource);
}

TEST_CASE("a change feed parameter out of its range is 400 and an unknown feed path names nothing") {
    for (const char* target : {"/_changes/notes?feed=poll", "/_changes/notes?limit=0", "/_changes/notes?limit=1001",
                               "/_changes/notes?timeout=301", "/_changes/notes?timeout=x", "/_changes/notes?heartbeat=0",
                               "/_changes/notes?heartbeat=301", "/_changes/Notes", "/_changes/notes?since=%zz"}) {
        CHECK_MESSAGE(parse(target).kind == target_kind::bad, target);
    }
    for (const char* target : {"/_changes", "/_changes/", "/_changes/notes/more", "/_changesx"})
        CHECK_MESSAGE(parse(target).kind == target_kind::not_found, target);
}

TEST_CASE("the replication feed is /_changes/_all with a cursor and a long poll but no stream") {
    route r = parse("/_changes/_all?since=ab&feed=longpoll&timeout=20&limit=1000");
    REQUIRE(r.kind == target_kind::replication);
    CHECK(r.app.empty());
    CHECK(r.since == "ab");
    CHECK(r.feed == feed_mode::longpoll);
    CHECK(r.timeout_s == 20);
    CHECK(r.limit == 1000);
    CHECK(parse("/_changes/_all?feed=continuous").kind == target_kind::bad);
    CHECK(parse("/_changes/_all?feed=eventsource").kind == target_kind::bad);
    CHECK(parse("/_changes/_other").kind == target_kind::bad);
}
