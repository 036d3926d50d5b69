// request_handler: what a connection hands each complete request to — the composition's document
// service in the server, a scripted handler in the connection tests.
//
// Contract
// - handle() runs on the connection's shard thread, inside a round, with the request's head and
//   whole body. It answers at once into `res` (result::answered), or keeps `ticket` and returns
//   result::pending; it must then call connection_pool::complete(ticket, …) exactly once, later,
//   on this thread. While a connection waits for an answer it parses nothing further (requests on
//   one connection take effect in order).
// - Or, instead of complete(), it streams the answer (a change feed, SPEC §8): stream_begin(ticket,
//   status, content type) once, stream_write(ticket, bytes) any number of times, stream_end(ticket)
//   once — all on this thread (connection_pool.hpp). The answer is chunked (HTTP/1.1) or, to an
//   HTTP/1.0 client, raw bytes ended by closing the connection. The handler stops streaming when a
//   call says stream_status::gone or cut_off, or when closed() is told the connection ended.
// - A pending answer is exempt from the idle timeout (a long poll may wait minutes); so is a stream
//   while everything it wrote was sent (a client that leaves bytes unread for one closes).
// - answered() is told every answer the pool sends, its own errors included, with the time from
//   the request's head to its answer (round-clock granularity).
// - admit() runs once per request as soon as its head is parsed, before any of its body is read or
//   charged to the body budget (SPEC §7: quotas and tokens are checked before a body is buffered).
//   It either admits the request (handle() follows once the body is in) or refuses it by writing a
//   whole answer into `res` (401, 403, 404, 413, 429, 507 …); a refused request that announced a
//   body is answered with Connection: close and the connection closes (its body is never read);
//   one without a body keeps the connection. admission::turn_class names the class whose turns the
//   connection's reads are scheduled in from now on (fair turns between apps: 0 = the default
//   class), and whose share of the body budget the request's body is charged to.
// - closed() is told once when a connection that was handed at least one request ends (closed,
//   reset, timed out, or the pool shut down), with its last ticket's index and generation, so a
//   handler can drop what it kept per connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "net/request_parser.hpp"
#include "net/response.hpp"

namespace percore::net {

// Names one connection's pending answer; stale tickets (connection gone or reused) are ignored.
struct answer_ticket {
    std::uint32_t index = 0;
    std::uint32_t generation = 0;
};

// What a stream call did (connection_pool::stream_begin / stream_write).
enum class [[nodiscard]] stream_status : std::uint8_t {
    sent,     // queued, and sent as far as the client reads; the stream goes on
    gone,     // no stream there: the ticket is stale, the connection ended (this call may have seen it
              // end) or the pool is stopping; closed() has been or will be told
    cut_off,  // the client reads too slowly: this write would have left more than
              // connection_limits::max_stream_unsent_bytes unsent, so the connection was closed
              // (closed() was told before this returned) and the write dropped
};

// An answer that needs no body beyond an optional JSON error: what a write produces.
struct simple_answer {
    int status = 500;
    bool has_etag = false;
    std::uint64_t etag = 0;
    const char* error = nullptr;  // when set: {"error":"..."} body
    std::string_view body;        // else, when set: an application/json body of any size (copied when sent)

    constexpr simple_answer() = default;
    constexpr simple_answer(int status_, bool has_etag_, std::uint64_t etag_, const char* error_,
                            std::string_view body_ = {})
        : status(status_), has_etag(has_etag_), etag(etag_), error(error_), body(body_) {}
};

class request {
public:
    request(const request_head& h, std::string_view body, std::unique_ptr<char[]>* owned)
        : head(h), body_(body), owned_(owned) {}

    const request_head& head;
    std::string_view body() const { return body_; }
    // The body as an owned buffer (moved out when the connection already owns one, else copied).
    std::unique_ptr<char[]> take_body();

private:
    std::string_view body_;
    std::unique_ptr<char[]>* owned_;
};

// What admit() decided about a request whose head has arrived.
struct admission {
    bool admitted = true;           // false: admit() wrote the whole answer into `res`
    std::uint32_t turn_class = 0;   // fair turns: the connection's class from now on (0: default)
};

class request_handler {
public:
    enum class result : std::uint8_t { answered, pending };
    virtual ~request_handler() = default;
    virtual admission admit(const request_head& head, response& res, answer_ticket ticket) {
        (void)head, (void)res, (void)ticket;
        return {};
    }
    virtual result handle(request& req, response& res, answer_ticket ticket) = 0;
    virtual void answered(method verb, int status, std::uint64_t latency_ns) = 0;
    virtual void closed(answer_ticket ticket) { (void)ticket; }
};

}  // namespace percore::net
