// catalog: apps and tokens as durable records (SPEC §7) — documents of the reserved namespace
// "_percore" (no app name may start with '_'), so they are batched, logged, recovered, compacted
// and resharded exactly like documents, and read by any shard from their owner's snapshot.
//
// The records (store key → value, JSON so that `percore check` and a reader of the log see text):
//
//   "_percore\0app/{app}"       {"quota":{"documents":N,…}}          the app exists (PUT /_apps/{app})
//   "_percore\0token/{id}"      {"app":"…","scope":"read|write|admin","prefix":"…","expires":T,
//                                "created":T,"hash":"<sha256 of the token, 64 hex>"}
//                               a replication token (SPEC §7, /_replication/tokens) is the same
//                               record with "app":"" and "scope":"replicate", and only such a one
//   "_percore\0deleted/{app}"   {}                                   DELETE /_apps/{app} answered:
//                                                                     erasing (resumed after a restart)
//   "_percore\0follower/cursor" {"primary":"URL","cursor":"…"}       a follower's place in its
//                                                                     primary's feed (follower.hpp)
//   "_percore\0delivery/{app}/{name}"  a delivery (SPEC §9): delivery_record.hpp has its fields;
//                                      app and delivery names hold no '/', so "delivery/{app}/"
//                                      is the prefix of exactly that app's deliveries
//
// A token is "pct_" + id (16 hex digits, 64 random bits) + "_" + secret (43 base64url characters,
// 256 random bits): 64 bytes. Only its SHA-256 is stored; the id in it finds the record without a
// scan, and the secret is what is checked (in constant time).
//
// Pure functions on any thread (but make_token, which reads getrandom).
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include "shards/base/result.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/base/json_value.hpp"
#include "shards/base/store_client.hpp"

namespace percore::shards {

inline constexpr std::string_view catalog_namespace = "_percore";
inline constexpr std::string_view app_records = std::string_view("_percore\0app/", 13);
inline constexpr std::string_view token_records = std::string_view("_percore\0token/", 15);
inline constexpr std::string_view deleted_records = std::string_view("_percore\0deleted/", 17);
inline constexpr std::string_view delivery_records = std::string_view("_percore\0delivery/", 18);
// A follower's own records (follower.hpp): where it stands in its primary's feed. Never copied.
inline constexpr std::string_view follower_records = std::string_view("_percore\0follower/", 18);
inline constexpr std::string_view token_prefix = "pct_";
inline constexpr std::size_t token_id_chars = 16;
inline constexpr std::size_t token_secret_chars = 43;  // 32 bytes in unpadded base64url
inline constexpr std::size_t token_bytes = token_prefix.size() + token_id_chars + 1 + token_secret_chars;
static_assert(token_id_chars <= net::max_token_id_bytes, "a token id fits the route");
// --ttl: at most ten years (so expires stays far from overflow).
inline constexpr std::uint64_t max_token_ttl_seconds = 10ull * 366 * 24 * 3600;

// replicate: a replication token's (SPEC §7): it reads /_changes/_all and nothing else, and
// belongs to no app. No request names it: parse_scope() knows only read, write and admin.
enum class token_scope : std::uint8_t { read, write, admin, replicate };
std::string_view scope_name(token_scope s);
std::optional<token_scope> parse_scope(std::string_view s);

struct token_record {
    std::string app;
    token_scope scope = token_scope::read;
    std::string prefix;
    std::int64_t expires = 0;  // unix seconds; 0: never
    std::int64_t created = 0;
    std::array<std::uint8_t, 32> hash{};
};

struct new_token {
    std::string id;
    std::string token;
};

// A fresh random token (getrandom).
new_token make_token();
// A fresh server admin token: "pca_" + 43 base64url characters (256 random bits).
std::string make_admin_token();
// The id inside a token of percore's form, or nullopt.
std::optional<std::string_view> token_id_of(std::string_view token);

std::string catalog_key(std::string_view records, std::string_view name);
// "_percore\0delivery/{app}/": the prefix of the app's delivery records.
std::string delivery_records_of(std::string_view app);
// "_percore\0delivery/{app}/{name}".
std::string delivery_key(std::string_view app, std::string_view name);

// Sends a catalog record's write to its owner: a put of `value` (application/json), or an erase when
// `erase`; its result comes back with `tag`. On the calling shard's thread (store_client).
void submit_catalog_write(store_client& stores, std::uint64_t tag, std::string key, std::string_view value,
                          store::precondition pre, bool erase);

// {"documents":N,…} with the limited fields only; {} when unlimited.
void append_quota_json(std::string& out, const app_quota& q);
// A "quota" object of a request or a record: every field optional, whole numbers; unknown → error.
result<app_quota> quota_from_json(const json_value* quota);
std::string encode_app_record(const app_quota& q);
result<app_quota> decode_app_record(std::string_view value);
std::string encode_token_record(const token_record& t);
// Whether a token record's value is of `app`, without decoding it: encode_token_record writes the
// app first, so a compare of its head tells (a scan over every app's tokens decodes only one app's).
bool token_record_of(std::string_view value, std::string_view app);
result<token_record> decode_token_record(std::string_view value);

}  // namespace percore::shards
