// Long waits (what a change feed needs from the HTTP layer, SPEC §8) on a fake transport and a
// hand-set clock: a pending answer outlives the idle timeout, a long poll's large body.
#include <doctest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "fake_transport.hpp"
#include "net/connection_pool.hpp"
#include "shards/runtime/round_clock.hpp"

using namespace percore;
using net::testing::fake_transport;
using namespace std::chrono_literals;

namespace {

// GET /feed waits (pending) for the test to answer or stream it; any other GET is answered 200
// with its target as its body. Logs answered() statuses and closed() tickets.
struct feed_handler final : net::request_handler {
    std::vector<net::answer_ticket> waiting;
    std::vector<int> statuses;
    std::vector<net::answer_ticket> closed_tickets;

    result handle(net::request& req, net::response& res, net::answer_ticket ticket) override {
        if (req.head.target == "/feed") {
            waiting.push_back(ticket);
            return result::pending;
        }
        std::string_view body = req.head.target;
        res.start(200);
        res.content_length(body.size());
        res.end_head();
        res.body(body);
        return result::answered;
    }
    void answered(net::method, int status, std::uint64_t) override { statuses.push_back(status); }
    void closed(net::answer_ticket ticket) override { closed_tickets.push_back(ticket); }
};

struct harness {
    runtime::round_clock clock;
    feed_handler handler;
    fake_transport io;   // before the pool: the pool closes its connections' transports when it goes
    net::connection_pool pool;
    net::connection* conn = nullptr;

    explicit harness(net::connection_limits limits = {}) : pool(clock, handler, limits) {
        clock.set(runtime::clock_type::time_point(100s));
        conn = pool.open(io);
    }
    void send(std::string_view bytes) {
        io.deliver(bytes);
        io.ready();
    }
    void pass(std::chrono::milliseconds d) {
        clock.advance(d);
        pool.sweep();
    }
    net::answer_ticket ticket() const { return handler.waiting.at(0); }
};

const std::string get_feed = "GET /feed HTTP/1.1\r\nHost: x\r\n\r\n";
const std::string get_after = "GET /after HTTP/1.1\r\nHost: x\r\n\r\n";
// The Date line of an unset pool clock (format_date_line(0)).
const std::string date_line = "Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n";

}  // namespace

// ---- long waits --------------------------------------------------------------------------------

TEST_CASE("a pending answer outlives the idle timeout and is sent when it completes, 300 s later") {
    harness h;
    h.send(get_feed);
    h.pass(300s);
    CHECK(!h.io.closed);
    CHECK(h.handler.closed_tickets.empty());
    h.pool.complete(h.ticket(), net::simple_answer{200, false, 0, nullptr, R"({"changes":[]})"});
    CHECK(h.io.written.ends_with(R"({"changes":[]})"));
    CHECK(!h.io.closed);
}

TEST_CASE("a connection goes back to the idle timeout once its long wait is answered") {
    harness h;
    h.send(get_feed);
    h.pass(300s);
    h.pool.complete(h.ticket(), net::simple_answer{200, false, 0, nullptr, "{}"});
    h.pass(9s);
    CHECK(!h.io.closed);
    h.pass(2s);
    CHECK(h.io.closed);
}

TEST_CASE("a long poll's 200 KiB JSON body is sent whole, after its head, with its length") {
    harness h;
    h.send(get_feed + get_after);
    const std::string body = R"({"changes":[")" + std::string(200 * 1024, 'c') + R"("],"last_cursor":"9"})";
    h.pool.complete(h.ticket(), net::simple_answer{200, false, 0, nullptr, body});
    const std::string head = "HTTP/1.1 200 OK\r\n" + date_line + "Content-Type: application/json\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n";
    REQUIRE(h.io.written.starts_with(head));
    CHECK(h.io.written.substr(head.size(), body.size()) == body);
    CHECK(h.io.written.ends_with("/after"));   // the next request after it
}

TEST_CASE("a pending connection is closed at shutdown's end and the handler is told") {
    harness h;
    h.send(get_feed);
    h.pool.begin_shutdown();
    CHECK(!h.io.closed);   // still owed its answer
    h.pool.close_all();
    CHECK(h.io.closed);
    CHECK(h.handler.closed_tickets.size() == 1);
}
