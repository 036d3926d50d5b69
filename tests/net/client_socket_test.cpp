// The client over real loopback sockets: a client_socket watched by a runtime::poller, the loop's
// rounds pumped by hand (as tests/shards/poller_test.cpp does), the receiver a plain listening
// socket the test answers itself. Plus resolve_numeric().
#include <doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "net/client_connection.hpp"
#include "net/client_socket.hpp"
#include "net/resolve.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

using namespace percore;
using namespace percore::net;

namespace {

struct recorder final : client_events {
    std::vector<client_error> errors;
    std::vector<int> statuses;
    std::vector<std::string> bodies;
    std::vector<bool> reused;
    int system_error = 0;
    void on_exchange_done(const client_outcome& o) override {
        errors.push_back(o.error);
        statuses.push_back(o.status);
        bodies.emplace_back(o.body);
        reused.push_back(o.reused);
        system_error = o.system_error;
    }
};

// A listening socket on 127.0.0.1, an ephemeral port.
struct receiver {
    int listen_fd = -1;
    int conn_fd = -1;
    socket_address address;

    receiver() {
        listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(listen_fd >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(listen_fd, 4) == 0);
        socklen_t size = sizeof address.storage;
        REQUIRE(::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&address.storage), &size) == 0);
        address.size = size;
    }
    ~receiver() {
        if (conn_fd >= 0) ::close(conn_fd);
        if (listen_fd >= 0) ::close(listen_fd);
    }
    void accept() {
        if (conn_fd >= 0) ::close(conn_fd);
        conn_fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        REQUIRE(conn_fd >= 0);
    }
    // Takes what has come without waiting; true once `count` bytes of request are in `got`.
    std::string got;
    bool has(std::size_t count) {
        char buffer[4096];
        for (;;) {
            pollfd p{conn_fd, POLLIN, 0};
            if (got.size() >= count || ::poll(&p, 1, 0) != 1) break;
            const ssize_t n = ::recv(conn_fd, buffer, sizeof buffer, 0);
            if (n <= 0) break;
            got.append(buffer, static_cast<std::size_t>(n));
        }
        return got.size() >= count;
    }
    void answer(std::string_view bytes) {
        REQUIRE(::send(conn_fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
    }
};

struct fixture {
    runtime::loop loop{0};
    runtime::poller poller{loop};
    fixture() { loop.enter_round(); }
    ~fixture() { loop.end_round(); }

    // Runs posted handlers and the poller's turns until `done` (at most ~5 s).
    void pump(const std::function<bool()>& done) {
        for (int i = 0; i < 5000 && !done(); ++i) {
            loop.run_posted();
            if (poller.poll() == 0 && !done()) ::usleep(1000);
        }
        REQUIRE(done());
    }
};

const header_field hook_fields[] = {{"webhook-id", "msg_1"}};

client_request hook() {
    client_request r;
    r.target = "/hook";
    r.host = "127.0.0.1";
    r.headers = hook_fields;
    r.body = "{}";
    return r;
}

constexpr std::int64_t far_deadline = 1'000'000'000'000;

}  // namespace

TEST_CASE("a request over a loopback socket gets its 200, and the kept connection carries the next") {
    fixture f;
    receiver rx;
    client_socket socket(f.loop, f.poller, rx.address);
    recorder done;
    client_connection c(socket, done);
    const std::string request = "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nwebhook-id: msg_1\r\nContent-Length: 2\r\n\r\n{}";

    c.send(hook(), far_deadline);
    f.pump([&] { return c.connected(); });
    rx.accept();
    f.pump([&] { return rx.has(request.size()); });
    CHECK(rx.got == request);
    rx.answer("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    f.pump([&] { return done.errors.size() == 1; });
    CHECK(done.errors[0] == client_error::none);
    CHECK(done.statuses[0] == 200);
    CHECK(done.bodies[0] == "ok");

    c.send(hook(), far_deadline);
    f.pump([&] { return rx.has(2 * request.size()); });
    CHECK(rx.got == request + request);
    rx.answer("HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
    f.pump([&] { return done.errors.size() == 2; });
    CHECK(done.statuses[1] == 503);
    CHECK(done.reused[1]);
    CHECK(c.opens() == 1);
}

TEST_CASE("a connect to a closed loopback port ends connect_failed with ECONNREFUSED") {
    fixture f;
    socket_address closed;
    {
        receiver gone;
        closed = gone.address;
    }   // the port is closed now
    client_socket socket(f.loop, f.poller, closed);
    recorder done;
    client_connection c(socket, done);
    c.send(hook(), far_deadline);
    f.pump([&] { return done.errors.size() == 1; });
    CHECK(done.errors[0] == client_error::connect_failed);
    CHECK(done.system_error == ECONNREFUSED);
}

TEST_CASE("numeric hosts resolve without DNS and names do not resolve") {
    const std::optional<socket_address> v4 = resolve_numeric("127.0.0.1", 8080);
    REQUIRE(v4);
    CHECK(v4->family() == AF_INET);
    CHECK(ntohs(reinterpret_cast<const sockaddr_in*>(&v4->storage)->sin_port) == 8080);
    const std::optional<socket_address> v6 = resolve_numeric("[::1]", 443);
    REQUIRE(v6);
    CHECK(v6->family() == AF_INET6);
    CHECK_FALSE(resolve_numeric("localhost", 80));
    CHECK_FALSE(resolve_numeric("hooks.example.com", 80));
    CHECK_FALSE(resolve_numeric("", 80));
}
