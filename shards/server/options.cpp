#include "shards/server/options.hpp"

#include "shards/cluster/cluster_records.hpp"
#include "shards/cluster/etcd_client.hpp"
#include "shards/deliveries/delivery_record.hpp"
#include "net/address_policy.hpp"
#include "net/resolve.hpp"
#include "shards/runtime/check.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace percore::shards {

namespace {

struct option_spec {
    const char* flag;  // --name
    const char* env;   // PERCORE_NAME
};

constexpr option_spec specs[] = {
    {"--listen", "PERCORE_LISTEN"},
    {"--shards", "PERCORE_SHARDS"},
    {"--data", "PERCORE_DATA"},
    {"--durability", "PERCORE_DURABILITY"},
    {"--max-body", "PERCORE_MAX_BODY"},
    {"--body-budget", "PERCORE_BODY_BUDGET"},
    {"--max-connections", "PERCORE_MAX_CONNECTIONS"},
    {"--idle-timeout", "PERCORE_IDLE_TIMEOUT"},
    {"--tls-listen", "PERCORE_TLS_LISTEN"},
    {"--tls-cert", "PERCORE_TLS_CERT"},
    {"--tls-key", "PERCORE_TLS_KEY"},
    {"--auth", "PERCORE_AUTH"},
    {"--admin-token-file", "PERCORE_ADMIN_TOKEN_FILE"},
    {"--changes-retention", "PERCORE_CHANGES_RETENTION"},
    {"--follow", "PERCORE_FOLLOW"},
    {"--follow-token-file", "PERCORE_FOLLOW_TOKEN_FILE"},
    {"--follow-ca-file", "PERCORE_FOLLOW_CA_FILE"},
    {"--follow-insecure", "PERCORE_FOLLOW_INSECURE"},
    {"--deliveries-allow", "PERCORE_DELIVERIES_ALLOW"},
    {"--cluster", "PERCORE_CLUSTER"},
    {"--group", "PERCORE_GROUP"},
    {"--board", "PERCORE_BOARD"},
    {"--advertise", "PERCORE_ADVERTISE"},
    {"--cluster-ttl", "PERCORE_CLUSTER_TTL"},
    {"--replication", "PERCORE_REPLICATION"},
    {"--sync-timeout", "PERCORE_SYNC_TIMEOUT"},
};

// Flags that are switches: given alone they mean "on"; with a value (=VALUE or the environment),
// on|off, yes|no, true|false or 1|0.
constexpr std::string_view switch_flags[] = {"--follow-insecure"};

bool is_switch(std::string_view flag) {
    for (std::string_view s : switch_flags)
        if (s == flag) return true;
    return false;
}

bool loopback_host(std::string_view host) {
    return host == "localhost" || host == "::1" || host.starts_with("127.");
}

result<std::uint64_t> parse_count(std::string_view name, std::string_view text) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || text.empty())
        return std::unexpected(std::string(name) + " expects a whole number, got '" + std::string(text) + "'");
    return v;
}

result<void> parse_listen(std::string_view name, std::string_view text, std::string& host,
                                              std::uint16_t& port) {
    std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
        return std::unexpected(std::string(name) + " expects HOST:PORT, got '" + std::string(text) + "'");
    std::string_view h = text.substr(0, colon);
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    auto p = parse_count(name, text.substr(colon + 1));
    if (!p || *p > 65535)
        return std::unexpected(std::string(name) + " expects a port from 0 to 65535 in '" + std::string(text) + "'");
    host = std::string(h);
    port = static_cast<std::uint16_t>(*p);
    return {};
}

// --auth and --admin-token-file (SPEC §7).
result<void> apply_auth(server_options& o, std::string_view flag, std::string_view value) {
    if (flag == "--admin-token-file") {
        if (value.empty()) return std::unexpected("--admin-token-file expects a file");
        o.admin_token_file = std::string(value);
        return {};
    }
    if (value == "auto") o.auth = auth_mode::automatic;
    else if (value == "on") o.auth = auth_mode::on;
    else if (value == "off") o.auth = auth_mode::off;
    else return std::unexpected("--auth expects auto, on or off, got '" + std::string(value) + "'");
    return {};
}

// --follow, --follow-token-file, --follow-ca-file and --follow-insecure (SPEC §10).
result<void> apply_follow(server_options& o, std::string_view flag, std::string_view value) {
    if (flag == "--follow-token-file" || flag == "--follow-ca-file") {
        if (value.empty()) return std::unexpected(std::string(flag) + " expects a file");
        (flag == "--follow-ca-file" ? o.follow_ca_file : o.follow_token_file) = std::string(value);
        return {};
    }
    if (flag == "--follow-insecure") {
        if (value == "on" || value == "yes" || value == "true" || value == "1") o.follow_insecure = true;
        else if (value == "off" || value == "no" || value == "false" || value == "0") o.follow_insecure = false;
        else return std::unexpected("--follow-insecure expects on or off, got '" + std::string(value) + "'");
        return {};
    }
    // the primary's base URL: what a delivery may be sent to, with no path of its own
    auto url = parse_delivery_url(value);
    if (!url) return std::unexpected("--follow: " + url.error().reason);
    if (url->target != "/")
        return std::unexpected("--follow expects the primary's base URL (no path), got '" + std::string(value) + "'");
    o.follow_url = std::string(value);
    if (o.follow_url->ends_with('/')) o.follow_url->pop_back();
    return {};
}

// A base URL with no path: http(s)://HOST:PORT, as --follow's.
bool is_base_url(std::string_view value) {
    auto url = parse_delivery_url(value);
    return url && url->target == "/" && !value.ends_with('/');
}

// --cluster URL[,URL…], --group, --board, --advertise and --cluster-ttl (SPEC §12).
result<void> apply_cluster(server_options& o, std::string_view flag, std::string_view value) {
    if (flag == "--cluster") {
        if (auto endpoints = parse_cluster_endpoints(value); !endpoints) return std::unexpected(endpoints.error());
        o.cluster = std::string(value);
        return {};
    }
    if (flag == "--cluster-ttl") {
        auto n = parse_count("--cluster-ttl", value);
        if (!n || *n < min_cluster_ttl_seconds || *n > max_cluster_ttl_seconds)
            return std::unexpected("--cluster-ttl expects seconds from 5 to 60, got '" + std::string(value) + "'");
        o.cluster_ttl_seconds = static_cast<std::uint32_t>(*n);
        return {};
    }
    if (flag == "--advertise") {
        if (!is_base_url(value))
            return std::unexpected("--advertise expects this board's base URL (http(s)://HOST:PORT), got '" + std::string(value) + "'");
        o.advertise = std::string(value);
        return {};
    }
    if (!is_cluster_name(value))
        return std::unexpected(std::string(flag) + " expects a name of a-z, 0-9, - and _ (at most 64), got '" + std::string(value) + "'");
    (flag == "--group" ? o.group : o.board) = std::string(value);
    return {};
}

// --deliveries-allow CIDR[,CIDR…] (SPEC §9): net/address_policy.hpp's list.
result<void> apply_deliveries_allow(server_options& o, std::string_view flag, std::string_view value) {
    auto list = net::parse_cidr_list(value);
    if (!list) return std::unexpected(std::string(flag) + " expects CIDR[,CIDR...]: " + list.error());
    o.deliveries_allow = std::move(*list);
    return {};
}

result<void> apply_changes_retention(server_options& o, std::string_view value) {
    auto n = parse_count("--changes-retention", value);
    if (!n || *n < 1 || *n > max_changes_retention_seconds)
        return std::unexpected("--changes-retention expects seconds from 1 to 31536000, got '" + std::string(value) + "'");
    o.changes_retention_seconds = *n;
    return {};
}

using apply_result = result<void>;

apply_result apply_listen(server_options& o, std::string_view flag, std::string_view value) {
    return parse_listen(flag, value, o.listen_host, o.listen_port);
}

apply_result apply_shards(server_options& o, std::string_view flag, std::string_view value) {
    if (value == "auto") {
        o.shards = 0;
        return {};
    }
    auto n = parse_count(flag, value);
    if (!n || *n < 1 || *n > max_shards)
        return std::unexpected("--shards expects auto or a number from 1 to " + std::to_string(max_shards) + ", got '" +
                               std::string(value) + "'");
    o.shards = static_cast<unsigned>(*n);
    return {};
}

apply_result apply_data(server_options& o, std::string_view, std::string_view value) {
    if (value.empty()) return std::unexpected("--data expects a directory");
    o.data_dir = std::string(value);
    return {};
}

apply_result apply_durability(server_options& o, std::string_view, std::string_view value) {
    if (value == "sync") o.durability = durability_mode::sync;
    else if (value == "none") o.durability = durability_mode::none;
    else return std::unexpected("--durability expects sync or none, got '" + std::string(value) + "'");
    return {};
}

apply_result apply_body_size(server_options& o, std::string_view flag, std::string_view value) {
    auto n = parse_size(value);
    if (!n) return std::unexpected(std::string(flag) + ": " + n.error().reason);
    if (flag == "--body-budget" && *n == 0) return std::unexpected("--body-budget must be above 0");
    if (flag == "--max-body" && *n > max_body_limit) return std::unexpected("--max-body must be at most 1G");
    static_assert(max_body_limit == 1ull << 30, "the message above says 1G");
    (flag == "--max-body" ? o.max_body_bytes : o.body_budget_bytes) = *n;
    return {};
}

apply_result apply_max_connections(server_options& o, std::string_view flag, std::string_view value) {
    auto n = parse_count(flag, value);
    static_assert(max_connections_limit == (1u << 22) - 1, "the message below says 4194303");
    if (!n || *n < 1 || *n > max_connections_limit)
        return std::unexpected("--max-connections expects a number from 1 to 4194303, got '" + std::string(value) + "'");
    o.max_connections = *n;
    return {};
}

apply_result apply_idle_timeout(server_options& o, std::string_view, std::string_view value) {
    std::string text(value);
    char* end = nullptr;
    double s = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(s > 0) || !std::isfinite(s) || s > 86400)
        return std::unexpected("--idle-timeout expects seconds above 0, got '" + text + "'");
    o.idle_timeout_seconds = s;
    return {};
}

apply_result apply_retention(server_options& o, std::string_view, std::string_view value) {
    return apply_changes_retention(o, value);
}

// --replication async|sync and --sync-timeout SECONDS (SPEC §12).
apply_result apply_replication(server_options& o, std::string_view flag, std::string_view value) {
    if (flag == "--sync-timeout") {
        auto n = parse_count(flag, value);
        static_assert(min_sync_timeout_seconds == 1 && max_sync_timeout_seconds == 60, "the message below says 1 to 60");
        if (!n || *n < min_sync_timeout_seconds || *n > max_sync_timeout_seconds)
            return std::unexpected("--sync-timeout expects seconds from 1 to 60, got '" + std::string(value) + "'");
        o.sync_timeout_seconds = static_cast<std::uint32_t>(*n);
        return {};
    }
    if (value == "async") o.replication = replication_mode::async;
    else if (value == "sync") o.replication = replication_mode::sync;
    else return std::unexpected("--replication expects async or sync, got '" + std::string(value) + "'");
    return {};
}

apply_result apply_tls(server_options& o, std::string_view flag, std::string_view value) {
    if (flag == "--tls-listen") {
        if (auto r = parse_listen(flag, value, o.tls_listen_host, o.tls_listen_port); !r) return r;
        o.tls_listen = std::string(value);
    } else if (flag == "--tls-cert") {
        o.tls_cert = std::string(value);
    } else {
        o.tls_key = std::string(value);
    }
    return {};
}

// Every flag that takes a value, and what applies it (a table: one line a flag).
struct flag_rule {
    std::string_view flag;
    apply_result (*apply)(server_options& o, std::string_view flag, std::string_view value);
};
constexpr flag_rule flag_rules[] = {
    {"--listen", apply_listen},
    {"--shards", apply_shards},
    {"--data", apply_data},
    {"--durability", apply_durability},
    {"--max-body", apply_body_size},
    {"--body-budget", apply_body_size},
    {"--max-connections", apply_max_connections},
    {"--idle-timeout", apply_idle_timeout},
    {"--changes-retention", apply_retention},
    {"--tls-listen", apply_tls},
    {"--tls-cert", apply_tls},
    {"--tls-key", apply_tls},
    {"--auth", apply_auth},
    {"--admin-token-file", apply_auth},
    {"--follow", apply_follow},
    {"--follow-token-file", apply_follow},
    {"--follow-ca-file", apply_follow},
    {"--follow-insecure", apply_follow},
    {"--deliveries-allow", apply_deliveries_allow},
    {"--cluster", apply_cluster},
    {"--group", apply_cluster},
    {"--board", apply_cluster},
    {"--advertise", apply_cluster},
    {"--cluster-ttl", apply_cluster},
    {"--replication", apply_replication},
    {"--sync-timeout", apply_replication},
};

// Whether the follower's primary is this machine: localhost, or an address in 127/8 or ::1. A
// name other than localhost may resolve anywhere, so it is not.
bool primary_is_loopback(const delivery_url& url) {
    if (url.host == "localhost") return true;
    auto numeric = net::resolve_numeric(url.host, url.port);
    return numeric && net::is_loopback(*numeric);
}

// --follow's companions (SPEC §10): a replication token always; http:// only to loopback unless
// --follow-insecure (the token would travel in clear); a CA file only for https://.
apply_result check_follow(const server_options& o) {
    if (!o.follow_url) {
        if (o.cluster.empty() && (o.follow_token_file || o.follow_ca_file || o.follow_insecure))
            return std::unexpected("--follow-token-file, --follow-ca-file and --follow-insecure need --follow or --cluster");
        return {};
    }
    if (!o.follow_token_file) return std::unexpected("--follow needs --follow-token-file (a replication token)");
    auto url = parse_delivery_url(*o.follow_url);
    PERCORE_ASSERT(url.has_value());  // apply_follow checked it
    if (o.follow_ca_file && !url->https) return std::unexpected("--follow-ca-file is only for an https:// primary");
    if (!url->https && !o.follow_insecure && !primary_is_loopback(*url))
        return std::unexpected("--follow " + *o.follow_url +
                               ": http:// to a primary that is not loopback would send the replication token in "
                               "clear; use https:// or add --follow-insecure");
    return {};
}

// --cluster's companions (SPEC §12): who this board is, and how the others reach it. With auth on,
// boards copy each other with a replication token, sent in clear over an http:// advertise URL that
// is not loopback unless --follow-insecure says so (as --follow's rule).
apply_result check_cluster(const server_options& o) {
    const bool named = !o.group.empty() || !o.board.empty() || !o.advertise.empty();
    if (o.cluster.empty()) {
        if (named) return std::unexpected("--group, --board and --advertise need --cluster");
        return {};
    }
    if (o.follow_url) return std::unexpected("--cluster and --follow exclude each other: the cluster chooses whom to follow");
    if (o.group.empty() || o.board.empty() || o.advertise.empty())
        return std::unexpected("--cluster needs --group, --board and --advertise");
    if (auth_enabled(o) && !o.follow_token_file)
        return std::unexpected("--cluster with auth on needs --follow-token-file (a replication token of the group)");
    auto url = parse_delivery_url(o.advertise);
    PERCORE_ASSERT(url.has_value());  // apply_cluster checked it
    if (auth_enabled(o) && !url->https && !o.follow_insecure && !primary_is_loopback(*url))
        return std::unexpected("--advertise " + o.advertise +
                               ": other boards would send the replication token to it in clear; use https:// or "
                               "add --follow-insecure");
    return {};
}

apply_result apply(server_options& o, std::string_view flag, std::string_view value) {
    for (const flag_rule& rule : flag_rules)
        if (rule.flag == flag) return rule.apply(o, flag, value);
    return std::unexpected("unknown option " + std::string(flag));
}
}  // namespace

bool auth_enabled(const server_options& o) {
    if (o.auth != auth_mode::automatic) return o.auth == auth_mode::on;
    if (!loopback_host(o.listen_host)) return true;
    if (o.tls_listen && !loopback_host(o.tls_listen_host)) return true;
    return false;
}

std::string admin_token_path(const server_options& o) {
    return o.admin_token_file ? *o.admin_token_file : o.data_dir + "/admin.token";
}

result<std::uint64_t> parse_size(std::string_view text) {
    if (text.empty()) return std::unexpected("expects a size like 512, 64K, 16M or 1G");
    std::uint64_t scale = 1;
    char last = text.back();
    if (last == 'K' || last == 'k') scale = 1ull << 10;
    else if (last == 'M' || last == 'm') scale = 1ull << 20;
    else if (last == 'G' || last == 'g') scale = 1ull << 30;
    std::string_view digits = scale == 1 ? text : text.substr(0, text.size() - 1);
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size())
        return std::unexpected("expects a size like 512, 64K, 16M or 1G, got '" + std::string(text) + "'");
    if (v > (~0ull) / scale) return std::unexpected("size '" + std::string(text) + "' is too large");
    return v * scale;
}

result<server_options> parse_serve_options(std::span<const char* const> args,
                                                               const env_lookup& env) {
    server_options o;
    for (const option_spec& s : specs) {
        const char* v = env(s.env);
        if (!v) continue;
        if (auto r = apply(o, s.flag, v); !r) return std::unexpected(std::string(s.env) + ": " + r.error().reason);
    }
    if (const char* v = env("PERCORE_SEGMENT_BYTES")) {
        auto n = parse_size(v);
        if (!n || *n < 4096 || *n > (2ull << 30))
            return std::unexpected(std::string("PERCORE_SEGMENT_BYTES: expects a size from 4K to 2G, got '") + v + "'");
        o.segment_bytes = *n;
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string_view a = args[i];
        if (!a.starts_with("--")) return std::unexpected("unexpected argument '" + std::string(a) + "'");
        std::string_view flag = a;
        std::string_view value;
        bool has_value = false;
        if (std::size_t eq = a.find('='); eq != std::string_view::npos) {
            flag = a.substr(0, eq);
            value = a.substr(eq + 1);
            has_value = true;
        }
        bool known = false;
        for (const option_spec& s : specs) known = known || flag == s.flag;
        if (!known) return std::unexpected("unknown option " + std::string(flag));
        if (!has_value && is_switch(flag)) {
            value = "on";
        } else if (!has_value) {
            if (i + 1 >= args.size()) return std::unexpected(std::string(flag) + " needs a value");
            value = args[++i];
        }
        if (auto r = apply(o, flag, value); !r) return std::unexpected(r.error());
    }
    if (o.tls_listen && (!o.tls_cert || !o.tls_key))
        return std::unexpected("--tls-listen needs --tls-cert and --tls-key");
    if (auto r = check_follow(o); !r) return std::unexpected(r.error());
    if (auto r = check_cluster(o); !r) return std::unexpected(r.error());
    return o;
}

std::string serve_usage() {
    return "usage: percore serve [options]\n"
           "  --listen HOST:PORT         address to serve HTTP on (default 127.0.0.1:8080; port 0 picks one)\n"
           "  --shards N|auto            shards, one pinned thread each (default auto: CPUs in the affinity mask)\n"
           "  --data DIR                 data directory, created if missing, locked while in use (default ./percore-data)\n"
           "  --durability sync|none     acknowledge writes after fdatasync (sync) or after the log write (none)\n"
           "  --max-body BYTES           largest request body; larger gets 413 (default 16M)\n"
           "  --body-budget BYTES        request bodies in flight per shard; beyond gets 503 (default 64M)\n"
           "  --max-connections N        connections per shard; beyond are refused with 503 (default 10000)\n"
           "  --idle-timeout SECONDS     idle keep-alive close; a request not in in time gets 408 (default 10)\n"
           "  --changes-retention SECONDS  how long the change feed keeps deletes (default 86400)\n"
           "  --tls-listen HOST:PORT     also serve HTTPS there (needs --tls-cert and --tls-key)\n"
           "  --tls-cert FILE, --tls-key FILE   PEM certificate chain and key\n"
           "  --auth auto|on|off         bearer tokens on every request but /_health (default auto: on unless\n"
           "                             every listen address is loopback)\n"
           "  --admin-token-file FILE    the server's admin token; made (mode 0600) when missing (default DATA/admin.token)\n"
           "  --follow URL               run as a read-only follower of the primary at URL (https://HOST:PORT)\n"
           "  --follow-token-file FILE   a replication token of the primary (POST /_replication/tokens)\n"
           "  --follow-ca-file FILE      CA certificates that verify an https:// primary (default: the system's)\n"
           "  --follow-insecure          allow --follow http:// to a primary that is not loopback (token in clear)\n"
           "  --cluster URL[,URL...]     etcd endpoints (http://HOST:PORT): automatic failover of one --group (SPEC 12)\n"
           "  --group NAME, --board NAME, --advertise URL   with --cluster: the replica group, this board's\n"
           "                             unique name, and the base URL other boards and HAProxy reach it at\n"
           "  --cluster-ttl SECONDS      the board's lease in etcd, 5 to 60 (default 6)\n"
           "  --replication async|sync   sync: acknowledge a write once a follower has it durable (default async)\n"
           "  --sync-timeout SECONDS     with sync, 503 a write no follower acknowledged in time, 1 to 60 (default 2)\n"
           "  --deliveries-allow CIDR[,CIDR...]  receiver ranges deliveries may reach although refused by\n"
           "                             default: loopback, private, link-local... (default none; SPEC 9)\n"
           "Every option can also be set as PERCORE_<NAME> (e.g. PERCORE_LISTEN); the command line wins.\n"
           "Sizes accept K, M and G suffixes (powers of 1024).\n";
}

}  // namespace percore::shards
