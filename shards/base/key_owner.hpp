// key_owner: which shard owns a key. `owner = (hash(app '\0' key) × N) >> 64`, with hash = FNV-1a
// 64 followed by the murmur3 64-bit finalizer. Fixed forever: resharding and every data directory
// rely on it (pinned by tests/shards/routing_test.cpp). Any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace percore::shards {

std::uint64_t key_hash(std::string_view key);
unsigned owner_for_hash(std::uint64_t hash, unsigned shard_count);
inline unsigned owner_of(std::string_view key, unsigned shard_count) { return owner_for_hash(key_hash(key), shard_count); }

}  // namespace percore::shards
