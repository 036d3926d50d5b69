// cluster limits: the bounds and times of the etcd client (SPEC §12; etcd_client.hpp), each with
// the number behind it. Read by the coordinator too: its lease and renewal follow the rule below.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "shards/base/limits.hpp"

namespace percore::shards {

// --cluster-ttl's default (SPEC §1, §12): the board's lease in etcd (base/limits.hpp bounds the option).
inline constexpr std::chrono::seconds default_cluster_ttl{default_cluster_ttl_seconds};
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

// --- the coordinator (coordinator.hpp) -------------------------------------------------------------

// The leader key is read this often: a key gone is seen within 250 ms plus one read (~1 ms), a
// small part of the TTL a failover waits for anyway, at 4 reads a second per board on etcd.
inline constexpr std::chrono::milliseconds leader_poll_interval{250};
// A board's status is published once a second (SPEC §12), and every 250 ms while its position
// moves: a follower catching up at a handover is seen within a quarter second.
inline constexpr std::chrono::milliseconds status_interval{1000};
inline constexpr std::chrono::milliseconds status_interval_moving{250};
// A primary stops acknowledging this long before its lease can first expire (sent + TTL): 1 s
// covers a write whose check passed just before the deadline until its answer is sent (a round, a
// few ms) and the rate difference of two boards' clocks over a TTL (ppm), with two orders to spare.
// The group is then without a primary for at least this long after a lost lease.
inline constexpr std::chrono::milliseconds fence_margin{1000};
static_assert(fence_margin < default_cluster_ttl - default_renew_interval,
              "a primary renewed on time never reaches its fence");
// Patroni's rule with the fence: a renewal that needs two tries still lands before the fence, at
// the default TTL and at the least --cluster-ttl accepts (renewed every whole third: 5 s -> 1 s).
static_assert(default_renew_interval + 2 * etcd_try_timeout <= default_cluster_ttl - fence_margin);
static_assert(std::chrono::seconds(min_cluster_ttl_seconds / renewals_per_ttl) + 2 * etcd_try_timeout <=
              std::chrono::seconds(min_cluster_ttl_seconds) - fence_margin);
// At a planned stop the primary waits at most this long for a follower to copy its last writes
// (SPEC §12 switchover: within 2 s), reading the statuses this often meanwhile.
inline constexpr std::chrono::milliseconds handover_wait{1500};
inline constexpr std::chrono::milliseconds handover_poll_interval{100};
// The main thread waits this long for the whole handover: the wait, the key's delete, the revoke.
inline constexpr std::chrono::milliseconds handover_bound{handover_wait + 2 * etcd_try_timeout};
// A follower races for an absent leader key only within this many changes of the last position the
// old primary published (SPEC §12's max_lag in async mode).
inline constexpr std::uint64_t max_takeover_lag = 1000;
// A sync set read back lists at most this many boards (sync_acks.hpp remembers 16).
inline constexpr std::size_t max_sync_set_boards = 16;
// A board's URL in a leader or status value (--advertise): a host name and a port fit far under it.
inline constexpr std::size_t max_board_url_bytes = 512;
// A leader or status value read back: tens of bytes; 4 KiB bounds the parse.
inline constexpr std::size_t max_cluster_value_bytes = 4096;

}  // namespace percore::shards
