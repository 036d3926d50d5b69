// http_client_connection: one client TCP connection of a worker: connects (non-blocking), writes
// requests on schedule, reads and checks the answers, reconnects.
//
// Contract
// - Used only on its worker's thread; registered in the worker's epoll set with itself as
//   data.ptr. pump() sends what is due (and connects when needed); on_event() handles readiness.
// - Buffers (request bytes, answer bytes, in-flight ring) are sized once in the constructor, for
//   the largest request the options can make (request_bytes_bound(): --path, or the key and body
//   grown by base64 for --style etcd, and the --header fields): nothing is allocated per request.
// - Requests are spelled per --style (see options.hpp); with --path every request is GET PATH.
//   Every request, of every style, carries the --header fields (options::header_block) verbatim.
// - Answers are matched to requests in order (HTTP/1.1 pipelining). Each answer is counted by
//   status class and judged against what the request expects (see answer_head in the .cpp);
//   wrong answers are counted, never fatal. `Connection: close` from the server, close mode, or a
//   framing problem closes the socket; the next pump() reconnects.
// - With a rate, each send has an intended time (the schedule); latency runs from it, so a slow
//   server cannot hide its delay by slowing the generator down (no coordinated omission).
#pragma once

#include "etag_table.hpp"
#include "options.hpp"
#include "response_parser.hpp"
#include "stats.hpp"

#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

namespace percore::load {

// Request line and fixed headers (not counting host, --header fields, app/key, --path), If-Match, and the JSON
// punctuation of an etcd body.
inline constexpr std::size_t max_request_head_bytes = 1024;
inline constexpr std::size_t max_key_digits = 20;             // a uint64 key in decimal
inline constexpr std::size_t read_chunk_bytes = 64 * 1024;
inline constexpr std::int64_t connect_retry_ns = 10'000'000;  // after a failed connect

std::int64_t now_ns();

// The most bytes one request (head and body) can take with these options.
std::size_t request_bytes_bound(const options& o);

// What a phase asks of every connection.
struct phase_plan {
    bool prepare = false;                          // PUT keys 0..keys-1 once each, no rate
    std::atomic<std::uint64_t>* next_key = nullptr;  // shared counter for prepare
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;                       // no new request from here on
};

struct worker_context {
    const options& opts;
    const phase_plan& plan;
    stats& counters;
    etag_table& etags;
    std::string_view body;                         // opts.size bytes
    std::string_view body_base64;                  // base64 of body (for --style etcd)
    int epoll_fd;
};

class http_client_connection {
public:
    http_client_connection(worker_context& ctx, std::uint64_t seed, std::int64_t interval_ns,
                           std::int64_t first_due_ns);
    ~http_client_connection();
    http_client_connection(const http_client_connection&) = delete;
    http_client_connection& operator=(const http_client_connection&) = delete;

    void pump(std::int64_t now, bool stopping);
    void on_event(std::uint32_t events, bool stopping);
    // When pump() next has something to do (rate schedule, connect retry); INT64_MAX if nothing.
    std::int64_t next_wakeup() const;
    std::size_t in_flight() const { return pending_count_; }
    // Ends the connection; what is still in flight counts as unanswered, and with a rate the sends
    // that were due before plan.end_ns but never made count as due_unsent.
    void finish();

private:
    enum class state { disconnected, connecting, open };
    enum class kind : std::uint8_t { get, put };
    struct pending {
        std::uint64_t key;
        std::int64_t intended_ns;
        kind what;
    };

    bool want_send(std::int64_t now, bool stopping) const;
    void start_connect(std::int64_t now);
    bool queue_request(std::int64_t now);   // false when there is no request to make
    char* write_percore(char* p, kind what, std::uint64_t key) const;
    char* write_etcd(char* p, kind what, std::uint64_t key) const;
    char* write_path(char* p) const;
    void flush();
    void on_readable();
    void process_input();
    bool answer_head(const response_head& head);   // false: framing broken, close
    void complete_answer();
    void close_socket(bool broken);
    void update_interest();

    worker_context& ctx_;
    int fd_ = -1;
    state state_ = state::disconnected;
    std::uint64_t rng_;
    std::int64_t interval_ns_;
    std::int64_t next_due_ns_;
    std::int64_t retry_at_ns_ = 0;
    bool want_out_ = false;
    bool close_after_answer_ = false;
    std::uint32_t sent_on_socket_ = 0;

    std::vector<pending> ring_;
    std::size_t pending_head_ = 0;
    std::size_t pending_count_ = 0;

    std::vector<char> out_;
    std::size_t out_begin_ = 0, out_end_ = 0;
    std::vector<char> in_;
    std::size_t in_begin_ = 0, in_end_ = 0;

    bool in_body_ = false;
    std::uint64_t body_left_ = 0;
    bool answer_wrong_ = false;
    int answer_status_ = 0;
};

}  // namespace percore::load
