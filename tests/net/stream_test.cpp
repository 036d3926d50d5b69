// Long waits and streamed answers (what a change feed needs from the HTTP layer, SPEC §8) on a fake
// transport and a hand-set clock: a pending answer outlives the idle timeout, a stream's exact
// chunked bytes, the bound that cuts off a reader that stops reading, stale tickets, shutdown and
// HTTP/1.0 clients.
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
using net::stream_status;
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
    void closed(net::answer_ticket ticket) override {
        closed_tickets.push_back(ticket);
        if (write_when_closed) told_when_closed.push_back(write_when_closed->stream_write(ticket, "again"));
    }
    // closed() writes to the ticket again through this pool, as a careless handler might
    net::connection_pool* write_when_closed = nullptr;
    std::vector<stream_status> told_when_closed;
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
    // GET /feed, then its stream's head; what was written so far is dropped.
    void begin_feed(std::string_view content_type = "application/x-ndjson") {
        send("GET /feed HTTP/1.1\r\nHost: x\r\n\r\n");
        REQUIRE(pool.stream_begin(ticket(), 200, content_type) == stream_status::sent);
        io.written.clear();
    }
};

const std::string get_feed = "GET /feed HTTP/1.1\r\nHost: x\r\n\r\n";
const std::string get_after = "GET /after HTTP/1.1\r\nHost: x\r\n\r\n";
// The Date line of an unset pool clock (format_date_line(0)), and what follows it in the answers
// of a connection that stays open: the Keep-Alive line of the default 10 s idle timeout.
const std::string date_line = "Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n";
const std::string kept_lines = date_line + "Keep-Alive: timeout=10\r\n";

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
    h.pass(2s);   // past the idle timeout: the grace (limits.hpp, keep_alive_grace)
    CHECK(!h.io.closed);
    h.pass(1s);
    CHECK(h.io.closed);
}

TEST_CASE("a long poll's 200 KiB JSON body is sent whole, after its head, with its length") {
    harness h;
    h.send(get_feed + get_after);
    const std::string body = R"({"changes":[")" + std::string(200 * 1024, 'c') + R"("],"last_cursor":"9"})";
    h.pool.complete(h.ticket(), net::simple_answer{200, false, 0, nullptr, body});
    const std::string head = "HTTP/1.1 200 OK\r\n" + kept_lines + "Content-Type: application/json\r\nContent-Length: " +
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

// ---- streams -----------------------------------------------------------------------------------

TEST_CASE("a stream is its head, one chunk per write and the last chunk, then the next request is served") {
    harness h;
    h.send(get_feed + get_after);
    CHECK(h.io.written.empty());   // /after waits behind the stream
    CHECK(h.pool.stream_begin(h.ticket(), 200, "application/x-ndjson") == stream_status::sent);
    CHECK(h.pool.stream_write(h.ticket(), "hello") == stream_status::sent);
    CHECK(h.pool.stream_write(h.ticket(), "abcdefghijklmnopqrstuvwxyz") == stream_status::sent);
    CHECK(h.handler.statuses == std::vector<int>{200});   // told when the head is sent
    h.pool.stream_end(h.ticket());
    const std::string expected = "HTTP/1.1 200 OK\r\n" + kept_lines +
                                 "Content-Type: application/x-ndjson\r\nCache-Control: no-store\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n"
                                 "5\r\nhello\r\n"
                                 "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                                 "0\r\n\r\n"
                                 "HTTP/1.1 200 OK\r\n" + kept_lines + "Content-Length: 6\r\n\r\n/after";
    CHECK(h.io.written == expected);
    CHECK(!h.io.closed);
    CHECK(h.handler.statuses == (std::vector<int>{200, 200}));
}

TEST_CASE("an event stream's head names text/event-stream") {
    harness h;
    h.send(get_feed);
    CHECK(h.pool.stream_begin(h.ticket(), 200, "text/event-stream") == stream_status::sent);
    CHECK(h.io.written.find("\r\nContent-Type: text/event-stream\r\n") != std::string::npos);
}

TEST_CASE("an empty stream_write sends nothing, least of all the last chunk") {
    harness h;
    h.begin_feed();
    CHECK(h.pool.stream_write(h.ticket(), "") == stream_status::sent);
    CHECK(h.io.written.empty());
    CHECK(h.pool.stream_write(h.ticket(), "x") == stream_status::sent);
    CHECK(h.io.written == "1\r\nx\r\n");
}

TEST_CASE("a stream outlives the idle timeout while the handler writes heartbeats") {
    harness h;
    h.begin_feed();
    for (int i = 0; i < 30; ++i) {   // 270 s, a heartbeat every 9 s
        h.pass(9s);
        REQUIRE(h.pool.stream_write(h.ticket(), "\n") == stream_status::sent);
    }
    CHECK(!h.io.closed);
    CHECK(h.handler.closed_tickets.empty());
}

TEST_CASE("a stream whose output was all sent waits for its handler past the idle timeout") {
    harness h;
    h.begin_feed();
    h.pass(45s);   // SPEC §8's default heartbeat is 30 s, the default idle timeout 10 s
    CHECK(!h.io.closed);
    CHECK(h.handler.closed_tickets.empty());
    CHECK(h.pool.stream_write(h.ticket(), "\n") == stream_status::sent);
}

TEST_CASE("a stream whose client leaves bytes unread for the idle timeout closes and the handler is told") {
    harness h;
    h.begin_feed();
    h.io.set_window(0);   // the client reads nothing more
    REQUIRE(h.pool.stream_write(h.ticket(), "late line\n") == stream_status::sent);
    h.pass(9s);
    CHECK(!h.io.closed);
    h.pass(2s);
    CHECK(h.io.closed);
    CHECK(h.handler.closed_tickets.size() == 1);
    CHECK(h.pool.stream_write(h.ticket(), "later") == stream_status::gone);
}

TEST_CASE("a reader that stops reading is cut off at the bound and the write says so") {
    harness h;
    h.begin_feed();
    h.io.set_window(0);   // the client reads nothing more
    const std::string line(1000, 'l');
    stream_status s = stream_status::sent;
    int writes = 0;
    while (s == stream_status::sent && writes < 1000) {
        s = h.pool.stream_write(h.ticket(), line);
        if (s == stream_status::sent) {
            ++writes;
            CHECK(h.conn->unsent_bytes() <= h.pool.limits().max_stream_unsent_bytes);
        }
    }
    CHECK(s == stream_status::cut_off);
    CHECK(writes == static_cast<int>(h.pool.limits().max_stream_unsent_bytes / (1000 + 7)));   // "3e8\r\n" … "\r\n"
    CHECK(h.io.closed);
    CHECK(h.handler.closed_tickets.size() == 1);
    CHECK(h.pool.stats().streams_cut_off.load() == 1);
    CHECK(h.pool.stream_write(h.ticket(), line) == stream_status::gone);
}

TEST_CASE("a reader that keeps reading is never cut off, however much is streamed") {
    harness h;
    h.begin_feed();
    const std::string line(1000, 'l');
    for (int i = 0; i < 1000; ++i) {   // 1 MB through a 4 KiB window the client keeps opening
        h.io.set_window(4096);
        h.io.ready();
        REQUIRE(h.pool.stream_write(h.ticket(), line) == stream_status::sent);
    }
    CHECK(!h.io.closed);
}

TEST_CASE("a single write larger than the bound cuts the stream off") {
    net::connection_limits limits;
    limits.max_stream_unsent_bytes = 4096;
    harness h(limits);
    h.begin_feed();
    h.io.set_window(0);
    CHECK(h.pool.stream_write(h.ticket(), std::string(5000, 'b')) == stream_status::cut_off);
    CHECK(h.io.written.empty());
}

TEST_CASE("stream calls with a stale ticket are ignored, on a slot reused by another client too") {
    harness h;
    h.begin_feed();
    const net::answer_ticket old = h.ticket();
    h.conn->close();
    fake_transport second;
    REQUIRE(h.pool.open(second) == h.conn);   // the slot is reused
    second.deliver(get_feed);
    second.ready();
    CHECK(h.pool.stream_write(old, "stale") == stream_status::gone);
    CHECK(h.pool.stream_begin(old, 200, "text/event-stream") == stream_status::gone);
    h.pool.stream_end(old);
    CHECK(second.written.empty());
    CHECK(h.pool.stream_begin(net::answer_ticket{9999, 1}, 200, "text/event-stream") == stream_status::gone);
    h.conn->close();   // before `second` goes: the pool would close it at its own end, a use after free
}

TEST_CASE("stream calls out of order are ignored: a write before the head, a second head") {
    harness h;
    h.send(get_feed);
    CHECK(h.pool.stream_write(h.ticket(), "early") == stream_status::gone);
    h.pool.stream_end(h.ticket());
    CHECK(h.io.written.empty());
    CHECK(h.pool.stream_begin(h.ticket(), 200, "application/x-ndjson") == stream_status::sent);
    CHECK(h.pool.stream_begin(h.ticket(), 200, "application/x-ndjson") == stream_status::gone);
    h.pool.complete(h.ticket(), net::simple_answer{200, false, 0, nullptr});
    CHECK(h.io.written.find("HTTP/1.1", 1) == std::string::npos);   // one head only
}

TEST_CASE("shutdown ends a stream with its last chunk, closes the connection and tells the handler") {
    harness h;
    h.begin_feed();
    REQUIRE(h.pool.stream_write(h.ticket(), "a") == stream_status::sent);
    h.pool.begin_shutdown();
    CHECK(h.io.written == "1\r\na\r\n0\r\n\r\n");
    CHECK(h.io.write_shut);
    CHECK(h.pool.stream_write(h.ticket(), "b") == stream_status::gone);
    h.io.deliver_eof();
    h.io.ready();
    CHECK(h.io.closed);
    CHECK(h.handler.closed_tickets.size() == 1);
}

TEST_CASE("close_all closes a stream and tells the handler once") {
    harness h;
    h.begin_feed();
    h.pool.close_all();
    CHECK(h.io.closed);
    CHECK(h.handler.closed_tickets.size() == 1);
    CHECK(h.pool.stream_write(h.ticket(), "b") == stream_status::gone);
}

TEST_CASE("a stream begun while the pool stops ends at once") {
    harness h;
    h.send(get_feed);
    h.pool.begin_shutdown();
    CHECK(h.pool.stream_begin(h.ticket(), 200, "text/event-stream") == stream_status::gone);
    CHECK(h.io.written.find("Connection: close\r\n") != std::string::npos);
    CHECK(h.io.written.ends_with("\r\n\r\n0\r\n\r\n"));
}

TEST_CASE("an HTTP/1.0 stream is raw bytes under Connection: close, ended by closing") {
    harness h;
    h.send("GET /feed HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CHECK(h.pool.stream_begin(h.ticket(), 200, "application/x-ndjson") == stream_status::sent);
    CHECK(h.pool.stream_write(h.ticket(), "one\n") == stream_status::sent);
    CHECK(h.pool.stream_write(h.ticket(), "two\n") == stream_status::sent);
    h.pool.stream_end(h.ticket());
    const std::string expected = "HTTP/1.1 200 OK\r\n" + date_line +
                                 "Connection: close\r\nContent-Type: application/x-ndjson\r\n"
                                 "Cache-Control: no-store\r\n\r\none\ntwo\n";
    CHECK(h.io.written == expected);
    CHECK(h.io.write_shut);   // the end of the body; then lingering
    h.io.deliver_eof();
    h.io.ready();
    CHECK(h.io.closed);
    CHECK(h.handler.closed_tickets.size() == 1);
}

TEST_CASE("an HTTP/1.0 stream to a client that did not ask to keep the connection closes at its end") {
    harness h;
    h.send("GET /feed HTTP/1.0\r\n\r\n");
    REQUIRE(h.pool.stream_begin(h.ticket(), 200, "text/event-stream") == stream_status::sent);
    REQUIRE(h.pool.stream_write(h.ticket(), "data: x\n\n") == stream_status::sent);
    h.pool.stream_end(h.ticket());
    CHECK(h.io.written.ends_with("\r\n\r\ndata: x\n\n"));
    CHECK(h.io.closed);
}

TEST_CASE("a HEAD request's stream sends its head only") {
    harness h;
    h.send("HEAD /feed HTTP/1.1\r\nHost: x\r\n\r\n" + get_after);
    REQUIRE(h.pool.stream_begin(h.ticket(), 200, "application/x-ndjson") == stream_status::sent);
    REQUIRE(h.pool.stream_write(h.ticket(), "body") == stream_status::sent);
    h.pool.stream_end(h.ticket());
    const std::string head = "HTTP/1.1 200 OK\r\n" + kept_lines +
                             "Content-Type: application/x-ndjson\r\nCache-Control: no-store\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n";
    CHECK(h.io.written.starts_with(head));
    CHECK(h.io.written.substr(head.size()).starts_with("HTTP/1.1 200 OK\r\n"));
    CHECK(h.io.written.ends_with("/after"));
}

TEST_CASE("a stream whose peer closed goes on to its end, then the connection closes") {
    harness h;
    h.begin_feed();
    h.io.deliver_eof();
    h.io.ready();   // not read while streaming
    CHECK(!h.io.closed);
    CHECK(h.pool.stream_write(h.ticket(), "x") == stream_status::sent);
    h.pool.stream_end(h.ticket());   // the next request's read finds the EOF
    CHECK(h.io.closed);
    CHECK(h.handler.closed_tickets.size() == 1);
}

TEST_CASE("a handler writing again from closed() during a cut-off is told the stream is gone") {
    net::connection_limits limits;
    limits.max_stream_unsent_bytes = 4096;
    harness h(limits);
    h.handler.write_when_closed = &h.pool;
    h.begin_feed();
    h.io.set_window(0);
    CHECK(h.pool.stream_write(h.ticket(), std::string(5000, 'b')) == stream_status::cut_off);
    CHECK(h.handler.told_when_closed == std::vector<stream_status>{stream_status::gone});
}

TEST_CASE("a stream gives its request's body budget back when it begins") {
    harness h;
    h.send("POST /feed HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    CHECK(h.pool.stats().body_bytes_in_flight.load() == 5);
    REQUIRE(h.pool.stream_begin(h.ticket(), 200, "application/x-ndjson") == stream_status::sent);
    CHECK(h.pool.stats().body_bytes_in_flight.load() == 0);
}

// ---- producers that wait for the client (a backup: SPEC §11) ------------------------------------

TEST_CASE("a producer that writes only within stream_room() is never cut off and goes on once the client reads") {
    harness h;
    h.begin_feed();
    h.io.set_window(0);   // the client reads nothing for now
    const std::size_t piece = 64 * 1024;
    std::size_t written = 0;
    for (int round = 0; round < 100 && h.pool.stream_room(h.ticket()) >= piece; ++round) {
        REQUIRE(h.pool.stream_write(h.ticket(), std::string(piece, 'p')) == stream_status::sent);
        written += piece;
    }
    CHECK(written > 0);
    CHECK(h.pool.stream_room(h.ticket()) < piece);
    CHECK(!h.io.closed);
    h.io.set_window(1u << 20);   // it reads everything
    h.io.ready();
    CHECK(h.conn->unsent_bytes() == 0);
    CHECK(h.pool.stream_room(h.ticket()) >= piece);
    CHECK(h.pool.stream_room(h.ticket()) < h.pool.limits().max_stream_unsent_bytes);  // a chunk's framing kept
}

TEST_CASE("stream_room() is 0 for a ticket that names no stream") {
    harness h;
    h.send(get_feed);
    CHECK(h.pool.stream_room(h.ticket()) == 0);   // pending, not streaming yet
    REQUIRE(h.pool.stream_begin(h.ticket(), 200, "application/x-tar") == stream_status::sent);
    CHECK(h.pool.stream_room(h.ticket()) > 0);
    CHECK(h.pool.stream_room(net::answer_ticket{h.ticket().index, h.ticket().generation + 1}) == 0);
}

TEST_CASE("an aborted stream closes without its last chunk, and the handler is told") {
    harness h;
    h.begin_feed();
    REQUIRE(h.pool.stream_write(h.ticket(), "part") == stream_status::sent);
    h.pool.stream_abort(h.ticket());
    CHECK(h.io.closed);
    CHECK(h.io.written.find("0\r\n\r\n") == std::string::npos);
    CHECK(h.handler.closed_tickets.size() == 1);
    CHECK(h.pool.stream_write(h.ticket(), "more") == stream_status::gone);
}

TEST_CASE("a stream's head carries the extra field it was begun with") {
    harness h;
    h.send(get_feed);
    REQUIRE(h.pool.stream_begin(h.ticket(), 200, "application/x-tar", "Content-Disposition",
                                "attachment; filename=\"b.tar\"") == stream_status::sent);
    CHECK(h.io.written.find("\r\nContent-Disposition: attachment; filename=\"b.tar\"\r\n") != std::string::npos);
    CHECK(h.io.written.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
}
