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
