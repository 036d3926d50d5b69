// The HTTPS client over real loopback sockets: a client_connection over a tls_client_socket
// watched by a runtime::poller, the loop's rounds pumped by hand (as client_socket_test.cpp does);
// the receiver a crypto::tls_server on the accepted socket, stepped in the same thread, serving a
// certificate that a test CA signed for localhost and 127.0.0.1 (tests/crypto/crypto_test_support).
#include <doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/tls.hpp"
#include "crypto/tls_client.hpp"
#include "net/client_connection.hpp"
#include "net/resolve.hpp"
#include "net/tls_client_socket.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"
#include "tests/crypto/crypto_test_support.hpp"

using namespace percore;
using namespace percore::net;
namespace ct = percore::crypto::testing;

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

bool contains(std::string_view haystack, std::string_view needle) { return haystack.find(needle) != std::string_view::npos; }

// A listening socket on 127.0.0.1 (an ephemeral port) whose connections a tls_server answers,
// stepped by step(): accept, handshake, then read what has come into `got`.
struct https_receiver {
    crypto::tls_server& server;
    int listen_fd = -1;
    int conn_fd = -1;
    socket_address address;
    crypto::tls_connection tls;
    crypto::tls_status handshake = crypto::tls_status::want_read;
    int accepted = 0;
    std::string got;

    explicit https_receiver(crypto::tls_server& s) : server(s) {
        listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
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
    ~https_receiver() {
        tls = crypto::tls_connection();
        if (conn_fd >= 0) ::close(conn_fd);
        ::close(listen_fd);
    }
    void step() {
        if (conn_fd < 0) {
            conn_fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (conn_fd < 0) return;
            ++accepted;
            auto made = server.accept(conn_fd);
            REQUIRE(made.has_value());
            tls = std::move(*made);
        }
        if (handshake == crypto::tls_status::want_read || handshake == crypto::tls_status::want_write)
            handshake = tls.handshake();
        if (handshake == crypto::tls_status::ok) ct::read_until_blocked(tls, got);
    }
    void answer(std::string_view bytes) {
        const crypto::tls_io w = tls.write(std::span<const char>(bytes.data(), bytes.size()));
        REQUIRE(w.status == crypto::tls_status::ok);
        REQUIRE(w.bytes == bytes.size());
    }
};

struct fixture {
    runtime::loop loop{0};
    runtime::poller poller{loop};
    ct::temp_dir dir;
    ct::certificate_authority authority = ct::make_certificate_authority(dir, "receiver");
    crypto::tls_server server = make_server();
    https_receiver rx{server};

    fixture() { loop.enter_round(); }
    ~fixture() { loop.end_round(); }

    crypto::tls_server make_server() {
        auto made = crypto::make_tls_server(authority.leaf.cert, authority.leaf.key);
        if (!made) FAIL(ct::text(made.error()));
        return std::move(*made);
    }

    // Runs posted handlers, the poller's turns and the receiver's step until `done` (at most ~5 s).
    void pump(const std::function<bool()>& done) {
        for (int i = 0; i < 5000 && !done(); ++i) {
            loop.io().poll();
            loop.io().restart();
            const std::size_t turns = poller.poll();
            rx.step();
            if (turns == 0 && !done()) ::usleep(1000);
        }
        REQUIRE(done());
    }
};

crypto::tls_client trusting(const std::string& ca_file) {
    auto client = crypto::make_tls_client(ca_file);
    if (!client) FAIL(ct::text(client.error()));
    return std::move(*client);
}

const header_field hook_fields[] = {{"webhook-id", "msg_1"}};

client_request hook() {
    client_request r;
    r.target = "/hook";
    r.host = "localhost";
    r.headers = hook_fields;
    r.body = "{}";
    return r;
}

constexpr std::int64_t far_deadline = 1'000'000'000'000;

}  // namespace

TEST_CASE("a request to an https receiver that the test CA vouches for gets its 200, and the kept connection carries the next") {
    fixture f;
    const crypto::tls_client client = trusting(f.authority.ca.cert);
    tls_client_socket socket(f.loop, f.poller, f.rx.address, client, "localhost");
    recorder done;
    client_connection c(socket, done);
    const std::string request = "POST /hook HTTP/1.1\r\nHost: localhost\r\nwebhook-id: msg_1\r\nContent-Length: 2\r\n\r\n{}";

    c.send(hook(), far_deadline);
    f.pump([&] { return f.rx.got.size() >= request.size(); });
    CHECK(c.connected());
    CHECK(f.rx.got == request);
    CHECK(f.rx.tls.info().alpn == "http/1.1");
    f.rx.answer("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    f.pump([&] { return done.errors.size() == 1; });
    CHECK(done.errors[0] == client_error::none);
    CHECK(done.statuses[0] == 200);
    CHECK(done.bodies[0] == "ok");
    CHECK(socket.tls_error().empty());

    c.send(hook(), far_deadline);
    f.pump([&] { return f.rx.got.size() >= 2 * request.size(); });
    CHECK(f.rx.got == request + request);
    f.rx.answer("HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
    f.pump([&] { return done.errors.size() == 2; });
    CHECK(done.errors[1] == client_error::none);
    CHECK(done.statuses[1] == 503);
    CHECK(done.reused[1]);
    CHECK(c.opens() == 1);
    CHECK(f.rx.accepted == 1);
}

TEST_CASE("a receiver whose certificate is for another name ends the exchange tls_failed, and the reason names the verification") {
    fixture f;
    const crypto::tls_client client = trusting(f.authority.ca.cert);
    tls_client_socket socket(f.loop, f.poller, f.rx.address, client, "hooks.example.com");
    recorder done;
    client_connection c(socket, done);

    c.send(hook(), far_deadline);
    f.pump([&] { return done.errors.size() == 1; });
    CHECK(done.errors[0] == client_error::tls_failed);
    CHECK(socket.tls_error() == "certificate verify failed: hostname mismatch (wanted hooks.example.com)");
    CHECK_FALSE(socket.is_open());
    CHECK(f.rx.got.empty());
}

TEST_CASE("a client that trusts only the system's CA certificates refuses the test CA's receiver") {
    fixture f;
    const crypto::tls_client client = trusting("");
    tls_client_socket socket(f.loop, f.poller, f.rx.address, client, "localhost");
    recorder done;
    client_connection c(socket, done);

    c.send(hook(), far_deadline);
    f.pump([&] { return done.errors.size() == 1; });
    CHECK(done.errors[0] == client_error::tls_failed);
    CHECK(contains(socket.tls_error(), "certificate verify failed"));
    CHECK(f.rx.got.empty());
}

TEST_CASE("a tls socket whose TCP connect is refused ends connect_failed, as a plain one does") {
    fixture f;
    socket_address closed;
    {
        https_receiver gone(f.server);
        closed = gone.address;
    }   // the port is closed now
    const crypto::tls_client client = trusting(f.authority.ca.cert);
    tls_client_socket socket(f.loop, f.poller, closed, client, "localhost");
    recorder done;
    client_connection c(socket, done);

    c.send(hook(), far_deadline);
    f.pump([&] { return done.errors.size() == 1; });
    CHECK(done.errors[0] == client_error::connect_failed);
    CHECK(done.system_error == ECONNREFUSED);
    CHECK(socket.tls_error().empty());
}
