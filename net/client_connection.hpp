// client_connection: one outgoing HTTP/1.1 connection on a shard's loop (SPEC §9 deliveries): one
// request at a time, keep-alive to the receiver, a deadline for each whole exchange, a bounded
// response, redirects not followed (a 3xx is a status like any other). It speaks HTTP and knows
// nothing of storage; the caller (a delivery) decides what a status means.
//
// Contract
// - send(request, deadline_ns) formats the request's head into the connection's own buffer (those
//   views need not outlive the call) and borrows its body: REQUIRES the body's bytes stay where and
//   as they are until the exchange ends (on_exchange_done returns). A delivery keeps its batch for
//   its retries anyway; copying it cost a memcpy of up to ~1.4 MiB a try, ~190 instructions a
//   delivered change in callgrind. It does no I/O and never completes from within: it opens the
//   transport (no connection kept) or asks it for an on_ready() (one kept), and the exchange runs
//   from the transport's on_ready() calls. Host and Content-Length are added; the caller's
//   headers must not carry Host, Content-Length, Transfer-Encoding or Connection.
// - Every exchange ends exactly once, in client_events::on_exchange_done(outcome), called from
//   on_ready() or tick(), never from send(). The outcome is a response (any status: 2xx, 3xx, 503 …)
//   or an error (client_error). Its views (fields, body) are valid until the callback returns or
//   send() is called, whichever is first. The callback may call send() (the next request); it must
//   not destroy the connection.
// - Keep-alive: after a complete response with HTTP/1.1, no Connection: close, a length-framed
//   body, the whole request sent and no stray bytes after the response, the transport stays open
//   and the next send() reuses it; otherwise it is closed and the next send() opens a new one. A
//   kept connection that the receiver closes while idle is closed here at its on_ready(). A request
//   on a kept connection that the peer closes before any response byte (the receiver's idle close
//   raced the send) is sent once more on a new connection: deliveries are at-least-once anyway.
// - Deadline: tick(now_ns) ends an exchange whose deadline has passed with timed_out (whatever the
//   receiver does: trickling a byte a second, never closing, never accepting), and closes the
//   transport. now_ns and deadline_ns are one clock (the loop's round clock); the caller ticks at
//   least as often as the precision it wants (the loop's tick).
// - Bounds: client_limits (net/limits.hpp). A response past max_response_bytes ends too_large: the
//   connection stops reading and closes, so a hostile receiver costs a bounded read, not memory.
// - One connection per transport, on the transport's shard thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "net/limits.hpp"
#include "net/request_parser.hpp"   // header_field
#include "net/response_parser.hpp"
#include "net/transport.hpp"

namespace percore::net {

// A transport the client opens itself (client_socket; a test's fake): connecting is part of the
// exchange, and a closed connection is opened again by the next send().
class client_transport : public transport {
public:
    enum class open_state : std::uint8_t { connecting, open, connect_failed, tls_failed };

    // Begins a new connection to the transport's peer; its end (open or failed) is told by a later
    // on_ready() (never from within open()), after which open_progress() says which.
    // REQUIRES: !is_open(). is_open() is true from open() until close(), failed or not.
    virtual void open() = 0;
    virtual open_state open_progress() = 0;
    // connect_failed: the errno (ECONNREFUSED …) when one is known, else 0.
    virtual int open_error() const { return 0; }
    // tls_failed: why, when the transport knows (the certificate check's reason), else empty.
    virtual std::string_view open_failure() const { return {}; }
    virtual bool is_open() const = 0;
    // One on_ready() later, inside a loop round, never from within this call.
    virtual void post_ready() = 0;
};

struct client_request {
    std::string_view method = "POST";
    std::string_view target = "/";              // origin-form: path and query
    std::string_view host;                      // the Host field: host[:port]
    std::span<const header_field> headers;      // beside Host and Content-Length
    std::string_view body;
};

enum class client_error : std::uint8_t { none, connect_failed, tls_failed, timed_out, closed_early, malformed, too_large };

const char* to_string(client_error e);

struct client_outcome {
    client_error error = client_error::none;
    const char* text = "";                  // on error: a short static text
    int system_error = 0;                   // connect_failed: the errno when known
    int status = 0;                         // the final status, when its head was read (errors too)
    std::span<const response_field> fields; // the final head's fields
    std::string_view body;                  // the body's first max_kept_body_bytes
    std::uint64_t body_bytes = 0;           // every body byte read
    bool reused = false;                    // sent on a kept-alive connection

    bool ok() const { return error == client_error::none; }
};

class client_events {
public:
    virtual void on_exchange_done(const client_outcome& outcome) = 0;

protected:
    ~client_events() = default;
};

class client_connection final : private transport_events {
public:
    client_connection(client_transport& transport, client_events& events, client_limits limits = {});
    ~client_connection();
    client_connection(const client_connection&) = delete;
    client_connection& operator=(const client_connection&) = delete;

    // REQUIRES: !busy(); method a token; target, host, field names and values free of CR, LF and
    // NUL (and the target of spaces); no Host/Content-Length/Transfer-Encoding/Connection field.
    void send(const client_request& request, std::int64_t deadline_ns);
    // Ends the exchange in flight with timed_out once now_ns >= its deadline.
    void tick(std::int64_t now_ns);
    // Closes a kept connection. REQUIRES: !busy().
    void close();
    // Every later response's body goes to `sink` instead of client_outcome::body (response_parser.hpp).
    void set_body_sink(body_sink sink) { parser_.set_body_sink(sink); }

    bool busy() const { return phase_ == phase::connecting || phase_ == phase::exchanging; }
    bool connected() const { return transport_.is_open() && phase_ != phase::connecting; }
    std::uint64_t opens() const { return opens_; }   // connections opened so far

private:
    enum class phase : std::uint8_t { closed, idle, connecting, exchanging };

    void on_ready() override;
    void start_open();
    [[nodiscard]] bool opened();
    void exchange();
    void write_request();
    void read_response();
    [[nodiscard]] bool feed(std::size_t bytes);
    void peer_closed(bool clean);
    void drain_idle();
    void response_done(bool stray_bytes);
    void fail(client_error e, const char* text, int system_error = 0);
    void close_transport();
    void report(client_outcome& outcome);

    client_transport& transport_;
    client_events& events_;
    client_limits limits_;
    response_parser parser_;
    std::unique_ptr<char[]> read_buffer_;
    std::string head_;                // the request being sent: its head, formatted here
    std::string_view body_;           // and its body, borrowed (contract above)
    std::size_t sent_ = 0;            // bytes of head_ then body_ written
    std::int64_t deadline_ns_ = 0;
    std::uint64_t opens_ = 0;
    phase phase_ = phase::closed;
    bool reused_ = false;             // the exchange began on a kept connection
    bool resent_ = false;             // already sent once more after a kept connection's close
    bool write_failed_ = false;       // the peer stopped taking the request (it may still answer)
};

}  // namespace percore::net
