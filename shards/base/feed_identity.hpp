// feed_identity: what names a data directory's log positions, so that a change feed's cursor
// (feed/feed_cursor.hpp) from another directory or layout is told apart.
//
// Contract: a value type, any thread.
#pragma once

#include <cstdint>

namespace percore::shards {

// What names a data directory's log positions: made once per directory, bumped by resharding
// (store/data_layout.hpp).
struct feed_identity {
    std::uint64_t directory_id = 0;
    std::uint64_t generation = 0;
};

}  // namespace percore::shards
