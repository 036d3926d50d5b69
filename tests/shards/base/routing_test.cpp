#include <doctest.h>

#include <string>
#include <vector>

#include "shards/base/key_owner.hpp"
#include "shards/base/write_ticket.hpp"

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
    std::uint64_t tag = shards::write_ticket{255, t}.encode();
    CHECK(shards::write_ticket::decode(tag).origin == 255);
    CHECK(shards::write_ticket::decode(tag).answer.index == 123456);
    CHECK(shards::write_ticket::decode(tag).answer.generation == 0xfedcba98);
    // the widest values the fields must hold
    shards::write_ticket wide{percore::runtime::max_shards - 1, {static_cast<std::uint32_t>(net::max_connections_limit - 1), ~0u}};
    CHECK(shards::write_ticket::decode(wide.encode()).origin == wide.origin);
    CHECK(shards::write_ticket::decode(wide.encode()).answer.index == wide.answer.index);
    CHECK(shards::write_ticket::decode(wide.encode()).answer.generation == wide.answer.generation);
}
