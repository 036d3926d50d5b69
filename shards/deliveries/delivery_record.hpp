// delivery_record: one delivery's durable state (SPEC §9) — where its batches go, its secrets,
// where it stands in the app's change feed and how its last attempts went — and the JSON it is
// stored as in the catalog (catalog.hpp: "_percore\0delivery/{app}/{name}").
//
// Contract
// - Pure functions and values: any thread. make_delivery_secrets() reads getrandom (the random
//   source of tokens and the admin token, crypto::random_bytes).
// - parse_delivery_url() accepts only what a delivery can be sent to: scheme http or https (any
//   case), a host (a DNS name of [A-Za-z0-9.-] or an IP literal in brackets), an optional numeric
//   port 1..65535 (default 80 / 443), and a target (path and query, "/" when empty). Userinfo,
//   fragments, percent-encoded or non-ASCII hosts, spaces and control characters are refused with
//   a reason for a 400. At most max_delivery_url_bytes.
// - decode_delivery_record() takes back exactly what encode_delivery_record() wrote (round trip),
//   and what versions before ca_pem wrote (ca_file and no ca_pem: ca_file is written back only when
//   it is set), and refuses a record with a missing or ill-typed field, an invalid url, secrets of the wrong
//   form or an unknown state: a catalog record percore did not write is not guessed at.
// - The record holds secrets (signing_secret, seal_key): nothing but the 201 of its creation and the
//   sending engine may show or use them (never GET, a log line or a metric).
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include "shards/base/result.hpp"

namespace percore::shards {

enum class delivery_state : std::uint8_t { active, retrying, failed, disabled };
std::string_view state_name(delivery_state s);
std::optional<delivery_state> parse_delivery_state(std::string_view s);

struct delivery_url {
    bool https = false;
    std::string host;          // as written (brackets kept for an IP literal)
    std::uint16_t port = 80;   // 80 or 443 when the URL names none
    std::string target;        // path and query, at least "/"
};

result<delivery_url> parse_delivery_url(std::string_view url);

// "whsec_" + base64 of 32 random bytes (Standard Webhooks), and the seal key's 32 bytes.
inline constexpr std::string_view signing_secret_prefix = "whsec_";
inline constexpr std::size_t signing_secret_bytes = 32;
inline constexpr std::size_t seal_key_bytes = 32;

struct delivery_secrets {
    std::string signing_secret;                      // whsec_…
    std::array<std::uint8_t, seal_key_bytes> seal_key{};
};

delivery_secrets make_delivery_secrets();
// "msg_" + 32 hex digits (128 random bits): a batch's webhook-id, kept across its retries.
std::string make_batch_id();
// The HMAC key a signing secret stands for (the base64 after "whsec_"), or nullopt.
std::optional<std::string> signing_key_of(std::string_view signing_secret);

struct delivery_record {
    std::string url;            // valid for parse_delivery_url
    std::string prefix;         // keys of the app it sends (empty: all)
    bool seal = false;
    bool seal_key_shown = false;  // the 201 of its creation showed seal_key (it was created sealed)
    std::string ca_pem;         // https only: the CA certificates trusted, as PEM alone; empty: the system's
    std::string ca_file;        // a record written before ca_pem: a path, never read (such a delivery
                                // fails its tries until a PUT gives ca_pem: docs/decisions.md)
    delivery_secrets secrets;
    std::string cursor;         // feed cursor text: the changes after it are still to be sent
    std::int64_t cursor_moved_unix_ms = 0;  // when the cursor was set or last moved
    delivery_state state = delivery_state::active;
    std::uint32_t attempts = 0;           // tries of the batch in flight
    std::optional<int> last_status;       // the receiver's last HTTP status
    std::optional<std::string> last_error;
    std::int64_t next_attempt_unix_ms = 0;
    std::string batch_id;       // the webhook-id of the batch in flight; empty: none
    std::int64_t created_unix_ms = 0;
    std::int64_t updated_unix_ms = 0;
};

std::string encode_delivery_record(const delivery_record& d);
result<delivery_record> decode_delivery_record(std::string_view value);

}  // namespace percore::shards
