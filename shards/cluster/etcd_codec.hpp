// etcd_codec: the JSON of etcd's v3 HTTP gateway (SPEC §12) — the request bodies percore sends and
// the answers it reads, for etcd_client.hpp. No I/O.
//
// The gateway's JSON is protobuf's (field names as in rpc.proto, snake_case): bytes (keys, values)
// are padded base64, int64s (revisions, lease IDs, TTLs) are JSON strings ("42"), and a field at
// its zero value is left out (no "succeeded" is false, no "TTL" is 0, no "kvs" is none).
//
// Contract
// - Pure functions, any thread. The request writers REQUIRE what the client checks before:
//   keys 1..max_etcd_key_bytes, values up to max_etcd_value_bytes, lease IDs and revisions > 0
//   (0 for "no lease" where it says so), TTLs in [min, max]_etcd_lease_ttl_seconds (limits.hpp).
// - An answer is input, never trusted: the parsers read a body of at most max_etcd_answer_bytes,
//   strict JSON (json_value.hpp), and check every field they use — its type, an int64 as a string
//   of digits (or a JSON number) in 0..2^63-1, base64 that decodes, the header present, the KV of a
//   transaction being the key asked for. Anything else is a problem ("etcd answer: …"), which the
//   client counts as an endpoint's failure (etcd_client.hpp: the next endpoint is tried).
// - parse_*_answer(body) take the body of a 200 answer. etcd_error_text(body) takes any other's
//   ({"error":…,"message":…,"code":N}) and returns its message, cut to max_etcd_error_text_bytes,
//   control characters replaced: the text goes to log lines and problems.
// - The streaming calls (keepalive) answer newline-delimited objects, each {"result":{…}} or
//   {"error":{…}}; the client sends one request message per call, and the gateway then answers
//   exactly one line and ends the body (docs/decisions.md): parse_keepalive_answer reads that one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shards/base/result.hpp"

namespace percore::shards {

// What every answer carries: the store's revision when it answered, and (filled by the client)
// which endpoint of its list answered.
struct etcd_header {
    std::int64_t revision = 0;
    std::size_t endpoint = 0;
};

struct etcd_kv {
    std::string key;
    std::string value;
    std::int64_t create_revision = 0;   // the revision that created this key (SPEC §12: the epoch)
    std::int64_t mod_revision = 0;      // the revision of its last change
    std::int64_t version = 0;           // changes since its creation (1 once created)
    std::int64_t lease = 0;             // the lease it lives under (0: none)
};

struct lease_granted {
    etcd_header header;
    std::int64_t id = 0;                // the lease's ID, > 0
    std::int64_t ttl_seconds = 0;       // the TTL etcd granted (it may raise a small one)
};

struct lease_kept {
    etcd_header header;
    std::int64_t ttl_seconds = 0;       // the TTL it was renewed to; 0: the lease is gone
};

// create_if_absent: succeeded when this call created the key; either way `current` is the key as
// it stands after the transaction (ours, or the one that was there).
struct create_answer {
    etcd_header header;
    bool succeeded = false;
    etcd_kv current;
};

struct range_answer {
    etcd_header header;
    std::vector<etcd_kv> kvs;           // in key order, at most max_etcd_range_kvs
    bool more = false;                  // etcd held more than were asked for
};

struct write_answer {
    etcd_header header;
};

struct delete_answer {
    etcd_header header;
    bool deleted = false;               // the key existed with the create revision asked for, and is gone
};

// ---- requests ----------------------------------------------------------------------------------

std::string grant_request(std::int64_t ttl_seconds);
std::string keepalive_request(std::int64_t lease);
std::string revoke_request(std::int64_t lease);
// A transaction: if KEY's create_revision is 0 (it does not exist), put KEY=VALUE under LEASE and
// read it back; else read it.
std::string create_if_absent_request(std::string_view key, std::string_view value, std::int64_t lease);
// lease 0: the key lives under no lease.
std::string put_request(std::string_view key, std::string_view value, std::int64_t lease);
// range_end empty: the key alone; else [key, range_end). At most max_etcd_range_kvs KVs.
std::string range_request(std::string_view key, std::string_view range_end);
// A transaction: if KEY's create_revision is still `create_revision`, delete it.
std::string delete_if_created_request(std::string_view key, std::int64_t create_revision);
// The range_end that makes [prefix, end) every key starting with `prefix`: the prefix with its last
// byte below 0xff increased and what follows it dropped. REQUIRES: prefix not empty and not all 0xff.
std::string prefix_range_end(std::string_view prefix);

// ---- answers -----------------------------------------------------------------------------------

result<lease_granted> parse_grant_answer(std::string_view body);
result<lease_kept> parse_keepalive_answer(std::string_view body);
result<write_answer> parse_write_answer(std::string_view body);      // put, revoke
result<range_answer> parse_range_answer(std::string_view body);
// `key`: the key the transaction was about (its KV must be that one).
result<create_answer> parse_create_answer(std::string_view body, std::string_view key);
result<delete_answer> parse_delete_answer(std::string_view body);
std::string etcd_error_text(std::string_view body);

}  // namespace percore::shards
