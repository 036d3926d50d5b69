// connection: one HTTP/1.1 connection's state machine — reading heads and bodies, handing
// requests to the request_handler, sending answers, lingering before a close — over any transport.
//
//          open                        complete (ticket)
//   free ────────► head ◄────────────────────────────── pending ──stream_begin──► streaming
//                   ▲  │ head parsed, admitted, body follows ▲                        │
//                   │  └────► body / chunked ──────────────►┤ handler returned pending│
//                   └───────────────────── stream_end (keep-alive) ───────────────────┘
//                   │ bad input, a closing answer,           │
//                   │ a refused request with a body          │
//                   ▼                                        │
//                closing ──(answer sent)──► lingering ──(EOF or linger deadline)──► free
//                   └──(client asked to close and sent nothing more, or it is gone)──► free
//
// Contract
// - Owned by a connection_pool, sharing its connection_shared; on its shard's thread only; every
//   entry point runs inside a round.
// - Answers leave in request order. All answers produced from one read leave together in one
//   gathered write (pipelining). A connection whose unsent answers pass connection_limits'
//   max_unsent_bytes or max_unsent_answers stops reading and parsing until they drain (a client
//   that never reads costs a bounded amount of memory, and the idle timeout still closes it).
// - Every byte the client sends is consumed by exactly one of: a head, a body, the linger.
// - What ends the connection after the current answer is one value (ending): keep it alive, close
//   after lingering (RFC 9112 §9.6: shut the write side and drain, so that a client still sending
//   reads its answer instead of a reset), or close at once (the client asked and sent nothing more).
// - Admission (request_handler::admit): once per request, when its head is parsed and has passed
//   the framing checks, and only when the connection is about to process it (never while an
//   earlier request of the connection is pending, so admission sees the effects of the requests
//   before it) — before a 100 Continue, before any body byte is buffered or charged to the body
//   budget. A refusal is the request's answer: without a body the connection goes on with the next
//   request; with one (Content-Length > 0 or chunked) the answer says Connection: close and the
//   connection lingers and closes, its body never buffered.
// - The turn class is that of the last admission (refusals included), 0 from open(): the class the
//   connection's readiness is served in (runtime::poller) and whose share of the body budget its
//   bodies are charged to (connection_shared).
// - The handler's closed() is told once, when the connection closes for whatever reason, if it
//   handed the handler at least one request (admitted or refused).
// - Deadlines: an idle connection (between requests, nothing unsent) closes at the idle timeout
//   plus keep_alive_grace — its answers advertised the idle timeout in a Keep-Alive line, and a
//   client retiring its socket then must not meet a close on the way (limits.hpp); a request that
//   has begun gets 408 at the idle timeout. A pending connection has none (a long poll may wait
//   minutes; shutdown still closes it). A streaming one closes at the idle timeout from the handler's last write or the client's
//   last read, whichever is later (heartbeats keep it). Neither reads while it waits: a peer that
//   closed is found out at the next write.
// - Streams (stream_begin/stream_write/stream_end): each write is one chunk of a chunked answer,
//   or raw bytes to an HTTP/1.0 client, whose answer says Connection: close and ends by closing.
//   A write that would leave more than limits.max_stream_unsent_bytes unsent cuts the connection
//   off (closes it) instead of buffering it: a stream's producer cannot be paused. When the pool
//   stops, a stream is ended cleanly (its last chunk) and the connection closes after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "net/chunked_decoder.hpp"
#include "net/connection_shared.hpp"
#include "net/output_buffer.hpp"
#include "net/request_handler.hpp"
#include "net/request_parser.hpp"
#include "net/transport.hpp"
#include "shards/runtime/round_clock.hpp"

namespace percore::net {

enum class connection_state : std::uint8_t {
    free,       // no client: the slot waits in the pool's free list
    head,       // reading and parsing a request head
    body,       // reading a Content-Length body
    chunked,    // reading a chunked body
    pending,    // waiting for the handler's answer
    streaming,  // the answer's head is sent; the handler writes its body in pieces
    closing,    // a closing answer is queued; what follows depends on `ending`
    lingering,  // write side shut; discarding input until EOF or the linger deadline
};

enum class ending : std::uint8_t { keep_alive, linger_then_close, close_at_once };

class connection final : public transport_events {
public:
    connection(connection_shared& shared, std::uint32_t index);
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    // REQUIRES: state() == free. The connection takes `io` until it closes.
    void open(transport& io);
    void on_ready() override;
    std::uint32_t turn_class() const override { return turn_class_; }
    // The pending request's answer. REQUIRES: state() == pending.
    void complete(const simple_answer& answer);
    // A streamed answer (request_handler.hpp, connection_pool.hpp). REQUIRES: state() == pending
    // for stream_begin (status 200-599 but 204 and 304; `content_type` one header value without
    // CR or LF), state() == streaming for stream_write and stream_end.
    // `extra_name`/`extra_value`: one more header field when not empty (a download's
    // Content-Disposition), a token and a value without CR or LF.
    stream_status stream_begin(int status, std::string_view content_type, std::string_view extra_name = {},
                               std::string_view extra_value = {});
    stream_status stream_write(std::string_view bytes);
    void stream_end();
    // The most bytes a stream_write may carry now without being cut off: the bound less what waits
    // unsent and a chunk's framing; 0 when not streaming. A producer that writes only within it is
    // never cut off, and goes on when the client has read (the next round finds room again).
    std::size_t stream_room() const;
    // The round clock passed deadline(): 408, close or stop lingering.
    void expire();
    // Graceful stop: idle connections close now, the others after their current answer; a
    // stream ends now (it would not end by itself) and its connection closes.
    void stop_keep_alive();
    void close();

    connection_state state() const { return state_; }
    std::uint32_t index() const { return index_; }
    std::uint32_t generation() const { return generation_; }
    runtime::clock_type::time_point deadline() const { return deadline_; }
    bool idle() const { return state_ == connection_state::head && in_size_ == in_start_ && out_.empty(); }
    std::size_t unsent_bytes() const { return out_.pending_bytes(); }

private:
    enum class body_place : std::uint8_t { none, input, own };

    void pump();
    bool wants_input() const;
    bool read_once();
    void on_received(std::size_t n);
    void on_peer_closed();
    void process_input();
    bool output_full() const;
    bool parse_head();
    bool check_head();
    bool admit();
    bool announces_body() const;
    void begin_body();
    bool begin_sized_body();
    bool grow_body();
    bool decode_chunked();
    void dispatch();
    bool more_follows(const iovec* iov, std::size_t count) const;
    void finish_request(int status);
    void answered(method verb, int status);
    void report_answer(method verb, int status);
    void next_request();
    void finish_stream();
    void answer_error(int status, const char* reason);
    void flush();
    bool send_output();
    void start_linger();
    bool input_target(char*& dst, std::size_t& want);
    bool ensure_input_space();
    void keep_head();
    void compact_input();
    answer_ticket ticket() const { return {index_, generation_}; }
    [[nodiscard]] bool reserve_body(std::uint64_t bytes);
    void release_body_budget();
    void touch();   // the deadline moves: idle timeout from now
    void begin_body_clock();
    void body_progress(std::uint64_t bytes);
    connection_header connection_for(const request_head& h) const;
    static void take_chunk(void* self, const char* data, std::size_t size);

    connection_shared& pool_;   // what the pool's connections share
    const std::uint32_t index_;
    std::uint32_t generation_ = 0;
    connection_state state_ = connection_state::free;
    ending ending_ = ending::keep_alive;
    bool peer_closed_ = false;
    bool input_paused_ = false;   // complete requests wait in the input until the answers drain
    bool handed_request_ = false; // admit() saw a request: closed() is owed
    bool idle_grace_given_ = false;  // the deadline was moved once past the idle timeout (expire())
    std::uint32_t turn_class_ = 0;
    transport* io_ = nullptr;
    runtime::clock_type::time_point deadline_{};
    runtime::clock_type::time_point rate_deadline_{};   // a body's: the rate floor (limits.hpp)

    // input: in_[0, in_size_) buffered; the current request starts at in_start_; in_parse_ is the
    // first byte not yet consumed (after the head: the body's raw bytes)
    char* in_ = nullptr;
    std::size_t in_capacity_ = 0;
    std::size_t in_size_ = 0;
    std::size_t in_start_ = 0;
    std::size_t in_parse_ = 0;
    request_parser parser_;
    request_head head_;
    // A request whose body is still arriving keeps its head here: the head's views point into
    // in_, which moves while a body is read, and its field table is the pool's, which the next head
    // parsed on this shard overwrites. Kept across requests: at most one allocation per connection
    // that ever waits for a body.
    std::vector<char> kept_head_;
    std::vector<header_field> kept_fields_;

    // the current request's body
    body_place body_place_ = body_place::none;
    std::unique_ptr<char[]> body_;
    std::uint64_t body_size_ = 0;      // expected (Content-Length) or decoded so far (chunked)
    std::uint64_t body_filled_ = 0;
    std::uint64_t body_capacity_ = 0;  // allocated (own buffer), charged to the budget
    std::uint64_t body_reserved_ = 0;  // counted against the pool's body budget
    std::uint32_t body_class_ = 0;     // the class body_reserved_ is counted to
    chunked_decoder chunked_;

    // the answer being waited for
    method pending_verb_ = method::other;
    connection_header pending_connection_ = connection_header::none;
    bool pending_http10_ = false;   // the waiting request was HTTP/1.0: a stream is raw, then closes
    bool stream_chunked_ = false;   // the stream's writes are framed as chunks
    bool stream_head_only_ = false; // a HEAD request's stream: its head only, no body bytes
    runtime::clock_type::time_point request_started_{};

    output_buffer out_;
    std::size_t unsent_answers_ = 0;
};

}  // namespace percore::net
