// precondition: the conditions of a conditional write (RFC 9110 §13), as versions, not HTTP text.
//
// The shard that parsed the request turns If-Match / If-None-Match into this; the owning store
// evaluates it against the key's current version when it applies the write, in arrival order, which
// makes conditional writes on one key linearizable. An entity tag that is not one of ours is kept
// as `foreign`: it matches no version.
#pragma once

#include <cstdint>
#include <vector>

namespace percore::store {

struct precondition {
    bool has_if_match = false;
    bool if_match_any = false;            // If-Match: *  (the key must exist)
    std::vector<std::uint64_t> if_match;  // versions; matches if the current one is listed
    bool has_if_none_match = false;
    bool if_none_match_any = false;       // If-None-Match: *  (the key must not exist)
    std::vector<std::uint64_t> if_none_match;

    bool empty() const { return !has_if_match && !has_if_none_match; }

    // RFC 9110 §13.2.2: If-Match is evaluated first, then If-None-Match. Reads and writes share
    // this one evaluator; what a failure answers (412, or 304 for a read's If-None-Match) is the
    // HTTP layer's decision (shards/base/http_decisions.hpp).
    enum class verdict : std::uint8_t { holds, if_match_failed, if_none_match_failed };
    // exists: whether the key currently holds a document; version: its version when it does.
    verdict evaluate(bool exists, std::uint64_t version) const;
    bool holds(bool exists, std::uint64_t version) const { return evaluate(exists, version) == verdict::holds; }
};

}  // namespace percore::store
