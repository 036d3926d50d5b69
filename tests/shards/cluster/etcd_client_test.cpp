// The etcd client (shards/cluster/etcd_client.hpp) against a REAL etcd: each case starts a
// three-member cluster on 127.0.0.1 (etcd_cluster.hpp; etcd not installed fails the case), drives
// one loop by hand (as tests/net/client_socket_test.cpp does, a round per turn so that the round
// clock moves) and ends the cluster. Waits are conditions with deadlines, never fixed sleeps.
// Meson suite 'etcd' (not 'unit'): ~20 s of etcd start-ups and lease expiries.
#include <doctest.h>

#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etcd_cluster.hpp"
#include "shards/cluster/etcd_client.hpp"
#include "shards/cluster/etcd_key_poll.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

using namespace percore;
using namespace percore::shards;
using namespace std::chrono_literals;

namespace {

// One loop and its poller, the clients (boards) on it, and the pump.
struct boards {
    runtime::loop loop{0};
    runtime::poller poller{loop};
    std::vector<std::unique_ptr<etcd_client>> clients;
    std::vector<std::function<void()>> tickers;   // more things ticked every turn (a key poll)

    explicit boards(const std::string& endpoints, std::size_t count = 1) {
        loop.enter_round();
        auto list = parse_cluster_endpoints(endpoints);
        REQUIRE(list.has_value());
        for (std::size_t i = 0; i < count; ++i) clients.push_back(std::make_unique<etcd_client>(loop, poller, *list));
    }
    ~boards() {
        for (auto& c : clients) c->stop();
        loop.end_round();
    }
    etcd_client& operator[](std::size_t i) { return *clients.at(i); }

    void turn() {
        loop.end_round();
        loop.enter_round();
        std::size_t did = loop.run_posted() + poller.poll();
        for (auto& c : clients) c->tick();
        for (auto& t : tickers) t();
        if (did == 0) ::usleep(1000);
    }
    // Turns until `done`, at most `limit` of wall time: a condition with a deadline.
    void until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
        const auto give_up = std::chrono::steady_clock::now() + limit;
        while (!done() && std::chrono::steady_clock::now() < give_up) turn();
        REQUIRE(done());
    }
    // Runs one call (start gets the done to pass) and returns its result; the call's deadline is
    // `budget` from now, the wait a second more.
    template <class T>
    result<T> call(etcd_client& c, const std::function<void(etcd_client::time_point, etcd_client::done<T>)>& start,
                   std::chrono::milliseconds budget = 5000ms) {
        std::optional<result<T>> got;
        start(c.now() + budget, [&got](result<T> r) { got = std::move(r); });
        until([&] { return got.has_value(); }, budget + 1000ms);
        return std::move(*got);
    }

    lease_granted grant(std::size_t board, std::int64_t ttl) {
        auto r = call<lease_granted>((*this)[board], [&](auto deadline, auto done) { (*this)[board].grant(ttl, deadline, done); });
        REQUIRE_MESSAGE(r.has_value(), r.error().reason);
        return *r;
    }
    create_answer create(std::size_t board, const std::string& key, const std::string& value, std::int64_t lease) {
        auto r = call<create_answer>((*this)[board], [&](auto deadline, auto done) {
            (*this)[board].create_if_absent(key, value, lease, deadline, done);
        });
        REQUIRE_MESSAGE(r.has_value(), r.error().reason);
        return *r;
    }
    range_answer range(std::size_t board, const std::string& key) {
        auto r = call<range_answer>((*this)[board], [&](auto deadline, auto done) { (*this)[board].range(key, deadline, done); });
        REQUIRE_MESSAGE(r.has_value(), r.error().reason);
        return *r;
    }
};

const std::string leader_key = "/percore/g1/leader";

}  // namespace

TEST_CASE("a lease is granted, kept alive, and once revoked a keepalive says it is gone") {
    test::etcd_cluster cluster;
    boards b(cluster.endpoints());
    const lease_granted lease = b.grant(0, 6);
    CHECK(lease.id > 0);
    CHECK(lease.ttl_seconds == 6);
    auto kept = b.call<lease_kept>(b[0], [&](auto deadline, auto done) { b[0].keep_alive(lease.id, deadline, done); });
    REQUIRE_MESSAGE(kept.has_value(), kept.error().reason);
    CHECK(kept->ttl_seconds == 6);
    auto revoked = b.call<write_answer>(b[0], [&](auto deadline, auto done) { b[0].revoke(lease.id, deadline, done); });
    REQUIRE_MESSAGE(revoked.has_value(), revoked.error().reason);
    auto gone = b.call<lease_kept>(b[0], [&](auto deadline, auto done) { b[0].keep_alive(lease.id, deadline, done); });
    REQUIRE_MESSAGE(gone.has_value(), gone.error().reason);
    CHECK(gone->ttl_seconds == 0);
    // revoking what is gone already succeeds: it is what revoking asks for
    auto again = b.call<write_answer>(b[0], [&](auto deadline, auto done) { b[0].revoke(lease.id, deadline, done); });
    CHECK(again.has_value());
}

TEST_CASE("create-if-absent succeeds once, and the second board sees the first's value and create revision") {
    test::etcd_cluster cluster;
    boards b(cluster.endpoints(), 2);
    const lease_granted first = b.grant(0, 6);
    const lease_granted second = b.grant(1, 6);
    const create_answer won = b.create(0, leader_key, "b1 http://127.0.0.1:9001", first.id);
    CHECK(won.succeeded);
    CHECK(won.current.create_revision == won.header.revision);
    CHECK(won.current.lease == first.id);
    const create_answer lost = b.create(1, leader_key, "b2 http://127.0.0.1:9002", second.id);
    CHECK_FALSE(lost.succeeded);
    CHECK(lost.current.value == "b1 http://127.0.0.1:9001");
    CHECK(lost.current.create_revision == won.current.create_revision);
    CHECK(lost.current.lease == first.id);
}

TEST_CASE("a key under a lease vanishes once the lease expires") {
    test::etcd_cluster cluster;
    boards b(cluster.endpoints());
    const lease_granted lease = b.grant(0, 2);   // etcd's shortest (limits.hpp)
    REQUIRE(b.create(0, leader_key, "b1", lease.id).succeeded);
    REQUIRE(b.range(0, leader_key).kvs.size() == 1);
    // expired after its 2 s; etcd's lessor checks every 500 ms, and the revoke goes through raft
    bool vanished = false;
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!vanished && std::chrono::steady_clock::now() < give_up) {
        vanished = b.range(0, leader_key).kvs.empty();
        if (!vanished) b.until([&, until = b[0].now() + 100ms] { return b[0].now() >= until; }, 1s);
    }
    CHECK(vanished);
    auto gone = b.call<lease_kept>(b[0], [&](auto deadline, auto done) { b[0].keep_alive(lease.id, deadline, done); });
    REQUIRE_MESSAGE(gone.has_value(), gone.error().reason);
    CHECK(gone->ttl_seconds == 0);
}

TEST_CASE("a conditional delete does not remove a successor's key") {
    test::etcd_cluster cluster;
    boards b(cluster.endpoints(), 2);
    const lease_granted first = b.grant(0, 6);
    const create_answer old_leader = b.create(0, leader_key, "b1", first.id);
    REQUIRE(old_leader.succeeded);
    // the old leader's key goes (its lease revoked), a successor creates the key again
    REQUIRE(b.call<write_answer>(b[0], [&](auto d, auto done) { b[0].revoke(first.id, d, done); }).has_value());
    const lease_granted second = b.grant(1, 6);
    const create_answer successor = b.create(1, leader_key, "b2", second.id);
    REQUIRE(successor.succeeded);
    REQUIRE(successor.current.create_revision > old_leader.current.create_revision);
    // the old leader releases what it believes is its key: nothing is deleted
    auto released = b.call<delete_answer>(b[0], [&](auto d, auto done) {
        b[0].delete_if_created(leader_key, old_leader.current.create_revision, d, done);
    });
    REQUIRE_MESSAGE(released.has_value(), released.error().reason);
    CHECK_FALSE(released->deleted);
    const range_answer now = b.range(0, leader_key);
    REQUIRE(now.kvs.size() == 1);
    CHECK(now.kvs[0].value == "b2");
    // the successor's own release deletes it
    auto own = b.call<delete_answer>(b[1], [&](auto d, auto done) {
        b[1].delete_if_created(leader_key, successor.current.create_revision, d, done);
    });
    REQUIRE_MESSAGE(own.has_value(), own.error().reason);
    CHECK(own->deleted);
    CHECK(b.range(0, leader_key).kvs.empty());
}

TEST_CASE("a call moves to the next endpoint when the first is down") {
    test::etcd_cluster cluster;
    boards b(cluster.endpoints());
    cluster.kill_member(0);   // two of three keep the quorum
    const lease_granted lease = b.grant(0, 6);
    // a live member answered (1, or 2 when 1 said "no leader" while the two elected a new one)
    CHECK(lease.header.endpoint != 0);
    CHECK(b[0].failed_tries() >= 1);
    const create_answer created = b.create(0, leader_key, "b1", lease.id);
    CHECK(created.succeeded);
    CHECK(created.header.endpoint != 0);   // the endpoint that answered is where the next call begins
    // a prefix range through the same endpoint sees the key
    auto all = b.call<range_answer>(b[0], [&](auto d, auto done) { b[0].range_prefix("/percore/g1/", d, done); });
    REQUIRE_MESSAGE(all.has_value(), all.error().reason);
    REQUIRE(all->kvs.size() == 1);
    CHECK(all->kvs[0].key == leader_key);
}

TEST_CASE("a call ends at its deadline, naming each endpoint's failure, when no member answers") {
    test::etcd_cluster cluster(1);
    boards b(cluster.endpoints());
    cluster.kill_member(0);
    auto r = b.call<range_answer>(b[0], [&](auto d, auto done) { b[0].range(leader_key, d, done); }, 600ms);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().status == 0);
    CHECK(r.error().reason.find(cluster.client_url(0)) != std::string::npos);
    CHECK(r.error().reason.find("connect") != std::string::npos);
    CHECK(b[0].failed_calls() == 1);
}

TEST_CASE("polling a key sees it created and then deleted") {
    test::etcd_cluster cluster;
    boards b(cluster.endpoints(), 2);
    std::vector<std::optional<etcd_kv>> seen;
    etcd_key_poll poll(b[1], leader_key, 100ms, [&](const std::optional<etcd_kv>& kv) { seen.push_back(kv); });
    b.tickers.push_back([&] { poll.tick(); });
    b.until([&] { return seen.size() == 1; }, 5s);
    CHECK_FALSE(seen[0].has_value());   // the first answer: absent
    const lease_granted lease = b.grant(0, 6);
    const create_answer created = b.create(0, leader_key, "b1", lease.id);
    b.until([&] { return seen.size() == 2; }, 5s);
    REQUIRE(seen[1].has_value());
    CHECK(seen[1]->create_revision == created.current.create_revision);
    auto deleted = b.call<delete_answer>(b[0], [&](auto d, auto done) {
        b[0].delete_if_created(leader_key, created.current.create_revision, d, done);
    });
    REQUIRE(deleted.has_value());
    b.until([&] { return seen.size() == 3; }, 5s);
    CHECK_FALSE(seen[2].has_value());
}
