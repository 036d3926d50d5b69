#include <doctest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "shards/runtime/spsc_queue.hpp"

using percore::runtime::spsc_queue;

namespace {
struct message {
    std::uint64_t sequence;
    std::uint64_t check;
};
}  // namespace

TEST_CASE("a queue rounds its capacity up to a power of two") {
    spsc_queue<message> q(1000);
    CHECK(q.capacity() == 1024);
}

TEST_CASE("a full queue refuses a push and accepts again after a drain") {
    spsc_queue<message> q(4);
    for (std::uint64_t i = 0; i < 4; ++i) CHECK(q.try_push({i, i}));
    CHECK_FALSE(q.try_push({99, 99}));
    std::uint64_t seen = 0;
    CHECK(q.drain([&](message& m) { CHECK(m.sequence == seen++); }, 2) == 2);
    CHECK(q.try_push({4, 4}));
    CHECK(q.try_push({5, 5}));
    CHECK_FALSE(q.try_push({6, 6}));
    CHECK(q.drain([&](message& m) { CHECK(m.sequence == seen++); }, 100) == 4);
    CHECK(q.empty());
}

TEST_CASE("drain hands out messages in push order and stops at its maximum") {
    spsc_queue<message> q(64);
    for (std::uint64_t i = 0; i < 50; ++i) REQUIRE(q.try_push({i, ~i}));
    std::vector<std::uint64_t> got;
    while (q.drain([&](message& m) { got.push_back(m.sequence); }, 7) > 0) {
    }
    REQUIRE(got.size() == 50);
    for (std::uint64_t i = 0; i < 50; ++i) CHECK(got[i] == i);
}

TEST_CASE("two threads pass two million messages through a small queue without loss or reordering") {
    constexpr std::uint64_t total = 2'000'000;
    spsc_queue<message> q(256);
    std::atomic<bool> failed{false};
    std::thread producer([&] {
        for (std::uint64_t i = 0; i < total;) {
            if (q.try_push({i, i * 0x9e3779b97f4a7c15ull})) ++i;
            else std::this_thread::yield();
        }
    });
    std::uint64_t expected = 0;
    while (expected < total) {
        std::size_t n = q.drain(
            [&](message& m) {
                if (m.sequence != expected || m.check != expected * 0x9e3779b97f4a7c15ull) failed = true;
                ++expected;
            },
            64);
        if (n == 0) std::this_thread::yield();
    }
    producer.join();
    CHECK_FALSE(failed.load());
    CHECK(q.empty());
}
