// The etcd client's endpoint failover (shards/cluster/etcd_client.hpp) against canned endpoints:
// listening sockets on 127.0.0.1 that answer every request with one fixed HTTP answer (a 503, a
// 404, a body that is not JSON, one too large) or never answer. What a real etcd answers is
// tested against a real one (etcd_client_test.cpp, suite etcd); these are the answers a member in
// trouble gives, which a healthy cluster does not.
#include <doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shards/cluster/etcd_client.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

using namespace percore;
using namespace percore::shards;
using namespace std::chrono_literals;

namespace {

// A listening socket that answers each whole request (head and Content-Length body) with `answer`;
// an empty answer: never answers (the request is read and left).
struct canned_endpoint {
    int listen_fd = -1;
    int port = 0;
    std::string answer;
    std::vector<int> connections;
    std::vector<std::string> pending;
    int requests = 0;

    explicit canned_endpoint(std::string a) : answer(std::move(a)) {
        listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        REQUIRE(listen_fd >= 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        REQUIRE(::listen(listen_fd, 8) == 0);
        socklen_t size = sizeof addr;
        REQUIRE(::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0);
        port = ntohs(addr.sin_port);
    }
    ~canned_endpoint() {
        for (int fd : connections) ::close(fd);
        ::close(listen_fd);
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }

    void serve() {
        for (int fd; (fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0;) {
            connections.push_back(fd);
            pending.emplace_back();
        }
        for (std::size_t i = 0; i < connections.size(); ++i) {
            char buffer[4096];
            for (ssize_t n; (n = ::recv(connections[i], buffer, sizeof buffer, 0)) > 0;)
                pending[i].append(buffer, static_cast<std::size_t>(n));
            if (whole_request(pending[i])) {
                ++requests;
                pending[i].clear();
                if (!answer.empty()) (void)::send(connections[i], answer.data(), answer.size(), MSG_NOSIGNAL);
            }
        }
    }
    static bool whole_request(const std::string& got) {
        const std::size_t head_end = got.find("\r\n\r\n");
        if (head_end == std::string::npos) return false;
        const std::size_t length_at = got.find("Content-Length: ");
        const std::size_t length = length_at < head_end ? std::stoul(got.substr(length_at + 16)) : 0;
        return got.size() >= head_end + 4 + length;
    }
};

std::string http_answer(int status, std::string_view body) {
    return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

const std::string range_ok = http_answer(200, R"({"header":{"revision":"5"},"kvs":[{"key":"L2s=","create_revision":"3","mod_revision":"4","version":"2","value":"dg=="}],"count":"1"})");

struct one_client {
    runtime::loop loop{0};
    runtime::poller poller{loop};
    std::vector<canned_endpoint*> endpoints;
    std::optional<etcd_client> client;

    explicit one_client(std::vector<canned_endpoint*> list) : endpoints(std::move(list)) {
        loop.enter_round();
        std::string urls;
        for (auto* e : endpoints) urls += (urls.empty() ? "" : ",") + e->url();
        auto parsed = parse_cluster_endpoints(urls);
        REQUIRE(parsed.has_value());
        client.emplace(loop, poller, *parsed);
    }
    ~one_client() {
        client.reset();
        loop.end_round();
    }
    // Turns the loop (and the canned endpoints) until `done`, at most 10 s.
    void until(const std::function<bool()>& done) {
        const auto give_up = std::chrono::steady_clock::now() + 10s;
        while (!done() && std::chrono::steady_clock::now() < give_up) {
            loop.end_round();
            loop.enter_round();
            const std::size_t did = loop.run_posted() + poller.poll();
            for (auto* e : endpoints) e->serve();
            client->tick();
            if (did == 0) ::usleep(500);
        }
        REQUIRE(done());
    }
    result<range_answer> range(std::chrono::milliseconds budget = 5000ms) {
        std::optional<result<range_answer>> got;
        client->range("/k", client->now() + budget, [&](result<range_answer> r) { got = std::move(r); });
        until([&] { return got.has_value(); });
        return std::move(*got);
    }
};

}  // namespace

TEST_CASE("a 5xx answer is retried on the next endpoint") {
    canned_endpoint no_leader(http_answer(503, R"({"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14})"));
    canned_endpoint healthy(range_ok);
    one_client c({&no_leader, &healthy});
    auto r = c.range();
    REQUIRE_MESSAGE(r.has_value(), r.error().reason);
    CHECK(r->header.endpoint == 1);
    CHECK(r->kvs.at(0).value == "v");
    CHECK(no_leader.requests == 1);
    CHECK(c.client->failed_tries() == 1);
}

TEST_CASE("a 200 answer that is not etcd's JSON is retried on the next endpoint") {
    canned_endpoint confused(http_answer(200, "<html>proxy</html>"));
    canned_endpoint healthy(range_ok);
    one_client c({&confused, &healthy});
    auto r = c.range();
    REQUIRE_MESSAGE(r.has_value(), r.error().reason);
    CHECK(r->header.endpoint == 1);
}

TEST_CASE("an answer past the bound is not read, and the next endpoint answers") {
    canned_endpoint huge("HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n{");
    canned_endpoint healthy(range_ok);
    one_client c({&huge, &healthy});
    auto r = c.range();
    REQUIRE_MESSAGE(r.has_value(), r.error().reason);
    CHECK(r->header.endpoint == 1);
}

TEST_CASE("a 4xx answer is etcd's refusal: final, with its message, no other endpoint asked") {
    canned_endpoint refusing(http_answer(400, R"({"error":"etcdserver: key is not provided","message":"etcdserver: key is not provided","code":3})"));
    canned_endpoint healthy(range_ok);
    one_client c({&refusing, &healthy});
    auto r = c.range();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().status == 400);
    CHECK(r.error().reason == "etcd: etcdserver: key is not provided");
    CHECK(healthy.requests == 0);
}

TEST_CASE("a try that gets no answer ends after the try timeout, and the next endpoint answers") {
    canned_endpoint silent("");
    canned_endpoint healthy(range_ok);
    one_client c({&silent, &healthy});
    const auto began = std::chrono::steady_clock::now();
    auto r = c.range();
    REQUIRE_MESSAGE(r.has_value(), r.error().reason);
    CHECK(r->header.endpoint == 1);
    CHECK(std::chrono::steady_clock::now() - began >= 1s);   // etcd_try_timeout
}

TEST_CASE("the next call begins at the endpoint that answered last") {
    canned_endpoint no_leader(http_answer(503, "{}"));
    canned_endpoint healthy(range_ok);
    one_client c({&no_leader, &healthy});
    REQUIRE(c.range().has_value());
    REQUIRE(c.range().has_value());
    CHECK(no_leader.requests == 1);
    CHECK(healthy.requests == 2);
}

TEST_CASE("a call whose every endpoint fails ends at its deadline, naming each one's failure") {
    canned_endpoint a(http_answer(503, R"({"message":"etcdserver: no leader"})"));
    canned_endpoint b(http_answer(503, R"({"message":"etcdserver: request timed out"})"));
    one_client c({&a, &b});
    auto r = c.range(400ms);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().status == 0);
    CHECK(r.error().reason.find(a.url() + ": HTTP 503: etcdserver: no leader") != std::string::npos);
    CHECK(r.error().reason.find(b.url() + ": HTTP 503: etcdserver: request timed out") != std::string::npos);
    // 100 ms pauses between rounds: a few rounds in 400 ms, not a busy loop
    CHECK(a.requests >= 2);
    CHECK(a.requests <= 6);
    CHECK(c.client->failed_calls() == 1);
}

TEST_CASE("cluster endpoints are http URLs with a port, none twice") {
    auto two = parse_cluster_endpoints("http://127.0.0.1:2379,http://[::1]:2380");
    REQUIRE(two.has_value());
    REQUIRE(two->size() == 2);
    CHECK((*two)[0].host_field == "127.0.0.1:2379");
    CHECK((*two)[1].host == "[::1]");
    CHECK((*two)[1].port == 2380);
    CHECK_FALSE(parse_cluster_endpoints("").has_value());
    CHECK_FALSE(parse_cluster_endpoints("https://127.0.0.1:2379").has_value());
    CHECK_FALSE(parse_cluster_endpoints("http://127.0.0.1").has_value());
    CHECK_FALSE(parse_cluster_endpoints("http://127.0.0.1:2379/v3").has_value());
    CHECK_FALSE(parse_cluster_endpoints("http://127.0.0.1:2379,").has_value());
    CHECK_FALSE(parse_cluster_endpoints("http://127.0.0.1:2379,http://127.0.0.1:2379").has_value());
    std::string ten;
    for (int i = 0; i < 10; ++i) ten += (i ? "," : "") + std::string("http://127.0.0.1:") + std::to_string(2000 + i);
    CHECK_FALSE(parse_cluster_endpoints(ten).has_value());
}
