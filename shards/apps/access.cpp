#include "shards/apps/access.hpp"

#include "net/address_policy.hpp"

#include <array>
#include <ctime>
#include <span>

#include "crypto/digest.hpp"
#include "shards/runtime/check.hpp"
#include "store/document.hpp"

namespace percore::shards {

namespace {

// RFC 6750 §2.1's b64token characters, as a table (one load per byte on the verification path).
constexpr std::array<bool, 256> token68_table = [] {
    std::array<bool, 256> t{};
    for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<std::size_t>(c)] = true;
    for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = true;
    for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = true;
    for (char c : std::string_view("-._~+/=")) t[static_cast<unsigned char>(c)] = true;
    return t;
}();

bool is_token68(char c) { return token68_table[static_cast<unsigned char>(c)]; }

// What follows "Bearer " (any case, one or more spaces), unchecked; empty when the scheme is not Bearer.
std::string_view after_bearer(std::string_view v) {
    constexpr std::string_view scheme = "bearer";
    if (v.size() <= scheme.size() + 1) return {};
    for (std::size_t i = 0; i < scheme.size(); ++i)
        if ((v[i] | 0x20) != scheme[i]) return {};
    std::size_t i = scheme.size();
    if (v[i] != ' ') return {};
    while (i < v.size() && v[i] == ' ') ++i;
    return v.substr(i);
}

bool scope_allows(token_scope scope, net::method verb) {
    bool read = verb == net::method::get || verb == net::method::head || verb == net::method::options;
    return read || scope != token_scope::read;
}

bool is_admin_target(net::target_kind k) {
    return k == net::target_kind::apps || k == net::target_kind::app || k == net::target_kind::app_tokens ||
           k == net::target_kind::app_token || k == net::target_kind::app_deliveries ||
           k == net::target_kind::app_delivery;
}

}  // namespace

std::string_view bearer_token(std::string_view v) {
    std::string_view token = after_bearer(v);
    if (token.empty()) return {};
    for (char c : token)
        if (!is_token68(c)) return {};
    return token;
}

bool same_token(std::string_view presented, std::string_view cached) {
    auto bytes = [](std::string_view s) {
        return std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
    };
    return crypto::equal_constant_time(bytes(presented), bytes(cached));
}

access_control::access_control(store_client& stores, app_registry& apps, const auth_config& config)
    : stores_(stores), apps_(apps), config_(config) {
    PERCORE_REQUIRES(!config.on || (config.api != nullptr && !config.admin_token.empty()));
}

access_control::cached& access_control::slot(net::answer_ticket ticket) {
    if (ticket.index >= cache_.size()) cache_.resize(ticket.index + 1);
    cached& c = cache_[ticket.index];
    if (c.generation != ticket.generation) {
        c.generation = ticket.generation;
        c.verified = false;
        c.token.clear();
        c.who = principal{};
    }
    return c;
}

void access_control::closed(net::answer_ticket ticket) {
    if (ticket.index >= cache_.size() || cache_[ticket.index].generation != ticket.generation) return;
    cached& c = cache_[ticket.index];
    c.verified = false;
    c.token.clear();
    c.token.shrink_to_fit();
    c.who = principal{};
}

const principal& access_control::principal_of(net::answer_ticket ticket) const {
    if (!config_.on || ticket.index >= cache_.size()) return anyone_;
    const cached& c = cache_[ticket.index];
    return c.generation == ticket.generation && c.verified ? c.who : anyone_;
}

std::optional<std::string_view> reachable_prefix(const principal& who, std::string_view asked) {
    if (who.kind != principal_kind::app_token || who.prefix.empty() || asked.starts_with(who.prefix)) return asked;
    if (std::string_view(who.prefix).starts_with(asked)) return std::string_view(who.prefix);
    return std::nullopt;
}

const store::document* access_control::token_document(std::string_view id) {
    key_.assign(token_records);
    key_.append(id);
    const store::snapshot* snap = stores_.current(stores_.owner_of(key_));
    return snap ? snap->find(key_) : nullptr;
}

// A verified token is still good while its record is the version that was verified, its app exists
// and it has not expired. The epoch moves on every revocation and app deletion, so an app deleted
// and created again under the same name (the same registry entry) costs its old tokens a lookup,
// which finds their records erased.
bool access_control::still_valid(const principal& who, std::uint64_t& token_epoch, std::int64_t now) {
    if (who.kind == principal_kind::server_admin || who.kind == principal_kind::anyone) return true;
    const bool of_an_app = who.kind == principal_kind::app_token;
    if (of_an_app && (!who.app || !who.app->exists())) return false;
    if (who.expires && now >= who.expires) return false;
    const std::uint64_t epoch = apps_.token_epoch();
    if (epoch == token_epoch) return true;  // no token was revoked since it was last checked
    const store::document* doc = token_document(who.id);
    if (!doc || doc->version() != who.record_version) return false;
    token_epoch = epoch;
    return true;
}

std::string acting_as(const principal& who) {
    switch (who.kind) {
    case principal_kind::server_admin: return "the server admin";
    case principal_kind::app_token: return "token " + who.id;
    case principal_kind::replicator: return "replication token " + who.id;
    case principal_kind::anyone: break;
    }
    return "anyone (auth off)";
}

access_grant access_control::grant_of(net::answer_ticket ticket) const {
    const principal& who = principal_of(ticket);
    const bool cached_here = who.kind == principal_kind::app_token || who.kind == principal_kind::replicator;
    return access_grant{who, cached_here ? cache_[ticket.index].token_epoch : apps_.token_epoch()};
}

bool access_control::still_holds(access_grant& grant, std::int64_t now) {
    return still_valid(grant.who, grant.token_epoch, now);
}

bool access_control::verify_app_token(std::string_view token, const crypto::sha256_digest& digest, cached& c,
                                      std::int64_t now) {
    auto id = token_id_of(token);
    if (!id) return false;
    const store::document* doc = token_document(*id);
    if (!doc || doc->in_file()) return false;  // catalog records are small: always in memory
    auto record = decode_token_record(doc->value());
    if (!record || !crypto::equal_constant_time(digest, record->hash)) return false;
    if (record->expires && now >= record->expires) return false;
    app_entry* app = nullptr;
    if (record->scope != token_scope::replicate) {
        app = apps_.find(record->app);
        if (!app || !app->exists()) return false;  // a deleted app's tokens are unknown
    }
    c.who.kind = app ? principal_kind::app_token : principal_kind::replicator;
    c.who.app = app;
    c.who.scope = record->scope;
    c.who.prefix = std::move(record->prefix);
    c.who.id.assign(*id);
    c.who.record_version = doc->version();
    c.who.expires = record->expires;
    return true;
}

const principal* access_control::authenticate(const net::request_head& head, net::answer_ticket ticket, refusal& why) {
    if (!config_.on) return &anyone_;
    std::string_view field;
    if (!head.find("authorization", field)) {
        why = {401, "missing token"};
        return nullptr;
    }
    cached& c = slot(ticket);
    const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
    // the bytes this connection's token was verified as need no second look at their characters
    if (c.verified && same_token(after_bearer(field), c.token) && still_valid(c.who, c.token_epoch, now)) {
        if (c.who.kind != principal_kind::server_admin && now > c.last_used_noted) {
            c.last_used_noted = now;
            apps_.note_token_use(c.who.id, now);
        }
        return &c.who;
    }
    std::string_view token = bearer_token(field);
    if (token.empty()) {
        why = {401, "malformed Authorization"};
        return nullptr;
    }
    c.verified = false;
    c.who = principal{};
    auto digest = crypto::sha256(*config_.api, std::span<const char>(token.data(), token.size()));
    if (!digest) {
        why = {503, "cannot hash the token"};
        return nullptr;
    }
    if (crypto::equal_constant_time(*digest, config_.admin_digest)) {
        c.who.kind = principal_kind::server_admin;
    } else if (c.token_epoch = apps_.token_epoch(); !verify_app_token(token, *digest, c, now)) {
        why = {401, "unknown, expired or revoked token"};
        return nullptr;
    } else {
        c.last_used_noted = now;
        apps_.note_token_use(c.who.id, now);
    }
    c.verified = true;
    c.token.assign(token);
    return &c.who;
}

refusal access_control::authorize(const principal& who, const net::route& r, net::method verb,
                                  const app_entry* app) const {
    using net::target_kind;
    // `anyone` is everyone only with auth off; with auth on it is no one (a path that skipped
    // authenticate() must not inherit the server admin's reach: security review L7)
    if (who.kind == principal_kind::anyone && config_.on) return {401, "missing token"};
    if (who.kind == principal_kind::replicator) {
        const bool reaches = r.kind == target_kind::health || r.kind == target_kind::replication;
        return reaches ? refusal{} : refusal{403, "a replication token reads only /_changes/_all"};
    }
    const bool server_admin = who.kind != principal_kind::app_token;  // anyone (auth off) included
    switch (r.kind) {
    case target_kind::health:
        return {};
    case target_kind::metrics:
    case target_kind::stats:
    case target_kind::apps:
    case target_kind::replication:  // every app's values, and the catalog's token hashes
    case target_kind::backup:       // the whole data directory (SPEC §11)
    case target_kind::replication_tokens:
    case target_kind::replication_token:
        return server_admin ? refusal{} : refusal{403, "needs the server's admin token"};
    default:
        break;
    }
    if (r.kind == target_kind::asterisk || r.kind == target_kind::not_found || r.kind == target_kind::bad) return {};
    if (!server_admin) {
        if (who.app != app) return {403, "token of another app"};
        if (is_admin_target(r.kind)) {
            // an app's admin reads its app and manages its tokens and deliveries; only the server admin makes,
            // changes and deletes apps
            bool app_write = r.kind == target_kind::app && verb != net::method::get && verb != net::method::head;
            if (who.scope != token_scope::admin || app_write) return {403, "needs an admin token"};
            return {};
        }
        if (!scope_allows(who.scope, verb)) return {403, "read-only token"};
        if (r.kind == target_kind::document && !r.key.starts_with(who.prefix)) return {403, "key outside the token's prefix"};
        return {};
    }
    if (!config_.on) return {};  // --auth off: apps are made by their first write
    bool creating = r.kind == target_kind::app && verb == net::method::put;
    if (!creating && (!app || !app->exists())) return {404, "no such app"};
    return {};
}

bool manages(const principal& who, std::string_view object_prefix) {
    return who.kind != principal_kind::app_token || object_prefix.starts_with(who.prefix);
}

std::int64_t access_control::last_used(const app_registry& apps, std::string_view id) { return apps.token_last_used(id); }

}  // namespace percore::shards
