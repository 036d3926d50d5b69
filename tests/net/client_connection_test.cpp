// The outgoing connection's state machine on a fake client transport and a hand-set clock: each
// case one behaviour (statuses are statuses, keep-alive, the deadline, the bounds, early closes),
// and every byte split of an answer giving the same outcome.
#include <doctest.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fake_client_transport.hpp"
#include "net/client_connection.hpp"

using namespace percore::net;
using percore::net::testing::fake_client_transport;
using open_state = client_transport::open_state;

namespace {

constexpr std::int64_t second = 1'000'000'000;
constexpr std::int64_t deadline = 15 * second;   // SPEC §9: a 2xx within 15 s

// An outcome copied out of the callback (its views end with it).
struct seen {
    client_error error = client_error::none;
    std::string text;
    int system_error = 0;
    int status = 0;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    std::uint64_t body_bytes = 0;
    bool reused = false;

    bool operator==(const seen&) const = default;
};

[[maybe_unused]] doctest::String toString(const seen& s) {
    std::string text = std::string("{") + to_string(s.error) + " " + s.text + ", status " + std::to_string(s.status) +
                       ", body " + s.body + "}";
    return text.c_str();
}

struct recorder final : client_events {
    std::vector<seen> outcomes;
    std::function<void()> then;   // runs inside the callback, once

    void on_exchange_done(const client_outcome& o) override {
        seen s{o.error, o.text, o.system_error, o.status, {}, std::string(o.body), o.body_bytes, o.reused};
        for (const response_field& f : o.fields) s.fields.emplace_back(f.name, f.value);
        outcomes.push_back(std::move(s));
        if (auto f = std::exchange(then, nullptr)) f();
    }
};

const header_field hook_fields[] = {{"webhook-id", "msg_1"}};

client_request hook(std::string_view body = "{}") {
    client_request r;
    r.target = "/hook";
    r.host = "example.test:8080";
    r.headers = hook_fields;
    r.body = body;
    return r;
}

constexpr std::string_view ok_200 = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

struct harness {
    fake_client_transport t;
    recorder done;
    client_connection c{t, done};

    // Sends a request and, when no connection is kept, completes the connect.
    void post(std::string_view body = "{}") {
        const bool kept = c.connected();
        c.send(hook(body), deadline);
        if (kept) {
            t.ready();   // the turn send() asked for
        } else {
            t.connected();
        }
    }
    void answer(std::string_view bytes) {
        t.socket().deliver(bytes);
        t.ready();
    }
    const seen& last() const { return done.outcomes.back(); }
};

}  // namespace

TEST_CASE("the request goes out as a POST with Host, the caller's fields and Content-Length") {
    harness h;
    h.post(R"({"a":1})");
    CHECK(h.t.socket().written ==
          "POST /hook HTTP/1.1\r\nHost: example.test:8080\r\nwebhook-id: msg_1\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
}

TEST_CASE("a 200 completes with its status and body") {
    harness h;
    h.post();
    h.answer(ok_200);
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::none);
    CHECK(h.last().status == 200);
    CHECK(h.last().body == "ok");
}

TEST_CASE("a 503 completes with 503, not an error") {
    harness h;
    h.post();
    h.answer("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n");
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::none);
    CHECK(h.last().status == 503);
}

TEST_CASE("a 302 is a status and is not followed") {
    harness h;
    h.post();
    const std::size_t sent = h.t.socket().written.size();
    h.answer("HTTP/1.1 302 Found\r\nLocation: http://elsewhere.test/\r\nContent-Length: 0\r\n\r\n");
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().status == 302);
    CHECK(h.last().fields.front() == std::pair<std::string, std::string>{"Location", "http://elsewhere.test/"});
    CHECK(h.t.sockets.size() == 1);
    CHECK(h.t.socket().written.size() == sent);
}

TEST_CASE("keep-alive reuses the connection for the second request") {
    harness h;
    h.post();
    h.answer(ok_200);
    REQUIRE(h.c.connected());
    h.post("{}");
    h.answer(ok_200);
    REQUIRE(h.done.outcomes.size() == 2);
    CHECK(h.last().status == 200);
    CHECK(h.last().reused);
    CHECK(h.t.sockets.size() == 1);
    CHECK(h.c.opens() == 1);
}

TEST_CASE("Connection: close makes the next send open a new connection") {
    harness h;
    h.post();
    h.answer("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    CHECK(h.t.socket().closed);
    CHECK_FALSE(h.c.connected());
    h.post();
    h.answer(ok_200);
    CHECK(h.t.sockets.size() == 2);
    CHECK_FALSE(h.last().reused);
    CHECK(h.last().status == 200);
}

TEST_CASE("the deadline ends an answer trickled one byte a second with timed_out") {
    harness h;
    h.post();
    const std::string answer(ok_200);
    std::int64_t now = 0;
    for (std::size_t i = 0; i < answer.size() && h.done.outcomes.empty(); ++i) {
        h.answer(answer.substr(i, 1));
        now += second;
        h.c.tick(now);
    }
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::timed_out);
    CHECK(now == deadline);
    CHECK(h.t.socket().closed);
}

TEST_CASE("a receiver that accepts and never answers times out at the deadline, not before") {
    harness h;
    h.post();
    h.c.tick(deadline - 1);
    CHECK(h.done.outcomes.empty());
    h.c.tick(deadline);
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::timed_out);
}

TEST_CASE("a connect that never ends times out at the deadline") {
    harness h;
    h.c.send(hook(), deadline);
    h.c.tick(deadline);
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::timed_out);
    CHECK(h.last().text == "not connected before the deadline");
}

TEST_CASE("a refused connect ends connect_failed with its errno") {
    harness h;
    h.c.send(hook(), deadline);
    h.t.connected(open_state::connect_failed, ECONNREFUSED);
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::connect_failed);
    CHECK(h.last().system_error == ECONNREFUSED);
    CHECK_FALSE(h.t.is_open());
}

TEST_CASE("an answer past the hard bound ends too_large and the transport is closed unread") {
    harness h;
    h.post();
    const std::string flood = "HTTP/1.1 200 OK\r\n\r\n" + std::string(3u << 20, 'z');
    h.answer(flood);
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::too_large);
    CHECK(h.last().status == 200);
    CHECK(h.t.socket().closed);
    // read no further than the bound and the one read that crossed it
    CHECK(flood.size() - h.t.socket().unread() <= client_limits{}.max_response_bytes + client_limits{}.read_buffer_bytes);
}

TEST_CASE("EOF in the middle of the body is closed_early") {
    harness h;
    h.post();
    h.t.socket().deliver("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    h.t.socket().deliver_eof();
    h.t.ready();
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::closed_early);
    CHECK(h.t.socket().closed);
}

TEST_CASE("a malformed answer ends malformed and closes") {
    harness h;
    h.post();
    h.answer("SSH-2.0-OpenSSH_9.6\r\n");
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::malformed);
    CHECK(h.t.socket().closed);
}

TEST_CASE("every split of the answer's bytes gives the same outcome") {
    const std::string answers[] = {
        std::string(ok_200),
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
        "HTTP/1.1 410 Gone\r\nContent-Length: 4\r\nConnection: close\r\n\r\ngone",
    };
    for (const std::string& answer : answers) {
        CAPTURE(answer);
        harness whole;
        whole.post();
        whole.answer(answer);
        REQUIRE(whole.done.outcomes.size() == 1);
        for (std::size_t split = 1; split < answer.size(); ++split) {
            CAPTURE(split);
            harness h;
            h.post();
            h.answer(answer.substr(0, split));
            h.answer(answer.substr(split));
            REQUIRE(h.done.outcomes.size() == 1);
            CHECK(h.last() == whole.last());
        }
        harness bytewise;
        bytewise.post();
        bytewise.t.socket().read_chunk = 1;
        bytewise.answer(answer);
        REQUIRE(bytewise.done.outcomes.size() == 1);
        CHECK(bytewise.last() == whole.last());
    }
}

TEST_CASE("send never reports from within, even with an answer already waiting") {
    harness h;
    h.post();
    h.answer(ok_200);
    h.t.socket().deliver(ok_200);   // stray bytes arrive on the kept connection, unread yet
    h.c.send(hook(), deadline);
    CHECK(h.done.outcomes.size() == 1);
    CHECK(h.t.posted == 1);
}

TEST_CASE("the callback may send the next request") {
    harness h;
    h.done.then = [&] { h.c.send(hook(), deadline); };
    h.post();
    h.answer(ok_200);
    CHECK(h.c.busy());
    h.t.ready();
    h.answer(ok_200);
    REQUIRE(h.done.outcomes.size() == 2);
    CHECK(h.last().reused);
}

TEST_CASE("a kept connection the receiver closes while idle is closed and the next send reconnects") {
    harness h;
    h.post();
    h.answer(ok_200);
    h.t.socket().deliver_eof();
    h.t.ready();
    CHECK(h.t.socket().closed);
    CHECK_FALSE(h.c.connected());
    h.post();
    h.answer(ok_200);
    CHECK(h.t.sockets.size() == 2);
    CHECK(h.last().status == 200);
}

TEST_CASE("a kept connection closed as the request goes out sends it once more on a new connection") {
    harness h;
    h.post();
    h.answer(ok_200);
    h.c.send(hook("second"), deadline);
    h.t.socket().deliver_eof();
    h.t.ready();   // writes the request, then reads the close
    REQUIRE(h.t.sockets.size() == 2);
    CHECK(h.done.outcomes.size() == 1);
    h.t.connected();
    h.answer(ok_200);
    REQUIRE(h.done.outcomes.size() == 2);
    CHECK(h.last().status == 200);
    CHECK(h.t.socket().written.ends_with("second"));
}

TEST_CASE("a new connection closed before any answer is closed_early, not sent again") {
    harness h;
    h.post();
    h.t.socket().deliver_eof();
    h.t.ready();
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().error == client_error::closed_early);
    CHECK(h.t.sockets.size() == 1);
}

TEST_CASE("an answer before the whole request was sent is reported and the connection closed") {
    harness h;
    const std::string body(1000, 'b');  // borrowed by the connection until the exchange ends
    h.c.send(hook(body), deadline);
    h.t.socket().set_window(100);
    h.t.connected();
    h.answer("HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n");
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().status == 413);
    CHECK(h.t.socket().closed);
}

TEST_CASE("bytes after the answer close the connection") {
    harness h;
    h.post();
    h.answer(std::string(ok_200) + "HTTP/1.1 200 OK\r\n");
    REQUIRE(h.done.outcomes.size() == 1);
    CHECK(h.last().status == 200);
    CHECK(h.t.socket().closed);
}
