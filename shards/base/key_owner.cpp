#include "shards/base/key_owner.hpp"

namespace percore::shards {

std::uint64_t key_hash(std::string_view key) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : key) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

unsigned owner_for_hash(std::uint64_t hash, unsigned shard_count) {
    return static_cast<unsigned>((static_cast<unsigned __int128>(hash) * shard_count) >> 64);
}

}  // namespace percore::shards
