#include "shards/cluster/cluster_records.hpp"

#include "shards/base/board_role.hpp"
#include "shards/base/json_text.hpp"
#include "shards/base/json_value.hpp"
#include "shards/cluster/limits.hpp"

namespace percore::shards {

namespace {

const std::string* string_field(const json_value& object, std::string_view name) {
    const json_value* v = object.find(name);
    return v && v->what == json_value::kind::string ? &v->text : nullptr;
}

// http(s)://HOST:PORT with no path, at most max_board_url_bytes: what --advertise accepts.
bool is_board_url(std::string_view url) {
    if (url.empty() || url.size() > max_board_url_bytes) return false;
    const std::size_t scheme = url.starts_with("https://") ? 8 : url.starts_with("http://") ? 7 : 0;
    if (scheme == 0) return false;
    std::string_view rest = url.substr(scheme);
    const std::size_t colon = rest.rfind(':');
    if (colon == 0 || colon == std::string_view::npos || colon + 1 == rest.size()) return false;
    for (char c : rest.substr(colon + 1))
        if (c < '0' || c > '9') return false;
    for (char c : rest.substr(0, colon))
        if (c <= ' ' || c == '/' || c == '?' || c == '#' || c == '@' || c == '"' || c == '\\' || c == 0x7f) return false;
    return true;
}

}  // namespace

bool is_cluster_name(std::string_view name) { return is_board_name(name); }

std::string group_prefix(std::string_view group) { return "/percore/" + std::string(group) + "/"; }
std::string leader_key(std::string_view group) { return group_prefix(group) + "leader"; }
std::string sync_key(std::string_view group) { return group_prefix(group) + "sync"; }
std::string status_prefix(std::string_view group) { return "/percore/" + std::string(group) + "/status/"; }
std::string status_key(std::string_view group, std::string_view board) {
    return status_prefix(group) + std::string(board);
}

std::string encode_leader(const leader_value& v) {
    std::string out = "{\"board\":";
    append_json_string(out, v.board);
    out.append(",\"url\":");
    append_json_string(out, v.url);
    out.push_back('}');
    return out;
}

std::optional<leader_value> decode_leader(std::string_view text) {
    auto parsed = parse_json(text, max_cluster_value_bytes);
    if (!parsed || parsed->what != json_value::kind::object) return std::nullopt;
    const std::string* board = string_field(*parsed, "board");
    const std::string* url = string_field(*parsed, "url");
    if (!board || !url || !is_cluster_name(*board) || !is_board_url(*url)) return std::nullopt;
    return leader_value{*board, *url};
}

std::string encode_sync_set(const sync_set& s) {
    std::string out = "{\"epoch\":";
    append_uint(out, s.epoch);
    out.append(",\"boards\":[");
    for (std::size_t i = 0; i < s.boards.size(); ++i) {
        if (i) out.push_back(',');
        append_json_string(out, s.boards[i]);
    }
    out.append("]}");
    return out;
}

std::optional<sync_set> decode_sync_set(std::string_view text) {
    auto parsed = parse_json(text, max_cluster_value_bytes);
    if (!parsed || parsed->what != json_value::kind::object) return std::nullopt;
    const json_value* epoch = parsed->find("epoch");
    const json_value* boards = parsed->find("boards");
    auto e = epoch ? epoch->as_count() : std::nullopt;
    if (!e || !boards || boards->what != json_value::kind::array || boards->items.size() > max_sync_set_boards)
        return std::nullopt;
    sync_set out{*e, {}};
    for (const json_value& b : boards->items) {
        if (b.what != json_value::kind::string || !is_cluster_name(b.text)) return std::nullopt;
        out.boards.push_back(b.text);
    }
    return out;
}

std::string encode_status(const board_status& s) {
    std::string out = "{\"epoch\":";
    append_uint(out, s.epoch);
    out.append(",\"position\":");
    append_uint(out, s.position);
    out.append(s.role == status_role::primary    ? ",\"role\":\"primary\""
               : s.role == status_role::follower ? ",\"role\":\"follower\""
                                                 : ",\"role\":\"fenced\"");
    out.append(",\"url\":");
    append_json_string(out, s.url);
    out.push_back('}');
    return out;
}

std::optional<board_status> decode_status(std::string_view text) {
    auto parsed = parse_json(text, max_cluster_value_bytes);
    if (!parsed || parsed->what != json_value::kind::object) return std::nullopt;
    const json_value* epoch = parsed->find("epoch");
    const json_value* position = parsed->find("position");
    const std::string* role = string_field(*parsed, "role");
    const std::string* url = string_field(*parsed, "url");
    auto e = epoch ? epoch->as_count() : std::nullopt;
    auto p = position ? position->as_count() : std::nullopt;
    if (!e || !p || !role || !url || !is_board_url(*url)) return std::nullopt;
    board_status s{*e, *p, status_role::fenced, *url};
    if (*role == "primary") s.role = status_role::primary;
    else if (*role == "follower") s.role = status_role::follower;
    else if (*role != "fenced") return std::nullopt;
    return s;
}

}  // namespace percore::shards
