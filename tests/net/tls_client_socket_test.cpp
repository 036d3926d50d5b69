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
    std::vector<std::uint64_t> body_bytes;
    int system_error = 0;
    void on_exchange_done(const client_outcome& o) override {
        body_bytes.push_back(o.body_bytes);
        errors.push_back(o.error);
        statuses.push_back(o.status);
        bodies.emplace_back(o.body);
        reused.push_back(o.reused);
        system_error = o.system_error;
    }
};

bool contains(std::string_view haystack, std::string_view needle) { return haystack.find(needle) != std::string_view::npos; }

// A listening socket on 127.0.0.1 (an ephemeral port) whose connections a tls_server answers,
// stepped by step(): accept, handshake, read what has come into `got`, send what answer() queued.
struct https_receiver {
    crypto::tls_server& server;
    int listen_fd = -1;
    int conn_fd = -1;
    socket_address address;
    crypto::tls_connection tls;
    crypto::tls_status handshake = crypto::tls_status::want_read;
    int accepted = 0;
    std::string got;
    std::string outbox;              // the answer being sent
    std::size_t out_taken = 0;       // its bytes the library took
    bool out_pending = false;        // not all sent yet

    // receive_buffer: SO_RCVBUF of the accepted sockets (0: the system's), small to make the
    // client's writes wait for the receiver.
    explicit https_receiver(crypto::tls_server& s, int receive_buffer = 0) : server(s) {
        listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        REQUIRE(listen_fd >= 0);
        if (receive_buffer > 0)
            REQUIRE(::setsockopt(listen_fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer) == 0);
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
        if (handshake != crypto::tls_status::ok) return;
        ct::read_until_blocked(tls, got);
        if (out_pending) send_some();
    }
    // As crypto/tls.hpp says: the untaken rest again, or flush() once all was taken, until ok.
    void send_some() {
        crypto::tls_status st;
        if (out_taken < outbox.size()) {
            const crypto::tls_io w = tls.write(std::span<const char>(outbox.data() + out_taken, outbox.size() - out_taken));
            out_taken += w.bytes;
            st = w.status;
        } else {
            st = tls.flush();
        }
        REQUIRE_MESSAGE((st == crypto::tls_status::ok || st == crypto::tls_status::want_write ||
                         st == crypto::tls_status::want_read), tls.last_error());
        out_pending = !(st == crypto::tls_status::ok && out_taken == outbox.size());
    }
    void answer(std::string_view bytes) {
        outbox = bytes;
        out_taken = 0;
        out_pending = true;
        send_some();
    }
};

// This process's end of the loopback connection whose other end is `accepted` (-1 when none).
int local_end_of(int accepted) {
    sockaddr_in peer{}, local{};
    socklen_t size = sizeof peer;
    REQUIRE(::getpeername(accepted, reinterpret_cast<sockaddr*>(&peer), &size) == 0);
    for (int fd = 0; fd < 4096; ++fd) {
        size = sizeof local;
        if (fd != accepted && ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0 &&
            local.sin_family == AF_INET && local.sin_port == peer.sin_port && local.sin_addr.s_addr == peer.sin_addr.s_addr)
            return fd;
    }
    return -1;
}

struct fixture {
    runtime::loop loop{0};
    runtime::poller poller{loop};
    ct::temp_dir dir;
    ct::certificate_authority authority = ct::make_certificate_authority(dir, "receiver");
    crypto::tls_server server = make_server();
    https_receiver rx;

    explicit fixture(int receive_buffer = 0) : rx(server, receive_buffer) { loop.enter_round(); }
    ~fixture() { loop.end_round(); }

    crypto::tls_server make_server() {
        auto made = crypto::make_tls_server(authority.leaf.cert, authority.leaf.key);
        if (!made) FAIL(ct::text(made.error()));
        return std::move(*made);
    }

    // Runs posted handlers, the poller's turns and the receiver's step until `done` (at most ~5 s).
    void pump(const std::function<bool()>& done) {
        for (int i = 0; i < 5000 && !done(); ++i) {
            loop.run_posted();
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

TEST_CASE("a request and a response of many records each cross whole, the request waiting for the receiver and the response over several turns") {
    fixture f(8 * 1024);
    const crypto::tls_client client = trusting(f.authority.ca.cert);
    tls_client_socket socket(f.loop, f.poller, f.rx.address, client, "127.0.0.1");
    recorder done;
    client_limits limits;
    limits.read_buffer_bytes = 512;   // many reads per record: past max_tls_reads_per_turn in one turn
    client_connection c(socket, done, limits);
    const std::string body(600 * 1024, 'b');   // about 38 records
    client_request r = hook();
    r.host = "127.0.0.1";
    r.body = body;
    const std::string head = "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nwebhook-id: msg_1\r\nContent-Length: 614400\r\n\r\n";

    c.send(r, far_deadline);
    f.pump([&] { return f.rx.accepted == 1; });   // before the handshake's end, so before the request
    // Small buffers both ways: the request's records wait for the receiver (pending_output, flush).
    const int client_end = local_end_of(f.rx.conn_fd);
    REQUIRE(client_end >= 0);
    const int send_buffer = 16 * 1024;
    REQUIRE(::setsockopt(client_end, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer) == 0);
    f.pump([&] { return f.rx.got.size() >= head.size() + body.size(); });
    CHECK(f.rx.got == head + body);
    const std::string answer(100 * 1024, 'a');
    f.rx.answer("HTTP/1.1 200 OK\r\nContent-Length: 102400\r\n\r\n" + answer);
    f.pump([&] { return done.errors.size() == 1; });
    CHECK(done.errors[0] == client_error::none);
    CHECK(done.statuses[0] == 200);
    CHECK(done.body_bytes[0] == answer.size());
    CHECK(done.bodies[0] == answer.substr(0, limits.max_kept_body_bytes));
    CHECK(c.connected());   // the response was read to its end: the connection is kept
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
