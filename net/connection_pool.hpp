// connection_pool: every HTTP/1.1 connection one shard accepted, and the loop that reads requests,
// hands them to a request_handler and writes the answers back.
//
// Contract
// - One pool per shard, used only on that shard's thread (its io_context runs single-threaded).
// - Reading: edge-triggered readiness through Asio's reactor; a read that returns less than it
//   asked for means the socket is drained, so the pool waits for readiness instead of reading
//   again (no EAGAIN round trip per request). Every complete request found in one read is handled
//   before the answers leave together in one gathered write (pipelining).
// - The handler answers at once, or takes the request's answer_ticket and returns pending; it must
//   then call complete() exactly once, later, on this thread. While a connection has a pending
//   answer it parses nothing further (requests on one connection take effect in order).
// - Memory: connection objects, their read buffers and output buffers are reused; the steady
//   state of keep-alive requests allocates nothing in the pool.
// - Time: set_now() once per loop round; every deadline is computed from that one clock read.
// - Limits are named in connection_limits; every breach has an HTTP status (SPEC §4).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "net/request_parser.hpp"
#include "net/response.hpp"

namespace percore::crypto {
class tls_server;
}

namespace percore::net {

using clock_type = std::chrono::steady_clock;

struct connection_limits {
    header_limits head;
    std::uint64_t max_body_bytes = 16u << 20;       // 413 beyond
    std::uint64_t body_budget_bytes = 64u << 20;    // request bodies in flight per pool; 503 beyond
    std::size_t max_connections = 10000;            // per pool; 503 and close beyond
    std::chrono::milliseconds idle_timeout{10000};  // idle close; 408 for a request not in in time
    std::chrono::milliseconds linger_timeout{2000}; // reading and discarding after a closing answer
    std::size_t first_read_buffer_bytes = 4096;
    std::size_t keep_output_bytes = 256 * 1024;     // output capacity kept across requests
};

// Names one connection's pending answer; stale tickets (connection gone) are ignored.
struct answer_ticket {
    std::uint32_t index = 0;
    std::uint32_t generation = 0;
};

// An answer that needs no body beyond an optional JSON error: what a write produces.
struct simple_answer {
    int status = 500;
    bool has_etag = false;
    std::uint64_t etag = 0;
    const char* error = nullptr;  // when set: {"error":"..."} body
};

class request {
public:
    const request_head& head;
    std::string_view body() const { return body_; }
    // The body as an owned buffer (moved out when the pool already owns one, else copied).
    std::unique_ptr<char[]> take_body();

private:
    friend struct connection;
    request(const request_head& h, std::string_view body, std::unique_ptr<char[]>* owned)
        : head(h), body_(body), owned_(owned) {}
    std::string_view body_;
    std::unique_ptr<char[]>* owned_;
};

class request_handler {
public:
    enum class result : std::uint8_t { answered, pending };
    virtual ~request_handler() = default;
    virtual result handle(request& req, response& res, answer_ticket ticket) = 0;
    // Every answer the pool sends, the pool's own errors included.
    virtual void answered(method verb, int status, std::uint64_t latency_ns) = 0;
};

// Counters written by the pool's thread, readable from any thread (relaxed).
struct connection_stats {
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> refused{0};
    std::atomic<std::uint64_t> active{0};
    std::atomic<std::uint64_t> bytes_in{0};
    std::atomic<std::uint64_t> bytes_out{0};
    std::atomic<std::uint64_t> body_bytes_in_flight{0};
    std::atomic<std::uint64_t> tls_handshake_failures{0};
};

struct connection;

class connection_pool {
public:
    connection_pool(boost::asio::io_context& io, request_handler& handler, connection_limits limits);
    ~connection_pool();
    connection_pool(const connection_pool&) = delete;
    connection_pool& operator=(const connection_pool&) = delete;

    // Starts accepting from `acceptor` (already listening); stops when it is closed. With `tls`,
    // its connections speak HTTPS (the server is shared by every shard and outlives the pool).
    // At most max_listeners acceptors per pool.
    void accept_from(boost::asio::ip::tcp::acceptor& acceptor, crypto::tls_server* tls = nullptr);

    void set_now(clock_type::time_point now) { now_ = now; }
    // The owner calls asleep() before it blocks in the reactor. The first I/O handler to run after
    // that reads the clock again and calls the wake hook (where the owner begins a new round).
    void asleep() { asleep_ = true; }
    void set_wake_hook(void (*hook)(void* context), void* context) {
        wake_hook_ = hook;
        wake_context_ = context;
    }
    void awake() {
        if (!asleep_) return;
        asleep_ = false;
        now_ = clock_type::now();
        if (wake_hook_) wake_hook_(wake_context_);
    }
    clock_type::time_point now() const { return now_; }
    // The Date line answers carry; refreshed by the owner about once a second.
    void set_date(std::int64_t unix_seconds);

    void complete(answer_ticket ticket, const simple_answer& answer);

    // Closes connections whose deadline passed (408 for a request still arriving).
    void sweep();
    // Stop keep-alive: idle connections close now, busy ones after their current answer.
    void begin_shutdown();
    void close_all();

    std::size_t open_connections() const { return open_; }
    const connection_stats& stats() const { return stats_; }
    const connection_limits& limits() const { return limits_; }

private:
    friend struct connection;
    connection* allocate();
    void release(connection* c);
    struct listener {
        boost::asio::ip::tcp::acceptor* acceptor = nullptr;
        crypto::tls_server* tls = nullptr;
        bool stalled = false;   // out of descriptors or memory: the tick retries the accept
    };
    static constexpr std::size_t max_listeners = 2;   // HTTP and HTTPS
    void accept_ready(listener& l);
    void drain_accepts(listener& l);
    bool refuse_past_descriptor_limit(listener& l);
    void refuse(boost::asio::ip::tcp::socket& s);
    void refuse(int fd);

    boost::asio::io_context& io_;
    request_handler& handler_;
    connection_limits limits_;
    clock_type::time_point now_{};
    bool asleep_ = false;
    void (*wake_hook_)(void*) = nullptr;
    void* wake_context_ = nullptr;
    char date_line_[date_line_bytes] = {};
    std::vector<std::unique_ptr<connection>> connections_;
    std::vector<std::uint32_t> free_;
    std::size_t open_ = 0;
    bool shutting_down_ = false;
    std::unique_ptr<boost::asio::ip::tcp::socket> spare_;  // for refusing past max_connections
    // Out of file descriptors (EMFILE), a connection can be neither served nor refused, and it
    // would wait in the backlog for an epoll edge that only the next connection brings. So the
    // pool keeps one descriptor in reserve: it gives it up to accept and refuse such a
    // connection (503), then takes it back. When even that fails, the tick retries the accept.
    int reserve_fd_ = -1;
    listener listeners_[max_listeners];
    std::size_t listener_count_ = 0;
    std::unique_ptr<char[]> tls_scratch_;   // file bytes on their way into TLS records (when HTTPS is on)
    std::vector<header_field> fields_;                       // parse scratch shared by connections
    connection_stats stats_;
};

}  // namespace percore::net
