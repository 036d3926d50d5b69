#include <doctest.h>

#include <string>

#include "../task_fixtures.hpp"
#include "crypto/loader.hpp"
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

TEST_CASE("with auth on, a principal that authenticate() did not make reaches nothing (security review L7)") {
    using namespace percore;
    using namespace percore::shards;
    testing::task_stores stores{1};
    auth_config on;
    on.on = true;
    on.admin_token = "pca_the-admin-token-of-this-test";
    // authorize() hashes nothing: an empty function table stands in for the crypto module (which
    // the aarch64 cross build has none of)
    const crypto::crypto_api no_functions{};
    on.api = &no_functions;
    access_control guarded(stores, stores.registry, on);
    const principal nobody;  // kind anyone: what principal_of() answers for an unverified slot
    for (net::target_kind kind : {net::target_kind::backup, net::target_kind::apps, net::target_kind::document,
                                  net::target_kind::replication, net::target_kind::metrics}) {
        net::route r;
        r.kind = kind;
        CHECK(guarded.authorize(nobody, r, net::method::get, nullptr).status == 401);
    }
    auth_config off;
    access_control open(stores, stores.registry, off);
    net::route backup;
    backup.kind = net::target_kind::backup;
    CHECK(open.authorize(nobody, backup, net::method::get, nullptr).status == 0);  // auth off: everyone
}
