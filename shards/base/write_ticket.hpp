// write_ticket: a write's way home. A write travels to the shard that owns its key with a 64-bit
// tag the store returns untouched with the result; the tag names the origin shard (which holds the
// client's connection or the background task that wrote) and the connection's answer ticket, or
// for a background write its issuer and sequence:
//
//   connection:  generation = the connection's answer generation
//   background:  index = background_index; generation = issuer (2) | sequence (30)
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
#include "shards/runtime/check.hpp"
#include "shards/runtime/limits.hpp"

namespace percore::shards {

// Who waits for a write's result: a connection (the HTTP endpoint that submitted it answers), or
// one of the shard's background tasks (base/shard_task.hpp), each a slot of the shard's table.
enum class issuer : std::uint8_t { connection = 0, app_erasure = 1, delivery = 2, follower = 3 };
inline constexpr std::size_t issuer_count = 4;

struct write_ticket {
    static constexpr unsigned origin_bits = 10;
    static constexpr unsigned index_bits = 22;
    static constexpr unsigned generation_bits = 32;
    static_assert(origin_bits + index_bits + generation_bits == 64);
    static_assert((1u << origin_bits) >= runtime::max_shards, "every shard fits the origin field");
    static_assert((std::uint64_t{1} << index_bits) >= net::max_connections_limit,
                  "every connection slot of a pool fits the index field");

    // Writes no connection waits for carry this index; no connection slot has it
    // (net::max_connections_limit is one below). Their generation names the issuer in its top two
    // bits (issuer_shift) and counts the issuer's writes below them.
    static constexpr std::uint32_t background_index = (1u << index_bits) - 1;
    static constexpr unsigned issuer_shift = 30;
    static constexpr std::uint32_t background_sequence_mask = (1u << issuer_shift) - 1;
    static_assert(issuer_count - 1 <= (std::uint32_t{0xffffffff} >> issuer_shift),
                  "every background issuer fits the generation's top bits");

    unsigned origin = 0;
    net::answer_ticket answer;

    // A background write of `who` (not issuer::connection), its `sequence`-th (wraps).
    static write_ticket background(unsigned origin, issuer who, std::uint32_t sequence) {
        PERCORE_REQUIRES(who != issuer::connection);
        return {origin, {background_index, static_cast<std::uint32_t>(who) << issuer_shift |
                                               (sequence & background_sequence_mask)}};
    }
    // Whose write this is: decoded here only (the shard routes a result by it, shard.cpp).
    issuer from() const {
        if (answer.index != background_index) return issuer::connection;
        const auto who = static_cast<issuer>(answer.generation >> issuer_shift);
        PERCORE_ASSERT(who != issuer::connection);
        return who;
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
