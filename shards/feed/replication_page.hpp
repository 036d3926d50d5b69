// replication_page: what a follower copies (SPEC §10) — a page of the server-admin change feed of
// every app and of the catalog, GET /_changes/_all, with each change's value inline, as CouchDB's
// `include_docs` does. One exchange moves a page; no GET per key.
//
//   {"changes":[{"app":"…","key":"…","etag":"\"…\"","deleted":false,"content_type":"…",
//                "value_base64":"…"},…],"last_cursor":"…","pending":N,"epoch":E}
//
// `app` is the store key's namespace (an app's name, or "_percore" for the catalog: catalog.hpp)
// and `key` the rest; a deleted key has "deleted":true and null content_type and value_base64.
// `etag` is the document's ETag (store::document::etag_version: on a follower, its primary's), which a
// follower keeps as its copy's ETag, so a follower of a follower serves the primary's too.
// `pending` counts the changes after last_cursor when the page was made, up to
// max_replication_pending_count (limits.hpp): the follower's lag in changes. `epoch` is the group's
// epoch as the primary knows it (SPEC §12; 0 without --cluster): a follower refuses a page of an
// epoch older than the one it follows.
//
// Contract
// - Inside a reader round, on the thread of the change_feed it is given (it reads snapshots, and
//   values in segment files with pread).
// - Changes come as the feed orders them (per shard in commit order; limits.hpp bounds the page:
//   at most max_replication_page_value_bytes of values, a larger document alone, at most `limit`
//   changes). A follower's own records (follower_records, catalog.hpp) are passed over: they
//   describe the follower's copy, not the data, and must not travel to a follower of it.
// - It reads every shard's newest durable snapshot (change_feed::durable_reads), newer than what
//   clients are shown under --replication sync (SPEC §12): the follower's copy is what lets it show.
// - Errors are values: a value that cannot be read leaves `pos` after the changes written so far.
#pragma once

#include <cstdint>
#include <expected>
#include <string>

#include "shards/base/result.hpp"
#include "shards/feed/change_feed.hpp"

namespace percore::shards {

struct replication_page_stats {
    std::uint32_t changes = 0;  // written into the page
    std::uint64_t pending = 0;  // after it (bounded)
};

// Replaces `out` with the page after `pos` and moves `pos` past it.
result<replication_page_stats> make_replication_page(change_feed& feed,
                                                                                     feed_cursor& pos,
                                                                                     std::uint32_t limit,
                                                                                     std::string& out);

}  // namespace percore::shards
