// options: `percore serve` options from the command line and PERCORE_<NAME> variables (SPEC §1).
//
// The command line wins over the environment. Errors are values: one clear line for stderr,
// and the caller exits 2. No I/O here besides reading the environment through `getenv`.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "net/address_policy.hpp"
#include "shards/base/result.hpp"
#include "shards/base/limits.hpp"

namespace percore::shards {

enum class durability_mode : std::uint8_t { sync, none };
enum class auth_mode : std::uint8_t { automatic, on, off };
// --replication (SPEC §12): async acknowledges a durable write at once; sync once a follower holds
// it durable too.
enum class replication_mode : std::uint8_t { async, sync };

struct server_options {
    std::string listen_host = "127.0.0.1";
    std::uint16_t listen_port = 8080;
    unsigned shards = 0;  // 0: auto, one per CPU of the process affinity mask
    std::string data_dir = "./percore-data";
    durability_mode durability = durability_mode::sync;
    std::uint64_t max_body_bytes = default_max_body_bytes;
    std::uint64_t body_budget_bytes = default_body_budget_bytes;
    std::uint64_t max_connections = default_max_connections;
    double idle_timeout_seconds = default_idle_timeout_seconds;
    std::optional<std::string> tls_listen;  // as given ([::1]:8443 keeps its brackets: the ready line shows it so)
    std::string tls_listen_host;            // its host, brackets removed (::1)
    std::uint16_t tls_listen_port = 0;
    std::optional<std::string> tls_cert;
    std::optional<std::string> tls_key;
    auth_mode auth = auth_mode::automatic;
    std::optional<std::string> admin_token_file;  // default: DATA/admin.token
    std::uint64_t changes_retention_seconds = default_changes_retention_seconds;  // SPEC §8
    // --follow URL, --follow-token-file FILE (SPEC §10): a read-only follower of the primary at URL,
    // copying with a replication token (SPEC §7).
    // follow_token is the file's contents, read by main (options do no I/O).
    std::optional<std::string> follow_url;
    std::optional<std::string> follow_token_file;
    std::string follow_token;
    // --follow-ca-file FILE: CA certificates for an https:// primary (default: the system's);
    // --follow-insecure: http:// to a primary that is not loopback is allowed (SPEC §10).
    std::optional<std::string> follow_ca_file;
    std::string follow_ca_pem;  // its contents, read by main
    bool follow_insecure = false;
    // --cluster URL[,URL…] (SPEC §12): the etcd endpoints through which the boards of `group`
    // elect their primary; `board` names this one (unique in the group) and `advertise` is the base
    // URL the other boards and HAProxy reach it at. Empty: no automatic failover.
    std::string cluster;  // as given; checked by parse_cluster_endpoints (cluster/etcd_client.hpp)
    std::string group;
    std::string board;
    std::string advertise;
    std::uint32_t cluster_ttl_seconds = default_cluster_ttl_seconds;
    // --replication async|sync, --sync-timeout SECONDS (SPEC §12): with sync, a write is answered
    // once a follower acknowledged it durable, or 503 after sync_timeout_seconds.
    replication_mode replication = replication_mode::async;
    std::uint32_t sync_timeout_seconds = default_sync_timeout_seconds;
    // --deliveries-allow CIDR[,CIDR…] (SPEC §9): receiver ranges admitted although refused by
    // default (net/address_policy.hpp); none by default.
    net::cidr_list deliveries_allow;
    // Tuning knob without a flag (PERCORE_SEGMENT_BYTES): where each shard's log starts a new segment.
    std::uint64_t segment_bytes = default_segment_bytes;
};

using env_lookup = std::function<const char*(const char* name)>;

result<server_options> parse_serve_options(std::span<const char* const> args,
                                                               const env_lookup& env);

// --auth auto: on unless every address served is loopback (127.0.0.0/8, ::1, localhost).
bool auth_enabled(const server_options& o);
std::string admin_token_path(const server_options& o);

// "16M" -> 16777216; K, M, G are powers of 1024.
result<std::uint64_t> parse_size(std::string_view text);

std::string serve_usage();

}  // namespace percore::shards
