#include <doctest.h>

#include <string>
#include <vector>

#include "shards/document_api.hpp"
#include "shards/shard_group.hpp"

using namespace percore;

TEST_CASE("the key hash is fixed forever") {
    // Resharding and recovery depend on these values never changing.
    // Values computed independently (FNV-1a 64 followed by the murmur3 64-bit finalizer).
    CHECK(shards::key_hash("") == 0xefd01f60ba992926ull);
    CHECK(shards::key_hash(std::string("app\0key", 7)) == 0x52cc8a77691aba14ull);
    CHECK(shards::key_hash(std::string("app\0key", 7)) != shards::key_hash(std::string("ap\0pkey", 7)));
}

TEST_CASE("every shard count maps every hash to a shard below it") {
    for (unsigned n = 1; n <= 16; ++n)
        for (std::uint64_t h : {0ull, 1ull, ~0ull, 0x8000000000000000ull, 0x123456789abcdefull})
            CHECK(shards::owner_for_hash(h, n) < n);
}

TEST_CASE("keys spread evenly over shards") {
    constexpr unsigned shards_count = 4;
    std::vector<unsigned> counts(shards_count);
    for (int i = 0; i < 40000; ++i) {
        std::string key = std::string("bench") + '\0' + "key-" + std::to_string(i);
        ++counts[shards::owner_for_hash(shards::key_hash(key), shards_count)];
    }
    for (unsigned c : counts) CHECK(c > 9000);
}

TEST_CASE("a write tag carries the origin shard and the connection ticket") {
    net::answer_ticket t{123456, 0xfedcba98};
    std::uint64_t tag = shards::make_tag(255, t);
    CHECK(shards::tag_origin(tag) == 255);
    CHECK(shards::tag_ticket(tag).index == 123456);
    CHECK(shards::tag_ticket(tag).generation == 0xfedcba98);
}
