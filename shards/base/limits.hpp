// shards limits: where the layers' limits meet. The defaults of `percore serve` are the layers'
// own (net/limits.hpp, store/limits.hpp, shards/runtime/limits.hpp); this header ties the bounds
// that must agree across layers, so that changing one without the other fails to compile.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "net/limits.hpp"
#include "shards/runtime/limits.hpp"
#include "shards/base/write_ticket.hpp"
#include "store/limits.hpp"

namespace percore::shards {

// --shards: at most this many (256 pinned threads is past any board; the runtime could name 1024).
inline constexpr unsigned max_shards = 256;

// The change feed (SPEC §8, shards/feed/feed_waits.hpp). Waiting feeds (long polls and streams) one shard
// holds: each costs its connection (already bounded by --max-connections) and ~200 bytes here plus
// its cursor (17 bytes a shard); 10,000 is --max-connections' default, so the bound is there to
// name the memory (about 2-4 MiB a shard at most), not to refuse clients a shard would take anyway.
inline constexpr std::size_t max_feed_waits_per_shard = 10000;
// Changes a stream writes per page and round: ~200 bytes each, 100 is ~20 KiB, well inside the
// 256 KiB a stream may leave unsent (net/limits.hpp max_stream_unsent_bytes).
inline constexpr std::uint32_t max_feed_page_changes = 100;
static_assert(max_shards <= runtime::max_shards);

// Apps' control-plane objects (SPEC §7, review M1): catalog records live in memory on every shard
// that owns one and no quota counts them, so their number per app is bounded. 1,000 tokens is a
// token per device or service of a board's tenant with room to spare (~200 B a record: ~200 KiB);
// 64 deliveries is more receivers than a tenant has, and bounds what one app costs the engine's
// scan of its shard (each delivery: its record, a connection, a batch of up to 1 MiB in flight).
// Past either a creation is 507 {"error":"limit: tokens"} / {"error":"limit: deliveries"}.
inline constexpr std::uint64_t max_app_tokens = 1000;
inline constexpr std::uint64_t max_app_deliveries = 64;

// Deliveries (SPEC §9, shards/deliveries/delivery_record.hpp, deliveries_admin.hpp, delivery_batch.hpp).
// A receiver's URL: 2 KiB, what browsers and proxies reliably carry (RFC 9110 §4.1 asks for at
// least 8000 in a request line; a webhook URL is far shorter, and it is stored in every record).
inline constexpr std::size_t max_delivery_url_bytes = 2048;
// A PUT that updates a delivery whose record the sending engine changed meanwhile (an attempt, a
// cursor move: several a second against a failing receiver) is applied again on the newer record
// this many times before it is answered 409; the engine never changes the fields a PUT sets.
inline constexpr int max_delivery_update_retries = 3;
// A ca_file path (records written before ca_pem hold one; it is never read): PATH_MAX.
inline constexpr std::size_t max_delivery_ca_file_bytes = 4096;
// A delivery's ca_pem (SPEC §9, review M5): at most 64 KiB of PEM text in the request, checked at
// PUT and stored as its certificates alone, rewritten as PEM (crypto::ca_certificates_pem): at most
// 32 KiB of them, ~16-40 CA certificates (0.7-2 KiB of PEM each; a tenant pins one to three). The
// record must stay below store::file_value_min_bytes (read from memory: deliveries_admin.cpp), and
// the stored PEM is JSON-escaped there at most 33/28 (each "\n" becomes "\u000a": a 28-byte
// header line grows most), so 32 KiB of it is ~38 KiB of record, beside ~19 KiB of url and prefix.
inline constexpr std::size_t max_delivery_ca_pem_bytes = 64 * 1024;
inline constexpr std::size_t max_delivery_ca_stored_bytes = 32 * 1024;
// The body of a delivery's PUT: its ca_pem, url and prefix, each JSON-escaped at most 6x (a control
// character as \u00XX), and its other members; bounds the JSON parse (not json_value's 64 KiB,
// which the escaped PEM alone can pass).
inline constexpr std::size_t max_delivery_body_bytes =
    6 * (max_delivery_ca_pem_bytes + max_delivery_url_bytes + net::max_key_bytes) + 1024;
// Values per batch (SPEC §9: 1 MiB; a larger document travels alone).
inline constexpr std::size_t max_delivery_batch_value_bytes = 1u << 20;
// GET of a delivery counts the changes after its cursor by paging the feed, at most this many
// (then it answers the bound): pages of max_list_limit cost ~115 ns a key scanned
// (store/changes.hpp), so 10 pages over a 100,000-key app are ~12 ms of one admin request.
inline constexpr std::uint64_t max_delivery_lag_changes = 10 * net::max_list_limit;
// last_error is a short text: 200 bytes (a status line, an errno text, a TLS alert name).
inline constexpr std::size_t max_delivery_error_bytes = 200;
// After a delivered batch that was not full, a delivery waits this long before it reads the next
// (after a full one it reads at once: a backlog drains at full batches). Reading a batch scans the
// app's keys in every shard's snapshot (store/changes.hpp: no index by version yet, ~150 ns a key),
// so a delivery that read a batch per round (60 a second under 64 writers, measured) cost the writes
// of a 10,000-key app ~30% of the shard's CPU; at most 10 partial reads a second bound that to ~1.5%,
// and Kafka-style lingering costs a receiver at most 100 ms of latency (docs/perf/deliveries.md).
inline constexpr std::chrono::milliseconds delivery_linger{100};
// Changes in one batch besides its 1 MiB of values: 5,000 changes of small values is a body of
// ~750 KiB (under nginx's default 1 MiB client_max_body_size), which a receiver parses in
// milliseconds.
inline constexpr std::uint32_t max_delivery_batch_changes = 5000;

// Followers (SPEC §10). A replication page (GET /_changes/_all) carries at most this much of
// values, as a delivery batch does (a larger document travels alone), and at most
// max_replication_page_changes changes: 1,000 small changes are ~200 KiB of JSON.
inline constexpr std::size_t max_replication_page_value_bytes = max_delivery_batch_value_bytes;
inline constexpr std::uint32_t max_replication_page_changes = 1000;
// The page says how many changes wait after it ("pending", the follower's lag in changes),
// counted up to this bound: counting pages the feed again (~150 ns a key scanned outside the
// recent window), so 10,000 bounds a backlog's count to ~1.5 ms a page.
inline constexpr std::uint64_t max_replication_pending_count = 10000;
// A follower's long poll: the primary holds it this long when nothing changed (SPEC §8 allows
// 300); the exchange's own deadline is this plus max_replication_answer_seconds.
inline constexpr std::uint32_t replication_poll_seconds = 20;
inline constexpr std::uint32_t max_replication_answer_seconds = 30;
// After a failed exchange (primary down, 5xx, a write the follower's store refused) the follower
// tries again after this long, doubling to the maximum: a dead primary costs one connect a few
// seconds, a restarted one is followed again within max_follow_retry.
inline constexpr std::chrono::milliseconds min_follow_retry{250};
inline constexpr std::chrono::milliseconds max_follow_retry{4000};
// --cluster-ttl (SPEC §12): the board's lease in etcd. The default 6 s is renewed every third of
// it (2 s); Patroni's rule, with the fence's 1 s margin (cluster/limits.hpp): renewal + 2 x each
// try's 1 s bound <= TTL - margin (2 + 2 = 4 <= 5), so a renewal that meets one dead etcd member
// and then a live one still lands before the primary must fence. 5 s is the least that keeps it
// (1 + 2 = 3 <= 4; 3 s fenced a primary for a moment when one member of three stopped, seen in
// test_failover); 60 s the most (a primary lost that long is an outage, not a failover).
inline constexpr std::uint32_t default_cluster_ttl_seconds = 6;
inline constexpr std::uint32_t min_cluster_ttl_seconds = 5;
inline constexpr std::uint32_t max_cluster_ttl_seconds = 60;
// --sync-timeout (SPEC §12, --replication sync): how long a write waits for a follower's
// acknowledgement before it is answered 503. 2 s by default: a follower long-polling on a LAN acks a
// durable batch within one of its own syncs plus a round trip (~10-50 ms on an SD card), so 2 s is
// ~40 of them; at least 1 s (the feed's tick is 250 ms), at most 60 s (a client holding a write
// longer is better told).
inline constexpr std::uint32_t default_sync_timeout_seconds = 2;
inline constexpr std::uint32_t min_sync_timeout_seconds = 1;
inline constexpr std::uint32_t max_sync_timeout_seconds = 60;
// The follower trusts no page (SPEC §10, shards/follower/page_check.hpp). It reads at most this much
// of one answer, head and body (net::client_limits: a larger Content-Length is refused before the
// body), keeps the body whole and parses it: 64 MiB, the SPEC's bound. A page of small changes is ~200 KiB and one of the
// largest default body (--max-body 16M) ~21 MiB; a primary set to take bodies of ~48 MiB or more
// has documents no follower can copy (it stops on the page, docs/decisions.md).
inline constexpr std::size_t max_replication_page_bytes = 64u << 20;
static_assert((net::default_connection_limits.max_body_bytes + 2) / 3 * 4 + max_replication_page_value_bytes <
                  max_replication_page_bytes,
              "a page holding a document of the default --max-body, in base64, is read");
// A copied content type is what a request could have set: a field value of at most the request
// header section's bound (net::header_limits), so a client could have sent it.
inline constexpr std::size_t max_replication_content_type_bytes = net::header_limits{}.max_header_section_bytes;
static_assert(max_replication_content_type_bytes <= store::max_content_type_bytes, "it fits a log record");

// systemd's watchdog (SPEC §11, shards/server/service_notify.hpp). The main thread checks the shards'
// heartbeats this many times per WATCHDOG_USEC and sends WATCHDOG=1 at a check that finds every
// loop turned since the last ping: healthy loops answer within microseconds, so systemd hears from
// us every quarter of the timeout (sd_watchdog_enabled(3) asks for at least every half). A round
// of up to 3/4 of the timeout costs no restart (the next check after it pings), and a loop stuck
// is restarted 1 to 1 1/4 timeouts after it stopped: with WatchdogSec=30s, rounds of up to 22.5 s
// pass, and a loop stuck since 30-37.5 s is restarted.
inline constexpr unsigned watchdog_checks_per_timeout = 4;
// ... but never more often than this: a WatchdogSec= under 40 ms is no real setting, and 10 ms
// keeps a main thread given one from spinning (each check posts one handler to every shard).
inline constexpr std::chrono::milliseconds min_watchdog_check_interval{10};
// The test hook's stall (PERCORE_TEST_STALL_SHARD, service_notify.hpp): 2 s is five timeouts of
// the 400 ms watchdog the integration test sets, and ends well inside SPEC §1's 5 s stop.
inline constexpr std::chrono::milliseconds test_stall_duration{2000};

// Backups (SPEC §11, shards/backup/backup_stream.hpp). A backup writes at most this much of the archive
// per round, with at most one file read (pread): 128 KiB is ~30 µs of copying from the page cache,
// so a round of the shard is never held long, and writing only when the stream has room for a whole
// piece (half of max_stream_unsent_bytes) means it is never cut off.
inline constexpr std::size_t backup_chunk_bytes = 128 * 1024;
static_assert(2 * backup_chunk_bytes <= net::default_connection_limits.max_stream_unsent_bytes,
              "a backup piece fits the room a stream has once its client read the piece before");
// A backup's share of its shard's thread: after each piece it waits backup_pace_factor times as
// long as the piece took (reading it and handing it to the connection) before the next one, so it
// takes at most 1 / (1 + factor) of the shard, whatever else the shard does: 9 is 10%. Unpaced, a
// backup streamed ~450-500 MiB/s and 64 writing connections kept a third of their writes/s (the
// shard's thread ~90% busy); paced, they keep all of it and the backup streams ~70-100 MiB/s
// (docs/perf/README.md, "Backup (issue 18)").
inline constexpr unsigned backup_pace_factor = 9;
// Backups one shard streams at once: each holds a descriptor per captured file, and keeps the disk
// space of the segments compaction deletes meanwhile until it ends; two let a scheduled backup and
// an operator's overlap. Past it: 503.
inline constexpr std::size_t max_backups_per_shard = 2;

// --max-body: a body becomes one log record's value.
inline constexpr std::uint64_t max_body_limit = net::max_body_limit;
static_assert(max_body_limit <= store::max_value_bytes, "every accepted body fits one record");

// --max-connections: every connection slot must fit an answer ticket's index field.
inline constexpr std::uint64_t max_connections_limit = net::max_connections_limit;
static_assert(max_connections_limit < (std::uint64_t{1} << write_ticket::index_bits),
              "the top index is left to the server's own background writes (write_ticket::background_index)");

// Defaults: the layers' own.
inline constexpr std::uint64_t default_max_body_bytes = net::default_connection_limits.max_body_bytes;
inline constexpr std::uint64_t default_body_budget_bytes = net::default_connection_limits.body_budget_bytes;
inline constexpr std::uint64_t default_max_connections = net::default_connection_limits.max_connections;
inline constexpr double default_idle_timeout_seconds =
    static_cast<double>(net::default_connection_limits.idle_timeout.count()) / 1000.0;
inline constexpr std::uint64_t default_changes_retention_seconds = store::default_changes_retention_seconds;
inline constexpr std::uint64_t max_changes_retention_seconds = 365ull * 86400;  // a year; the message says 31536000
static_assert(max_changes_retention_seconds == 31536000);
inline constexpr std::uint64_t default_segment_bytes = store::default_segment_target_bytes;
static_assert(default_body_budget_bytes >= default_max_body_bytes, "one largest body fits the budget");

}  // namespace percore::shards
