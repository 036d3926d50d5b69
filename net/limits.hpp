// net limits: the single source of every bound and default of the HTTP layer (SPEC §4). Each has
// an answer when it is passed (docs/architecture.md, "Limits"); the command line overrides the
// ones marked --option, through connection_limits.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace percore::net {

// Request head (request_parser).
struct header_limits {
    std::size_t max_request_line_bytes = 8 * 1024;    // without its CRLF; 414 beyond
    std::size_t max_header_section_bytes = 16 * 1024;  // every byte after the request line; 431 beyond
    std::size_t max_header_fields = 100;               // 431 beyond
};

// Chunked bodies (chunked_decoder).
struct chunked_limits {
    std::uint64_t max_body_bytes = 16u << 20;     // decoded data; 413 beyond
    std::size_t max_chunk_line_bytes = 4 * 1024;   // size line with extensions, without CRLF; 400 beyond
    std::size_t max_trailer_bytes = 16 * 1024;     // whole trailer section; 400 beyond
};

// Targets (route).
inline constexpr std::size_t max_app_bytes = 64;
inline constexpr std::size_t max_key_bytes = 1024;
inline constexpr std::uint32_t max_list_limit = 1000;
inline constexpr std::uint32_t default_list_limit = 20;
// The change feed (/_changes/{app}, SPEC §8): limit 1..max_list_limit (default 100); timeout 0..300 s
// (default 30), heartbeat 1..300 s (default 30). A cursor is at most max_cursor_bytes (17 hex digits
// per shard plus a header: 256 shards fit).
inline constexpr std::uint32_t default_changes_limit = 100;
inline constexpr std::uint32_t default_changes_timeout_s = 30;
inline constexpr std::uint32_t max_changes_timeout_s = 300;
inline constexpr std::uint32_t default_changes_heartbeat_s = 30;
inline constexpr std::uint32_t max_changes_heartbeat_s = 300;
inline constexpr std::size_t max_cursor_bytes = 4608;
// /_health/replica?lag=N: at most 12 digits (a trillion changes), so N never overflows a count.
inline constexpr std::size_t max_health_lag_digits = 12;
// A token id in /_apps/{app}/tokens/{id}: 16 hex digits (64 random bits) as percore makes them;
// the route accepts up to 32 so a longer id is answered 404 by the catalog, not 400 by the route.
inline constexpr std::size_t max_token_id_bytes = 32;

// The most --max-body may be set to. A document is one log record, whose value length field and
// batch framing the store bounds (store/limits.hpp; shards/base/limits.hpp ties the two).
inline constexpr std::uint64_t max_body_limit = 1ull << 30;
// Connections one pool can name in an answer ticket (shards/base/write_ticket.hpp ties the bits).
inline constexpr std::size_t max_connections_limit = (1u << 22) - 1;  // the top index names no connection

// Connections (connection_pool, connection).
struct connection_limits {
    header_limits head;
    std::uint64_t max_body_bytes = 16u << 20;       // --max-body; 413 beyond
    std::uint64_t body_budget_bytes = 64u << 20;    // --body-budget: bodies in flight per pool; 503 beyond
    // One non-default turn class (an app: request_handler::admission) holds at most this share of
    // the body budget, and never less than one largest body (class_body_share_bytes); 503 beyond.
    // Half: a flooding app leaves at least half of the budget to the others, and one largest body
    // (16 MiB) still fits in a 32 MiB share. Class 0 (the default) is bounded by the budget only.
    std::uint32_t class_body_share_percent = 50;
    std::size_t max_connections = 10000;            // --max-connections: per pool; 503 and close beyond
    std::chrono::milliseconds idle_timeout{10000};  // --idle-timeout: idle close; 408 for a request not in in time
    // An idle connection (no byte of a next request, nothing unsent) is closed this long after the
    // idle timeout, not at it: answers advertise the idle timeout (Keep-Alive: timeout=N, whole
    // seconds), and clients that honour it retire a pooled socket at N, by their own clock, which
    // starts when the answer reached them, after the server's did. Closing at N exactly raced a
    // Node agent reusing its socket at 1.0-1.28 s with --idle-timeout 1 (1 ECONNRESET in 15).
    // 1 s: the field's granularity, and a round trip and a round's lateness many times over.
    std::chrono::milliseconds keep_alive_grace{1000};
    std::chrono::milliseconds linger_timeout{2000}; // reading and discarding after a closing answer
    std::size_t first_read_buffer_bytes = 4096;
    std::size_t keep_output_bytes = 256 * 1024;     // output capacity kept across requests
    // A client that sends requests but does not read the answers: past either bound the connection
    // stops reading (and parsing) until its unsent answers drain below them. 1 MiB holds 16 answers
    // of a 64 KiB document or ~10k small ones; 256 answers is 16 rounds of pipelining depth 16.
    std::size_t max_unsent_bytes = 1u << 20;
    std::size_t max_unsent_answers = 256;
    // A body slower than this on average, once the first idle_timeout has passed, is answered 408
    // (Apache's mod_reqtimeout MinRate): each byte buys 1/500 s, and the credit never reaches past
    // the idle timeout from now, so a fast start cannot pay for hours of trickling. 500 B/s is a
    // 56k modem's pace; four connections trickling 1 byte every 2 s held a shard's whole budget.
    std::uint64_t min_body_bytes_per_second = 500;
    // A streamed answer (connection_pool::stream_write: a change feed) is produced without end, so
    // unlike answers it cannot be held back by pausing reads: a stream_write that would leave more
    // than this unsent (beside what the socket's send buffer already took) cuts the connection off.
    // 256 KiB is the output capacity a connection keeps anyway (keep_output_bytes), holds a few
    // hundred changes of ~1 KiB for a reader that is briefly slow, and bounds 1,000 stalled
    // listeners of one shard to 256 MiB. A single write larger than this always cuts off.
    std::size_t max_stream_unsent_bytes = 256 * 1024;
};

// The body bytes one non-default turn class may hold (connection_limits::class_body_share_percent).
constexpr std::uint64_t class_body_share_bytes(const connection_limits& l) {
    const std::uint64_t share = l.body_budget_bytes / 100 * l.class_body_share_percent +
                                l.body_budget_bytes % 100 * l.class_body_share_percent / 100;
    return std::max(share, std::min(l.body_budget_bytes, l.max_body_bytes));
}

// Bytes the read buffer may grow to: a whole head at its limits, and room to spare.
constexpr std::size_t max_read_buffer_bytes(const header_limits& h) {
    return h.max_request_line_bytes + h.max_header_section_bytes + 4096;
}

// One sendfile() moves at most this much, so one large answer cannot hold the shard's loop for
// long (a 1 MiB sendfile over loopback takes ~0.5 ms here); measured ~10% fewer CPU seconds per
// 1 MiB GET than whole-value calls (docs/perf/README.md).
inline constexpr std::size_t max_sendfile_bytes = 256 * 1024;
// A Content-Length body not yet buffered starts in a buffer this large and doubles as it arrives
// (a 16 MiB body: 8 growths, 16 MiB copied in all, beside the 16 MiB received).
inline constexpr std::size_t body_first_buffer_bytes = 64 * 1024;
// iovecs in one gathered write.
inline constexpr std::size_t max_iovecs = 64;
// TLS: records read per turn before other connections get theirs; file bytes read per TLS write
// (no sendfile through TLS: this machine has no kTLS).
inline constexpr int max_tls_reads_per_turn = 16;
inline constexpr std::size_t tls_file_chunk_bytes = 64 * 1024;

// The outgoing HTTP client (response_parser, client_connection: SPEC §9 deliveries). A receiver is
// untrusted: whatever it answers, one exchange reads at most max_response_bytes and keeps at most
// max_head_bytes + max_kept_body_bytes (plus the fields' copies), then ends.
struct client_limits {
    // One response head (status line, header section and its empty line; each interim 1xx head
    // alike): the same 16 KiB a request's header section may have (header_limits); too_large beyond.
    std::size_t max_head_bytes = 16 * 1024;
    std::size_t max_header_fields = 100;           // as a request's (header_limits); too_large beyond
    // The body prefix kept for the caller: a receiver's error text ("last_error") is short; 64 KiB
    // holds any JSON error body with room. The rest is read, counted and discarded.
    std::size_t max_kept_body_bytes = 64 * 1024;
    // Every byte one exchange reads (interim heads, head, body, chunk framing): 1 MiB, the size of a
    // delivery batch's values (SPEC §9), so an echoing receiver still fits. Past it the exchange ends
    // too_large and the connection closes: a receiver that "answers 10 GB" costs 1 MiB of reading.
    std::uint64_t max_response_bytes = 1u << 20;
    std::size_t max_chunk_line_bytes = 4 * 1024;   // as chunked_limits; malformed beyond
    std::size_t max_trailer_bytes = 16 * 1024;     // as chunked_limits; malformed beyond
    std::size_t read_buffer_bytes = 16 * 1024;     // one read(): a TLS record's worth
};

// Name resolution for deliveries (net/resolver: one thread per process calling getaddrinfo).
// - max_pending_resolutions: names accepted and not yet answered (queued or being looked up);
//   past it a request fails at once with "resolver busy". A pending request costs ~400 bytes (its
//   host, callback and bookkeeping), so 1024 is ~0.4 MiB; it holds every receiver of a server
//   reconnecting at once to ~1,000 named receivers, while a DNS server that does not answer (each
//   lookup waits out resolv.conf's timeout, 5 s x 2 attempts by default) makes the backlog fail
//   fast instead of growing for hours.
// - max_host_bytes: a DNS name in text form is at most 253 characters (RFC 1035: 255 octets on
//   the wire, with the length bytes); a longer host cannot resolve and is refused at once.
// - resolver_stop_grace: stop() (process exit) waits this long for a lookup in flight, then
//   leaves the thread to die with the process: an answer is of no use at exit, and a dead DNS
//   server would otherwise hold exit for resolv.conf's timeouts (up to ~30 s). A lookup answered
//   from /etc/hosts or a local cache takes well under 1 ms.
inline constexpr std::size_t max_pending_resolutions = 1024;
inline constexpr std::size_t max_host_bytes = 253;
inline constexpr std::chrono::milliseconds resolver_stop_grace{200};

inline constexpr connection_limits default_connection_limits{};
static_assert(default_connection_limits.max_body_bytes <= max_body_limit);
static_assert(default_connection_limits.max_connections <= max_connections_limit);
static_assert(chunked_limits{}.max_body_bytes == default_connection_limits.max_body_bytes,
              "one default for the largest body, chunked or not");
static_assert(default_connection_limits.first_read_buffer_bytes <= max_read_buffer_bytes(header_limits{}));
static_assert(max_read_buffer_bytes(header_limits{}) >
                  header_limits{}.max_request_line_bytes + header_limits{}.max_header_section_bytes,
              "a head at its limits fits the read buffer, with room for the bytes that follow");
static_assert(default_connection_limits.max_unsent_bytes >= max_sendfile_bytes);
static_assert(default_connection_limits.min_body_bytes_per_second > 0);
static_assert(default_connection_limits.max_stream_unsent_bytes <= default_connection_limits.max_unsent_bytes,
              "a stalled stream holds no more than a client that does not read its answers");
static_assert(default_connection_limits.max_stream_unsent_bytes <= default_connection_limits.keep_output_bytes,
              "a stream within its bound never grows the output past what a connection keeps");
static_assert(default_connection_limits.class_body_share_percent > 0 &&
              default_connection_limits.class_body_share_percent <= 100);
static_assert(class_body_share_bytes(default_connection_limits) == default_connection_limits.body_budget_bytes / 2);
inline constexpr client_limits default_client_limits{};
static_assert(default_client_limits.max_head_bytes == header_limits{}.max_header_section_bytes,
              "a response head is bounded like a request's header section");
static_assert(default_client_limits.max_head_bytes + default_client_limits.max_kept_body_bytes <=
                  default_client_limits.max_response_bytes,
              "what an exchange keeps is a part of what it may read");
static_assert(default_client_limits.max_trailer_bytes < default_client_limits.max_response_bytes);
static_assert(default_client_limits.max_chunk_line_bytes == chunked_limits{}.max_chunk_line_bytes &&
              default_client_limits.max_trailer_bytes == chunked_limits{}.max_trailer_bytes,
              "chunk framing is bounded alike both ways");
static_assert(default_client_limits.read_buffer_bytes > 0 &&
              default_client_limits.read_buffer_bytes <= default_client_limits.max_response_bytes);

}  // namespace percore::net
