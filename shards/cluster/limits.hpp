// cluster limits: the bounds and times of the etcd client (SPEC §12; etcd_client.hpp), each with
// the number behind it. Read by the coordinator too: its lease and renewal follow the rule below.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace percore::shards {

// --cluster-ttl's default (SPEC §1, §12): the board's lease in etcd, in seconds.
inline constexpr std::chrono::seconds default_cluster_ttl{6};
// The lease is renewed about every third of its TTL (SPEC §12): 2 s with the default.
inline constexpr unsigned renewals_per_ttl = 3;
inline constexpr std::chrono::seconds default_renew_interval{default_cluster_ttl / renewals_per_ttl};
// One try of one exchange with one etcd member (connect, request, whole answer): 1 s. A member on
// loopback or a LAN answers a lease or key request in ~1 ms, fsync included (~10 ms on a slow disk);
// 1 s is two orders above that and still leaves room for a second try on another member inside
// one renewal. Patroni's rule (loop_wait + 2 × retry_timeout <= ttl) ties it to the lease: a board
// that sends a renewal just before its interval ends, and needs a try on a dead member and a try on
// a live one, still renews before the TTL runs out: 2 s + 2 × 1 s = 4 s <= 6 s, with 2 s of margin
// for the fencing of SPEC §12 (a primary stops acknowledging before its lease can have expired).
inline constexpr std::chrono::milliseconds etcd_try_timeout{1000};
static_assert(default_renew_interval + 2 * etcd_try_timeout <= default_cluster_ttl,
              "Patroni's rule: renewal interval + 2 x try timeout <= TTL");
// The shortest TTL etcd grants with its default timing (election 1 s: minimum TTL =
// ceil(1.5 × election timeout) = 2 s; a smaller one is raised to it); --cluster-ttl below it is
// refused by the options, and the rule above holds for 3 s and up only with a shorter try timeout.
inline constexpr std::int64_t min_etcd_lease_ttl_seconds = 2;
// A TTL this long is no failover any more (an hour without a leader): refused as a mistake.
inline constexpr std::int64_t max_etcd_lease_ttl_seconds = 3600;

// After every endpoint failed once in a call, the next round of tries waits this long: a cluster
// whose members all refuse connections at once costs ~10 connects a second per endpoint inside a
// call's deadline, not a busy loop.
inline constexpr std::chrono::milliseconds etcd_round_pause{100};

// --cluster: an etcd cluster has 3, 5 or 7 members (odd, for a quorum); 9 bounds the list with
// room for a member being replaced.
inline constexpr std::size_t max_etcd_endpoints = 9;

// What percore writes in etcd (SPEC §12): a key is /percore/{group}/leader or …/status/{board}
// (a group and a board name are short); a value is a board's name and URL, or its copy position:
// well under 1 KiB. 1 KiB keys and 16 KiB values bound a request with room (etcd itself takes
// 1.5 MiB requests).
inline constexpr std::size_t max_etcd_key_bytes = 1024;
inline constexpr std::size_t max_etcd_value_bytes = 16 * 1024;

// An answer's body: read at most this much, kept whole and parsed. The largest answer percore asks
// for is a range over a group's status keys: max_etcd_range_kvs KVs of ~300 bytes of JSON each
// (key and value in base64, four revisions as strings) ~ 77 KiB; 256 KiB holds it with room. A
// larger answer ends the try too_large (it is not read): a hostile or confused endpoint costs
// 256 KiB of reading, then the next endpoint is tried.
inline constexpr std::size_t max_etcd_answer_bytes = 256 * 1024;
// A range asks etcd for at most this many KVs ("limit"; "more" says there were others): a group
// has a few boards, each with one status key; 256 is far beyond any group.
inline constexpr std::int64_t max_etcd_range_kvs = 256;
// etcd's error messages ("etcdserver: requested lease not found") are short; a longer one is cut
// here before it reaches a log line or a problem's reason.
inline constexpr std::size_t max_etcd_error_text_bytes = 200;

}  // namespace percore::shards
