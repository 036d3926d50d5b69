// queue_cost: what one cross-shard message costs.
//
// 1. Streaming: one thread pushes 20 million shard_messages, another drains them in batches of
//    up to drain_batch_messages, each pinned to its own CPU: nanoseconds per message.
// 2. Ping-pong: a message goes to the other thread, which answers at once; round trips per second
//    (the latency floor of a write that hops to its owner and back, without the wakeup syscall).
// Usage: queue_cost [cpu_a cpu_b]

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cpu_pin.hpp"  // beside this file: perf/ is no include directory (perf/meson.build)
#include "shards/server/shard.hpp"
#include "shards/runtime/limits.hpp"
#include "shards/server/shard_message.hpp"
#include "shards/runtime/spsc_queue.hpp"

using namespace percore::shards;
using percore::runtime::spsc_queue;
using percore::runtime::queue_capacity_messages;
using percore::runtime::drain_batch_messages;
using clock_type = std::chrono::steady_clock;

namespace {

using percore::perf::pin;

double streaming(int cpu_a, int cpu_b, std::uint64_t total) {
    spsc_queue<shard_message> q(queue_capacity_messages);
    std::atomic<bool> go{false};
    std::thread consumer([&] {
        pin(cpu_b);
        std::uint64_t seen = 0, sum = 0;
        while (!go.load()) {
        }
        while (seen < total) seen += q.drain([&](shard_message& m) { sum += m.tag; }, drain_batch_messages);
        if (sum == 42) std::puts("");
    });
    pin(cpu_a);
    go = true;
    auto t0 = clock_type::now();
    shard_message m;
    for (std::uint64_t i = 0; i < total;) {
        m.tag = i;
        if (q.try_push(m)) ++i;
    }
    consumer.join();
    auto ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
    return ns / static_cast<double>(total);
}

double ping_pong(int cpu_a, int cpu_b, std::uint64_t rounds) {
    spsc_queue<shard_message> there(queue_capacity_messages), back(queue_capacity_messages);
    std::thread echo([&] {
        pin(cpu_b);
        std::uint64_t n = 0;
        while (n < rounds)
            n += there.drain([&](shard_message& m) { while (!back.try_push(m)) {} }, drain_batch_messages);
    });
    pin(cpu_a);
    auto t0 = clock_type::now();
    shard_message m;
    for (std::uint64_t i = 0; i < rounds; ++i) {
        m.tag = i;
        while (!there.try_push(m)) {
        }
        while (back.drain([](shard_message&) {}, 1) == 0) {
        }
    }
    echo.join();
    auto ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
    return ns / static_cast<double>(rounds);
}

}  // namespace

int main(int argc, char** argv) {
    int a = argc > 2 ? std::atoi(argv[1]) : 0;
    int b = argc > 2 ? std::atoi(argv[2]) : 1;
    double best_stream = 1e9, best_rtt = 1e9;
    for (int round = 0; round < 5; ++round) {
        double s = streaming(a, b, 20'000'000);
        double r = ping_pong(a, b, 1'000'000);
        std::printf("round %d: streaming %.2f ns/message, ping-pong %.0f ns/round trip\n", round, s, r);
        if (s < best_stream) best_stream = s;
        if (r < best_rtt) best_rtt = r;
    }
    std::printf("{\"streaming_ns_per_message\":%.2f,\"round_trip_ns\":%.0f,\"cpus\":[%d,%d]}\n", best_stream, best_rtt, a, b);
}
