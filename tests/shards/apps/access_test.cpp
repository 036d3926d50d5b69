#include <doctest.h>

#include <string>

#include "shards/apps/access.hpp"

using percore::shards::same_token;

TEST_CASE("same_token: the cached token's compare answers as == does (security review L3)") {
    const std::string cached = "pk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG";
    CHECK(same_token(cached, cached));
    CHECK(same_token(std::string(cached), cached));
    std::string last = cached;
    last.back() = 'H';
    CHECK_FALSE(same_token(last, cached));
    std::string first = cached;
    first.front() = 'q';
    CHECK_FALSE(same_token(first, cached));
    CHECK_FALSE(same_token(cached.substr(0, cached.size() - 1), cached));
    CHECK_FALSE(same_token(cached + "x", cached));
    CHECK_FALSE(same_token("", cached));
    CHECK_FALSE(same_token(cached, ""));
    CHECK(same_token("", ""));
    CHECK_FALSE(same_token(std::string("a\0b", 3), "a"));
}

TEST_CASE("a prefix-scoped app token manages only objects whose prefix begins with its own") {
    using namespace percore::shards;
    principal scoped;
    scoped.kind = principal_kind::app_token;
    scoped.scope = token_scope::admin;
    scoped.prefix = "team/";
    CHECK(manages(scoped, "team/"));
    CHECK(manages(scoped, "team/a/"));
    CHECK_FALSE(manages(scoped, ""));       // the whole app
    CHECK_FALSE(manages(scoped, "team"));   // broader than its own
    CHECK_FALSE(manages(scoped, "other/"));
}

TEST_CASE("the server admin, anyone with auth off and an app token without a prefix manage every object") {
    using namespace percore::shards;
    principal admin, anyone, whole_app;
    admin.kind = principal_kind::server_admin;
    whole_app.kind = principal_kind::app_token;
    for (const principal* who : {&admin, &anyone, &whole_app}) {
        CHECK(manages(*who, ""));
        CHECK(manages(*who, "any/prefix"));
    }
}
