// route: what a request-target names in percore's HTTP API (SPEC §2, §5), with the app, the
// percent-decoded key and the list parameters, checked against the API's rules.
//
// Contract
// - parse_route() allocates nothing: decoded bytes go into the caller's route_scratch, which must
//   outlive the returned views.
// - `*` (asterisk-form, OPTIONS only: the connection refuses it for other methods) yields
//   target_kind::asterisk.
// - List parameters (prefix, after, limit) are percent-decoded, '+' as a space, before they are read.
// - A target that breaks the app or key rules yields target_kind::bad with a short reason (400,
//   connection kept); an unknown server endpoint yields not_found.
// - Administration (SPEC §7): /_apps/, /_apps/{app}, /_apps/{app}/tokens and
//   /_apps/{app}/tokens/{id} (id: 1 to max_token_id_bytes of [0-9a-f]); an invalid app name there is
//   bad, anything else under /_apps not_found.
// - Deliveries (SPEC §9): /_apps/{app}/deliveries (a trailing slash allowed) lists them;
//   /_apps/{app}/deliveries/{name} names one, its name in `key`. A name follows the app name rule
//   (1 to max_app_bytes of [a-z0-9_-], not starting with '_'; docs/decisions.md); another is bad.
// - The change feed (SPEC §8): /_changes/{app} with since, feed, limit (default 100), timeout,
//   heartbeat and prefix; a value out of its range, or an unknown feed, is bad; unknown parameters
//   are ignored as in lists. /_changes/ with an invalid app name is bad, anything else not_found.
//   /_changes/_all (no app may start with '_') is the replication feed: the same parameters but
//   prefix, and only feed=normal or longpoll.
// - /_health/primary and /_health/replica?lag=N (SPEC §12) are health with their probe; `lag` is
//   1 to max_health_lag_digits decimal digits (another value is bad); other parameters are ignored;
//   anything else under /_health/ names nothing.
// - /_backup (SPEC §11) is the backup; its query, if any, is ignored.
// - Replication tokens (SPEC §7): /_replication/tokens (a trailing slash allowed) and
//   /_replication/tokens/{id} (the id in `key`, as for app tokens); anything else under
//   /_replication not_found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "net/limits.hpp"

namespace percore::net {

inline constexpr std::string_view replication_feed_name = "_all";

enum class target_kind : std::uint8_t {
    document, list, health, metrics, stats, asterisk, not_found, bad,
    apps,        // /_apps/ (and /_apps): every app
    app,         // /_apps/{app}
    app_tokens,  // /_apps/{app}/tokens
    app_token,   // /_apps/{app}/tokens/{id}: the id in `key`
    changes,     // /_changes/{app}: the change feed (SPEC §8), parameters in the feed_ fields
    app_deliveries,  // /_apps/{app}/deliveries: the app's deliveries (SPEC §9)
    app_delivery,    // /_apps/{app}/deliveries/{name}: the name in `key`
    replication,     // /_changes/_all: every app's and the catalog's changes with their values, for
                     // followers (SPEC §10; server admin only); feed normal or longpoll
    replication_tokens,  // /_replication/tokens: the tokens followers copy with (SPEC §7; server admin only)
    replication_token,   // /_replication/tokens/{id}: the id in `key`
    backup,          // /_backup: a tar of the data directory (SPEC §11; server admin only)
};
// How many kinds there are (a table indexed by kind has this many rows): keep `backup` the last.
inline constexpr std::size_t target_kind_count = static_cast<std::size_t>(target_kind::backup) + 1;

enum class feed_mode : std::uint8_t { normal, longpoll, continuous, eventsource };

// /_health (status), /_health/primary and /_health/replica (SPEC §12: HAProxy's checks).
enum class health_probe : std::uint8_t { status, primary, replica };

struct route_scratch {
    char key[max_key_bytes];
    char prefix[max_key_bytes];
    char after[max_key_bytes];
    char since[max_cursor_bytes];
};

struct route {
    target_kind kind = target_kind::not_found;
    std::string_view app;
    std::string_view key;     // document
    std::string_view prefix;  // list
    std::string_view after;   // list
    bool has_after = false;
    std::uint32_t limit = default_list_limit;
    const char* reason = "";  // bad
    // changes: `since` as sent (decoded; empty when absent), the mode and the seconds asked for
    std::string_view since;
    bool has_since = false;
    feed_mode feed = feed_mode::normal;
    std::uint32_t timeout_s = default_changes_timeout_s;
    std::uint32_t heartbeat_s = default_changes_heartbeat_s;
    // health: which probe; replica: the largest lag in changes still healthy (has_lag: `lag` given)
    health_probe probe = health_probe::status;
    bool has_lag = false;
    std::uint64_t lag = 0;
};

route parse_route(std::string_view target, route_scratch& scratch);

// Percent-decodes `in` into out[0, max); '+' becomes a space when plus_is_space. Returns the
// decoded length, or -1 on a malformed escape or when the result would exceed `max`.
std::ptrdiff_t percent_decode(std::string_view in, char* out, std::size_t max, bool plus_is_space);

bool valid_utf8(std::string_view s);

// The rule of document keys (SPEC §2), as a key is checked once percent-decoded: nullptr when `key`
// is 1 to max_key_bytes of valid UTF-8 without NUL, else the reason it is not (a short static text).
// Inline: every document request runs it (out of line it cost ~22 instructions a GET more).
inline const char* key_problem(std::string_view key) {
    if (key.empty()) return "empty key";
    if (key.size() > max_key_bytes) return "key longer than 1024 bytes";
    if (std::memchr(key.data(), 0, key.size())) return "key contains NUL";
    if (!valid_utf8(key)) return "key is not valid UTF-8";
    return nullptr;
}

// The rule of app names, which delivery names follow too: 1 to max_app_bytes of [a-z0-9_-], not
// starting with '_' (that namespace is the server's).
bool valid_app_name(std::string_view name);

}  // namespace percore::net
