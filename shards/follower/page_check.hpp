// page_check: reads a replication page the primary answered (GET /_changes/_all, the format in
// shards/feed/replication_page.hpp) and checks it whole before the follower applies any of it
// (SPEC §10, "The follower trusts no page"; docs/decisions.md, issue 30). A page is input like a
// client's request: what a client could not write, a page cannot write either.
//
// Contract
// - read_replication_page(body) is pure (any thread, no I/O, no state): the page with every value
//   decoded once, or one problem saying what is wrong first (for the follower's one log line; it
//   never holds a value or a secret). A problem means: apply no change of this page.
// - An accepted page:
//   - body at most max_replication_page_bytes, one JSON object (json_value.hpp's parser, bounded by
//     that size and its depth) with "changes" an array of at most max_replication_page_changes
//     objects, "last_cursor" "0" or a cursor parse_cursor takes (so it goes back into the next
//     request's target as it is), "pending" a count;
//   - every change passes check_change: "app" a valid app name (net/route.hpp) or the catalog's
//     namespace "_percore"; "key" a document key (net::key_problem: 1-1024 bytes, UTF-8, no NUL);
//     "deleted" a boolean; a put's "content_type" a field value a request could carry
//     (net::valid_field_value, at most max_replication_content_type_bytes), its "value_base64"
//     padded base64 and its "etag" a strong entity tag percore makes (net::parse_etag: 16 lower-case
//     hex digits in quotes) of a version from 1 to below store::version_limit (2^63), which the
//     follower keeps as the copy's ETag (SPEC §10, "Same versions on every board"); a deletion's
//     content_type and value_base64 null or absent (its etag is not read: a delete is a plain erase);
//   - every "_percore" change is a record the catalog knows (catalog.hpp): app/{app},
//     deleted/{app}, token/{id}, delivery/{app}/{name}, or follower/… (the follower's own, passed
//     over); its names follow the app name rule, its id is a token id, and a put's value decodes
//     with the decoder recovery and the registry use (decode_app_record, decode_token_record with
//     a valid app and a prefix no longer than a key, decode_delivery_record).
// - Other members (a deletion's etag, anything a newer primary adds) are not read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shards/base/result.hpp"

namespace percore::shards {

struct page_change {
    std::string app;           // an app's name, or catalog_namespace
    std::string key;
    bool deleted = false;
    std::string content_type;  // a put's
    std::string value;         // a put's, decoded
    std::uint64_t etag_version = 0;  // a put's: the primary's ETag version (0 for a deletion)
};

struct checked_page {
    std::vector<page_change> changes;
    std::string last_cursor;
    std::uint64_t pending = 0;
    std::uint64_t epoch = 0;   // the primary's group epoch (SPEC §12); 0 when it sent none
};

// The page in `body`, every change checked, or the first thing wrong.
[[nodiscard]] result<checked_page> read_replication_page(std::string_view body);

// One change's own rules (above), the catalog's included.
[[nodiscard]] result<void> check_change(const page_change& change);

}  // namespace percore::shards
