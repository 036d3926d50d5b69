// feed_cursor: the change feed's cursor (SPEC §8) — where a consumer stands in every shard's log —
// and its text, which clients hold as an opaque string.
//
// A cursor names the data directory (its random id), the layout generation (bumped by every
// resharding), and per shard the highest version the consumer has been shown (changes of that shard
// with a higher version come after it). Versions are per shard and only grow (store/shard_store.hpp),
// so "after version v" is a position in that shard's log that survives restarts and compaction.
//
// Text (lower-case hex, no leading zeros but one "0"; '.' and '-' only, so it needs no escaping in
// a query string, a JSON string or an event-stream id line):
//
//   <directory id>-<generation>-<v0>.<v1>. ... .<vN-1>-<crc32c>
//
// crc32c is over everything before the last '-': a cursor percore did not make (or one cut short or
// retyped) is told apart from a cursor of another directory or layout, which decodes and then does
// not match. At most net::max_cursor_bytes (256 shards of 16 hex digits fit).
//
// Contract: pure functions, any thread.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "shards/base/result.hpp"
#include "shards/base/feed_identity.hpp"

namespace percore::shards {

struct feed_cursor {
    std::uint64_t directory_id = 0;
    std::uint64_t generation = 0;
    std::vector<std::uint64_t> versions;  // one per shard
};

// Appends the cursor's text to `out`.
void append_cursor(std::string& out, const feed_cursor& c);
std::string cursor_text(const feed_cursor& c);

// Where a cursor stands as one number: the sum of its shards' versions (saturating). Versions grow by
// one a change within a primary's run, so two cursors of one primary differ by about the changes
// between them: what SPEC §12 compares boards by ("position"). 0 for "0" and for a text that is not
// a cursor.
std::uint64_t cursor_position(std::string_view text);

// The cursor `text` names, or unexpected when it is not a cursor percore made (a 400, SPEC §8).
result<feed_cursor> parse_cursor(std::string_view text);

}  // namespace percore::shards
