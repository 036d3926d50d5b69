// json_value: a strict reader for the small JSON bodies of the administration API (SPEC §7:
// `{"quota":{…}}`, `{"scope":…,"prefix":…,"ttl":…}`) and of the catalog's own records.
//
// Contract
// - parse_json() reads one JSON value (RFC 8259) filling the whole text (whitespace around it
//   allowed) and returns it, or one short reason for a 400. Strings are decoded (escapes, \u
//   with surrogate pairs) and must be valid UTF-8; duplicate object keys are refused (a body that
//   says two things is not guessed at); nesting deeper than max_json_depth and texts longer than
//   max_json_bytes are refused.
// - Numbers keep their text; as_count() gives a whole number 0..2^63-1 (no sign, fraction or
//   exponent), which is every number the API takes.
// - Any thread; allocates (administration is not a hot path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shards/base/result.hpp"

namespace percore::shards {

// Administration bodies are a few hundred bytes; 64 KiB bounds the parse whatever a client sends.
inline constexpr std::size_t max_json_bytes = 64 * 1024;
inline constexpr unsigned max_json_depth = 8;

struct json_value {
    enum class kind : std::uint8_t { null, boolean, number, string, array, object };
    kind what = kind::null;
    bool flag = false;                                     // boolean
    std::string text;                                      // string (decoded), number (as written)
    std::vector<json_value> items;                         // array elements, or an object's values
    std::vector<std::string> names;                        // object: the name of each of items, in order
                                                           // (a vector of pairs would hold an incomplete type)

    // The member named `name` of an object, or null when absent (or this is no object).
    const json_value* find(std::string_view name) const;
    std::optional<std::uint64_t> as_count() const;
};

result<json_value> parse_json(std::string_view text);
// The same with another bound on the text (a follower's replication page: limits.hpp).
result<json_value> parse_json(std::string_view text, std::size_t max_bytes);

}  // namespace percore::shards
