// cluster_records (SPEC §12): the leader and status values a board writes into etcd, and what it
// accepts back from another board.
#include <doctest/doctest.h>

#include "shards/cluster/cluster_records.hpp"

using namespace percore::shards;

TEST_CASE("a group's keys are under /percore/{group}/") {
    CHECK(leader_key("g1") == "/percore/g1/leader");
    CHECK(status_key("g1", "b2") == "/percore/g1/status/b2");
    CHECK(status_key("g1", "b2").starts_with(status_prefix("g1")));
}

TEST_CASE("a leader value names the board and its URL, and reads back the same") {
    std::string text = encode_leader({"b1", "https://10.0.0.1:8443"});
    CHECK(text == R"({"board":"b1","url":"https://10.0.0.1:8443"})");
    auto back = decode_leader(text);
    REQUIRE(back.has_value());
    CHECK(back->board == "b1");
    CHECK(back->url == "https://10.0.0.1:8443");
}

TEST_CASE("a leader value with a bad board name or URL is taken for no value") {
    CHECK_FALSE(decode_leader(R"({"board":"B1","url":"https://10.0.0.1:8443"})"));
    CHECK_FALSE(decode_leader(R"({"board":"b1","url":"ftp://10.0.0.1:21"})"));
    CHECK_FALSE(decode_leader(R"({"board":"b1","url":"https://10.0.0.1:8443/path"})"));
    CHECK_FALSE(decode_leader(R"({"board":"b1","url":"https://user@10.0.0.1:8443"})"));
    CHECK_FALSE(decode_leader(R"({"board":"b1"})"));
    CHECK_FALSE(decode_leader("not json"));
    CHECK_FALSE(decode_leader(std::string(5000, ' ') + R"({"board":"b1","url":"http://a:1"})"));
}

TEST_CASE("a status value keeps its epoch, position, role and URL") {
    board_status s{46, 12345678901234, status_role::follower, "http://10.0.0.2:8080"};
    auto back = decode_status(encode_status(s));
    REQUIRE(back.has_value());
    CHECK(back->epoch == 46);
    CHECK(back->position == 12345678901234);
    CHECK(back->role == status_role::follower);
    CHECK(back->url == "http://10.0.0.2:8080");
}

TEST_CASE("a status value with an unknown role or a negative position is taken for no value") {
    CHECK_FALSE(decode_status(R"({"epoch":1,"position":2,"role":"king","url":"http://a:1"})"));
    CHECK_FALSE(decode_status(R"({"epoch":1,"position":-2,"role":"primary","url":"http://a:1"})"));
    CHECK_FALSE(decode_status(R"({"epoch":1,"role":"primary","url":"http://a:1"})"));
}

TEST_CASE("group and board names are what an app's name may be") {
    CHECK(is_cluster_name("g1"));
    CHECK(is_cluster_name("board-2_a"));
    CHECK_FALSE(is_cluster_name(""));
    CHECK_FALSE(is_cluster_name("_g"));
    CHECK_FALSE(is_cluster_name("G"));
    CHECK_FALSE(is_cluster_name("a/b"));
    CHECK_FALSE(is_cluster_name(std::string(65, 'a')));
}

TEST_CASE("a sync set names its epoch and boards, and reads back the same") {
    sync_set s{12, {"b2", "b3"}};
    CHECK(encode_sync_set(s) == R"({"epoch":12,"boards":["b2","b3"]})");
    auto back = decode_sync_set(encode_sync_set(s));
    REQUIRE(back.has_value());
    CHECK(back->epoch == 12);
    CHECK(back->boards == std::vector<std::string>{"b2", "b3"});
    CHECK(sync_key("g1") == "/percore/g1/sync");
    CHECK(sync_key("g1").starts_with(group_prefix("g1")));
}

TEST_CASE("a sync set with a bad board name, no epoch or too many boards is taken for no value") {
    CHECK_FALSE(decode_sync_set(R"({"epoch":1,"boards":["B2"]})"));
    CHECK_FALSE(decode_sync_set(R"({"epoch":1,"boards":[2]})"));
    CHECK_FALSE(decode_sync_set(R"({"boards":["b2"]})"));
    std::string many = R"({"epoch":1,"boards":[)";
    for (int i = 0; i < 17; ++i) many += (i ? ",\"b" : "\"b") + std::to_string(i) + "\"";
    CHECK_FALSE(decode_sync_set(many + "]}"));
}
