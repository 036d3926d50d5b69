// request_handler: what a connection hands each complete request to — the composition's document
// service in the server, a scripted handler in the connection tests.
//
// Contract
// - handle() runs on the connection's shard thread, inside a round, with the request's head and
//   whole body. It answers at once into `res` (result::answered), or keeps `ticket` and returns
//   result::pending; it must then call connection_pool::complete(ticket, …) exactly once, later,
//   on this thread. While a connection waits for an answer it parses nothing further (requests on
//   one connection take effect in order).
// - answered() is told every answer the pool sends, its own errors included, with the time from
//   the request's head to its answer (round-clock granularity).
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

// An answer that needs no body beyond an optional JSON error: what a write produces.
struct simple_answer {
    int status = 500;
    bool has_etag = false;
    std::uint64_t etag = 0;
    const char* error = nullptr;  // when set: {"error":"..."} body
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

class request_handler {
public:
    enum class result : std::uint8_t { answered, pending };
    virtual ~request_handler() = default;
    virtual result handle(request& req, response& res, answer_ticket ticket) = 0;
    virtual void answered(method verb, int status, std::uint64_t latency_ns) = 0;
};

}  // namespace percore::net
