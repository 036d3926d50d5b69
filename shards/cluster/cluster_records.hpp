// cluster_records: what percore keeps in etcd for a replica group (SPEC §12), and their bytes.
//
//   /percore/{group}/leader          {"board":"b1","url":"https://10.0.0.1:8443"}
//       under the leader's lease; created only when absent. Its create revision is the epoch.
//   /percore/{group}/sync            {"epoch":12,"boards":["b2","b3"]}
//       --replication sync only, under the primary's lease, put about once a second: the boards
//       that acknowledged within the sync timeout; only they may take over (SPEC §12).
//   /percore/{group}/status/{board}  {"epoch":12,"position":1234,"role":"follower","url":"…"}
//       under the board's own lease, put about once a second: where the board's copy stands
//       (follower_status::position) in the feed of the epoch's primary, or a primary's own head.
//
// Values read back are input from another board: parsed with bounds, every field checked (a board
// name as --board allows, a base URL), and a value that fails is treated as absent (logged by the
// caller), never trusted.
//
// Contract: pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace percore::shards {

enum class status_role : std::uint8_t { primary, follower, fenced };

struct leader_value {
    std::string board;
    std::string url;
};

struct board_status {
    std::uint64_t epoch = 0;
    std::uint64_t position = 0;
    status_role role = status_role::fenced;
    std::string url;
};

struct sync_set {
    std::uint64_t epoch = 0;
    std::vector<std::string> boards;  // sorted, each a board name
};

std::string leader_key(std::string_view group);
std::string group_prefix(std::string_view group);  // every key of the group starts with it
std::string sync_key(std::string_view group);
std::string status_prefix(std::string_view group);  // every board's status key starts with it
std::string status_key(std::string_view group, std::string_view board);

std::string encode_leader(const leader_value& v);
std::optional<leader_value> decode_leader(std::string_view text);
std::string encode_sync_set(const sync_set& s);
std::optional<sync_set> decode_sync_set(std::string_view text);
std::string encode_status(const board_status& s);
std::optional<board_status> decode_status(std::string_view text);

// A group's or board's name (--group, --board): a-z, 0-9, '-' and '_', 1..64, not starting with '_'.
bool is_cluster_name(std::string_view name);

}  // namespace percore::shards
