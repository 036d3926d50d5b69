// write_ticket: a write's way home. A write travels to the shard that owns its key with a 64-bit
// tag the store returns untouched with the result; the tag names the origin shard (which holds the
// client's connection) and the connection's answer ticket.
//
//    63            54 53                  32 31                              0
//   ┌────────────────┬──────────────────────┬─────────────────────────────────┐
//   │ origin (10)    │ connection index (22)│ connection generation (32)       │
//   └────────────────┴──────────────────────┴─────────────────────────────────┘
//
// The widths are tied to the limits they must hold (static_asserts below): every shard and every
// connection slot a pool can have.
#pragma once

#include <cstdint>

#include "net/limits.hpp"
#include "net/request_handler.hpp"
#include "shards/runtime/limits.hpp"

namespace percore::shards {

struct write_ticket {
    static constexpr unsigned origin_bits = 10;
    static constexpr unsigned index_bits = 22;
    static constexpr unsigned generation_bits = 32;
    static_assert(origin_bits + index_bits + generation_bits == 64);
    static_assert((1u << origin_bits) >= runtime::max_shards, "every shard fits the origin field");
    static_assert((std::uint64_t{1} << index_bits) >= net::max_connections_limit,
                  "every connection slot of a pool fits the index field");

    // Writes no connection waits for (erasing a deleted app) carry this index; no connection slot
    // has it (net::max_connections_limit is one below).
    static constexpr std::uint32_t background_index = (1u << index_bits) - 1;

    // Among background writes, the delivery engine's (delivery_engine.hpp) have this generation bit;
    // the erasures of deleted apps (apps_admin.hpp) count their generations below the two bits.
    static constexpr std::uint32_t delivery_generation_bit = 1u << 31;
    // A follower's copies (follower.hpp) have this one; erasures count below both.
    static constexpr std::uint32_t follower_generation_bit = 1u << 30;
    static constexpr std::uint32_t background_sequence_mask = follower_generation_bit - 1;

    unsigned origin = 0;
    net::answer_ticket answer;

    bool background() const { return answer.index == background_index; }
    bool delivery() const { return background() && (answer.generation & delivery_generation_bit) != 0; }
    bool follower() const {
        return background() && (answer.generation & (delivery_generation_bit | follower_generation_bit)) ==
                                   follower_generation_bit;
    }

    std::uint64_t encode() const {
        return static_cast<std::uint64_t>(origin) << (index_bits + generation_bits) |
               static_cast<std::uint64_t>(answer.index & index_mask) << generation_bits | answer.generation;
    }
    static write_ticket decode(std::uint64_t tag) {
        write_ticket t;
        t.origin = static_cast<unsigned>(tag >> (index_bits + generation_bits));
        t.answer.index = static_cast<std::uint32_t>(tag >> generation_bits & index_mask);
        t.answer.generation = static_cast<std::uint32_t>(tag);
        return t;
    }

private:
    static constexpr std::uint64_t index_mask = (std::uint64_t{1} << index_bits) - 1;
};

}  // namespace percore::shards
