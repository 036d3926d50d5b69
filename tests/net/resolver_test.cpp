// The resolver: names answered on the requesting loop's thread, after resolve() returned; numeric
// hosts without the thread; bounds and cancellation. The loop's rounds are pumped by hand (as
// tests/net/client_socket_test.cpp does). Real lookups use resolver::shared() ("localhost" from
// /etc/hosts; "nonexistent.invalid", which RFC 6761 guarantees fails); the rest a resolver of their
// own whose lookup waits on a gate the test opens.
#include <doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/limits.hpp"
#include "net/resolver.hpp"
#include "shards/runtime/loop.hpp"

using namespace percore;
using namespace percore::net;

namespace {

struct fixture {
    runtime::loop loop{0};
    fixture() { loop.enter_round(); }
    ~fixture() { loop.end_round(); }

    // Runs posted handlers until `done` or `limit` has passed; says which.
    bool pump(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
        const auto end = std::chrono::steady_clock::now() + limit;
        while (!done() && std::chrono::steady_clock::now() < end) {
            loop.run_posted();
            if (!done()) ::usleep(1000);
        }
        return done();
    }
};

// What one callback saw.
struct answers {
    std::vector<resolve_result> results;
    std::vector<std::thread::id> threads;
    resolve_callback callback() {
        return [this](resolve_result r) {
            results.push_back(std::move(r));
            threads.push_back(std::this_thread::get_id());
        };
    }
};

// A lookup that waits until the test opens the gate, then answers 192.0.2.1:port.
struct gate {
    std::mutex mutex;
    std::condition_variable changed;
    bool open = false;
    int entered = 0;

    void let_through() {
        std::lock_guard lock(mutex);
        open = true;
        changed.notify_all();
    }
    bool wait_entered(int count) {
        std::unique_lock lock(mutex);
        return changed.wait_for(lock, std::chrono::seconds(5), [&] { return entered >= count; });
    }
};

resolver_options gated(const std::shared_ptr<gate>& g, std::size_t max_pending = 0) {
    resolver_options o;
    o.max_pending = max_pending;
    o.lookup = [g](const std::string&, std::uint16_t port) -> resolve_result {
        std::unique_lock lock(g->mutex);
        ++g->entered;
        g->changed.notify_all();
        g->changed.wait(lock, [&] { return g->open; });
        return *resolve_numeric("192.0.2.1", port);
    };
    return o;
}

std::uint16_t port_of(const socket_address& a) {
    if (a.family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port);
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
}

bool loopback(const socket_address& a) {
    if (a.family() == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr) >> 24) == 127;
    return a.family() == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr);
}

}  // namespace

TEST_CASE("localhost resolves to a loopback address, delivered on the loop's thread after resolve() returned") {
    fixture f;
    answers got;
    bool returned = false;
    resolve_handle h = resolver::shared().resolve(f.loop, "localhost", 8080, [&](resolve_result r) {
        CHECK(returned);
        got.callback()(std::move(r));
    });
    returned = true;
    CHECK(got.results.empty());
    CHECK(h.pending());
    CHECK(resolver::shared().thread_started());
    REQUIRE(f.pump([&] { return !got.results.empty(); }));
    CHECK_FALSE(h.pending());
    REQUIRE(got.results.size() == 1);
    REQUIRE_MESSAGE(got.results[0].has_value(), got.results[0].error());
    CHECK(loopback(*got.results[0]));
    CHECK(port_of(*got.results[0]) == 8080);
    CHECK(got.threads[0] == std::this_thread::get_id());
}

TEST_CASE("an IP literal is answered through the loop without starting the resolver thread") {
    fixture f;
    resolver own;
    answers got;
    resolve_handle v4 = own.resolve(f.loop, "127.0.0.1", 80, got.callback());
    resolve_handle v6 = own.resolve(f.loop, "[::1]", 443, got.callback());
    CHECK(got.results.empty());  // not from within resolve()
    CHECK(own.pending() == 0);
    REQUIRE(f.pump([&] { return got.results.size() == 2; }));
    REQUIRE(got.results[0].has_value());
    CHECK(got.results[0]->family() == AF_INET);
    CHECK(port_of(*got.results[0]) == 80);
    REQUIRE(got.results[1].has_value());
    CHECK(got.results[1]->family() == AF_INET6);
    CHECK(port_of(*got.results[1]) == 443);
    CHECK_FALSE(own.thread_started());
}

TEST_CASE("a name that cannot exist answers an error naming it") {
    fixture f;
    answers got;
    resolve_handle h = resolver::shared().resolve(f.loop, "nonexistent.invalid", 80, got.callback());
    // No outside network here: it fails at once. A CI box with an unreachable DNS server waits
    // out resolv.conf's timeouts (5 s x 2 by default).
    REQUIRE(f.pump([&] { return !got.results.empty(); }, std::chrono::seconds(40)));
    REQUIRE_FALSE(got.results[0].has_value());
    CHECK(got.results[0].error().find("nonexistent.invalid") != std::string::npos);
}

TEST_CASE("hosts empty, with a NUL or longer than 253 bytes are refused without the thread") {
    fixture f;
    resolver own;
    answers got;
    resolve_handle a = own.resolve(f.loop, "", 80, got.callback());
    resolve_handle b = own.resolve(f.loop, std::string("local\0host", 10), 80, got.callback());
    resolve_handle c = own.resolve(f.loop, std::string(max_host_bytes + 1, 'a'), 80, got.callback());
    CHECK(got.results.empty());
    REQUIRE(f.pump([&] { return got.results.size() == 3; }));
    for (const resolve_result& r : got.results) {
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error() == "invalid host name");
    }
    CHECK_FALSE(own.thread_started());
}

TEST_CASE("a cancelled request's callback never runs, whether queued, being looked up or already posted") {
    fixture f;
    auto g = std::make_shared<gate>();
    resolver own(gated(g));
    answers got;
    resolve_handle in_flight = own.resolve(f.loop, "first.test", 80, got.callback());
    REQUIRE(g->wait_entered(1));
    resolve_handle queued = own.resolve(f.loop, "second.test", 80, got.callback());
    CHECK(own.pending() == 2);
    queued.cancel();
    CHECK(own.pending() == 1);  // it left the queue
    CHECK_FALSE(queued.pending());
    in_flight = resolve_handle();  // destroying (here: replacing) a handle cancels too
    {
        resolve_handle posted = own.resolve(f.loop, "127.0.0.1", 80, got.callback());
    }  // its answer is already posted to the loop
    g->let_through();
    REQUIRE(f.pump([&] { return own.pending() == 0; }));
    f.pump([] { return false; }, std::chrono::milliseconds(50));
    CHECK(got.results.empty());
    CHECK(g->entered == 1);  // the queued name was never looked up
}

TEST_CASE("past the pending bound a request is refused at once with resolver busy, and a slow lookup blocks no loop") {
    fixture f;
    auto g = std::make_shared<gate>();
    resolver own(gated(g, 2));
    answers got;
    resolve_handle one = own.resolve(f.loop, "one.test", 81, got.callback());
    resolve_handle two = own.resolve(f.loop, "two.test", 82, got.callback());
    resolve_handle three = own.resolve(f.loop, "three.test", 83, got.callback());
    CHECK(got.results.empty());
    REQUIRE(f.pump([&] { return got.results.size() == 1; }));  // while both lookups wait
    REQUIRE_FALSE(got.results[0].has_value());
    CHECK(got.results[0].error() == "resolver busy");
    CHECK(own.pending() == 2);
    g->let_through();
    REQUIRE(f.pump([&] { return got.results.size() == 3; }));
    REQUIRE(got.results[1].has_value());
    CHECK(port_of(*got.results[1]) == 81);
    REQUIRE(got.results[2].has_value());
    CHECK(port_of(*got.results[2]) == 82);
    CHECK(own.resolve(f.loop, "four.test", 84, got.callback()).pending());  // room again
}

TEST_CASE("stop() does not wait out a hung lookup, and a stopped resolver refuses at once") {
    fixture f;
    auto g = std::make_shared<gate>();
    answers got;
    resolver own(gated(g));
    resolve_handle hung = own.resolve(f.loop, "hung.test", 80, got.callback());
    REQUIRE(g->wait_entered(1));
    const auto began = std::chrono::steady_clock::now();
    own.stop();
    CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(2));
    resolve_handle late = own.resolve(f.loop, "late.test", 80, got.callback());
    REQUIRE(f.pump([&] { return got.results.size() == 1; }));
    REQUIRE_FALSE(got.results[0].has_value());
    CHECK(got.results[0].error() == "resolver stopped");
    g->let_through();  // the detached thread ends; it posts nothing
    REQUIRE(f.pump([&] { return own.pending() == 0; }));
    f.pump([] { return false; }, std::chrono::milliseconds(50));
    CHECK(got.results.size() == 1);
}

TEST_CASE("stop() joins an idle thread at once") {
    fixture f;
    auto g = std::make_shared<gate>();
    g->let_through();
    resolver own(gated(g));
    answers got;
    resolve_handle h = own.resolve(f.loop, "idle.test", 80, got.callback());
    REQUIRE(f.pump([&] { return got.results.size() == 1; }));
    const auto began = std::chrono::steady_clock::now();
    own.stop();
    CHECK(std::chrono::steady_clock::now() - began < resolver_stop_grace);
}
