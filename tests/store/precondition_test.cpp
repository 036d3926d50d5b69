#include <doctest.h>

#include "store/precondition.hpp"
#include "store_test_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

TEST_CASE("an empty precondition always holds") {
    precondition p;
    CHECK(p.empty());
    CHECK(p.holds(false, 0));
    CHECK(p.holds(true, 7));
}

TEST_CASE("If-Match * holds only when the key exists") {
    auto p = if_match_any();
    CHECK_FALSE(p.empty());
    CHECK(p.holds(true, 3));
    CHECK_FALSE(p.holds(false, 0));
}

TEST_CASE("If-Match with a list holds only when the current version is listed") {
    auto p = if_match({4, 9});
    CHECK(p.holds(true, 4));
    CHECK(p.holds(true, 9));
    CHECK_FALSE(p.holds(true, 5));
    CHECK_FALSE(p.holds(false, 0));
}

TEST_CASE("If-Match with only foreign entity tags matches nothing") {
    auto p = if_match({});
    CHECK_FALSE(p.holds(true, 1));
    CHECK_FALSE(p.holds(false, 0));
}

TEST_CASE("If-None-Match * holds only when the key is missing") {
    auto p = if_none_match_any();
    CHECK(p.holds(false, 0));
    CHECK_FALSE(p.holds(true, 1));
}

TEST_CASE("If-None-Match with a list fails only when the current version is listed") {
    auto p = if_none_match({4, 9});
    CHECK_FALSE(p.holds(true, 4));
    CHECK_FALSE(p.holds(true, 9));
    CHECK(p.holds(true, 5));
    CHECK(p.holds(false, 0));
}

TEST_CASE("If-Match and If-None-Match together must both hold") {
    precondition p = if_match({4, 5});
    p.has_if_none_match = true;
    p.if_none_match = {5};
    CHECK(p.holds(true, 4));
    CHECK_FALSE(p.holds(true, 5));
    CHECK_FALSE(p.holds(true, 6));
    CHECK_FALSE(p.holds(false, 0));
}
