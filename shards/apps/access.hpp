// access: who a request comes from and what it may reach (SPEC §7) — the bearer token checked
// against the admin token or the catalog, cached per connection, and the scope, prefix and app
// rules applied in the order the contract gives (401, then 403, then 404).
//
// Contract
// - One per shard, on that shard's thread (the document service owns it). It reads the catalog's
//   token records from their owners' snapshots (store_client::current: no hop) and the registry.
// - authenticate(): with auth off, everyone is `anyone`. With auth on, a request without
//   `Authorization: Bearer TOKEN`, with a malformed one, or with a token that is unknown, expired,
//   revoked or of an app that no longer exists, is refused 401. A presented token is hashed once
//   (SHA-256) and its digest compared, in constant time, with the admin token's and with its
//   record's hash (so neither comparison tells anything by its length or its time). A verified token is cached per connection (by ticket index and generation): the
//   same bytes on a later request of that connection cost no lookup while no token was revoked
//   since (the registry's token epoch, bumped before a revocation is answered); after one, a
//   lookup of the token's record in its owner's snapshot (version unchanged: still valid; gone or
//   changed: verified again), never a hash. Revocation is therefore seen by the next request on
//   every shard.
// - Tokens never appear in a log line, a metric or an error body: refusals name only the cause.
// - closed(): the connection's cache entry is dropped.
// - REQUIRES: with auth on, a crypto module (for SHA-256).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/digest.hpp"
#include "crypto/loader.hpp"
#include "net/address_policy.hpp"
#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/base/store_client.hpp"

namespace percore::shards {

struct auth_config {
    bool on = false;
    std::string admin_token;                 // the contents of --admin-token-file (auth on)
    crypto::sha256_digest admin_digest{};     // its SHA-256: every presented token is compared by digest
    const crypto::crypto_api* api = nullptr;  // SHA-256 (auth on)
    // Auth off because every listen address is loopback: only requests whose Host (and Origin,
    // when sent) name this machine are served (SPEC §7, against DNS rebinding).
    bool loopback_hosts_only = false;
};

// replicator: a replication token's holder (a follower, SPEC §7): /_changes/_all and /_health only.
enum class principal_kind : std::uint8_t { anyone, server_admin, app_token, replicator };

struct principal {
    principal_kind kind = principal_kind::anyone;
    app_entry* app = nullptr;     // app_token
    token_scope scope = token_scope::read;
    std::string prefix;           // app_token: keys it reaches begin with this
    std::string id;               // app_token, replicator
    std::uint64_t record_version = 0;
    std::int64_t expires = 0;     // unix seconds; 0: never
};

// What a waiting feed keeps of the principal that opened it, to check it again while it waits
// (SPEC §7: a revoked or expired token, or its app deleted, ends the feeds opened with it).
struct access_grant {
    principal who;
    std::uint64_t token_epoch = 0;  // the registry's token epoch when last checked
};

// Who did something, for an audit log line (never a secret): "the server admin", "token {id}",
// "replication token {id}", or "anyone (auth off)".
std::string acting_as(const principal& who);

// A refusal: the status and the one-line reason of its JSON body.
struct refusal {
    int status = 0;  // 0: allowed
    const char* reason = "";
};

class access_control {
public:
    access_control(store_client& stores, app_registry& apps, const auth_config& config);

    bool auth_on() const { return config_.on; }
    // Whether the request may be served at all: with config.loopback_hosts_only, its Host and its
    // Origin (when sent) must name this machine (net/address_policy.hpp); otherwise always.
    // The parser decided whether the Host names this machine (once per Host a connection sends);
    // an empty Host (RFC 9110 §7.2: a target with no authority) names no other machine either.
    bool from_allowed_host(const net::request_head& head) const {
        if (!config_.loopback_hosts_only) return true;
        const bool host_ok = !head.has_host || head.host.empty() || head.host_is_loopback;
        return host_ok && (!head.has_origin || net::loopback_origin(head.origin));
    }
    const crypto::crypto_api* api() const { return config_.api; }
    // The request's principal (valid until the next call for this connection), or a 401.
    const principal* authenticate(const net::request_head& head, net::answer_ticket ticket, refusal& why);
    // Whether `who` may do `verb` on route `r` (apps and tokens: the administration's rules;
    // documents and lists: app, scope and prefix): 0, 403, or 404 (the app does not exist).
    // `app`: the registry's entry of r.app (null when none).
    refusal authorize(const principal& who, const net::route& r, net::method verb, const app_entry* app) const;
    // The principal authenticate() found for this connection's current request (anyone with auth off).
    const principal& principal_of(net::answer_ticket ticket) const;
    // The principal of this connection's current request, to be checked again later (a feed that waits).
    access_grant grant_of(net::answer_ticket ticket) const;
    // Whether `grant` still holds at unix time `now`: its token's record unchanged (looked up only
    // when a token was revoked since the last check), not expired, its app not deleted. The server
    // admin and anyone (auth off) always hold.
    bool still_holds(access_grant& grant, std::int64_t now);
    // The catalog record of a token id (null when none), from its owner's snapshot.
    const store::document* token_document(std::string_view id);
    void closed(net::answer_ticket ticket);
    // Unix seconds a token was last used on this server since it started (0: not since then).
    static std::int64_t last_used(const app_registry& apps, std::string_view id);

private:
    struct cached {
        std::uint32_t generation = 0;
        bool verified = false;
        std::string token;
        principal who;
        std::int64_t last_used_noted = 0;
        std::uint64_t token_epoch = 0;  // the registry's token epoch when last checked
    };
    cached& slot(net::answer_ticket ticket);
    bool still_valid(const principal& who, std::uint64_t& token_epoch, std::int64_t now);
    bool verify_app_token(std::string_view token, const crypto::sha256_digest& digest, cached& c, std::int64_t now);

    store_client& stores_;
    app_registry& apps_;
    const auth_config& config_;
    principal anyone_;
    std::vector<cached> cache_;   // by connection index
    std::string key_;             // reused lookup key

};

// The key prefix a list or a feed of `who` covers when `asked` is asked for: `asked` when it lies
// within the token's prefix (or the principal has none), the token's prefix when it lies within
// `asked`, and none when they part (the answer is an empty page). Views into `who` or `asked`.
std::optional<std::string_view> reachable_prefix(const principal& who, std::string_view asked);

// Whether `who` manages a token or a delivery whose prefix is `object_prefix` (SPEC §7): an app's
// token with a prefix only those within its own (object_prefix begins with it); the server's admin,
// anyone with auth off, and an app token without a prefix every one. (The route's app and the
// token's scope are authorize()'s to check.)
bool manages(const principal& who, std::string_view object_prefix);

// "Bearer TOKEN" → TOKEN (scheme case-insensitive, RFC 6750 §2.1: token68 characters); an empty
// view when the field is absent or malformed.
std::string_view bearer_token(std::string_view authorization);

// Whether a presented token is the one a connection's cache holds (SPEC §7: constant time): the
// time depends on the lengths only, never on the bytes or where they differ (crypto's
// equal_constant_time); different lengths answer false. One backend connection may carry several
// clients' requests (HAProxy's http-reuse), so one client's guess meets another's cached token.
bool same_token(std::string_view presented, std::string_view cached);

}  // namespace percore::shards
