// shared_writes: what the writes that more than one shard still makes to one cache line cost
// (docs/perf/shared-writes.md lists every write on the request paths and why these remain).
//
// Each case runs `ops` operations on one thread pinned to cpu_a, then the same on two threads at
// once, pinned to cpu_a and cpu_b, on the same object (as two shards would): nanoseconds per
// operation and thread in thread CPU time, the median of `repeats` runs of each. Two threads on one line cost more than one when the line moves between
// the CPUs' caches on every write; a line of each thread's own costs the same on one thread or two.
//
// Remaining shared (written per request or per connection, only where the app asks for it):
//   rate-limit        app_entry::take_request, an app with a requests_per_second quota (GCRA CAS)
//   connection        app_entry::take_connection + drop_connection (a connection presenting a token)
//   quota-write       app_entry::try_apply + undo of an app with a documents quota (usage mutex)
//   zero-copy-get     document retain + release (a GET of a value of 16 KiB or more, same document)
// Made per shard (for comparison; each thread as its own shard):
//   usage-write       app_entry::try_apply + undo of an app without quota (per-shard line)
//   shared-cas        the usage CAS before (one atomic int64 both threads CAS, as add_within did)
//   own-line-add      an atomic add on a line of the thread's own (the live document count now)
// Usage: shared_writes [cpu_a cpu_b [million_ops [repeats]]]   (defaults: 0 1 1 7)
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cpu_pin.hpp"  // beside this file: perf/ is no include directory (perf/meson.build)
#include "shards/apps/app_registry.hpp"
#include "shards/runtime/check.hpp"
#include "store/document.hpp"

using namespace percore::shards;
using clock_type = std::chrono::steady_clock;  // the rate limit's clock

namespace {

using percore::perf::pin;

// The body gets the thread's number (0, 1: its shard) and the number of operations to run.
using body_fn = std::function<void(unsigned, std::uint64_t)>;

// The calling thread's CPU time in ns: time the thread was preempted (this machine is shared)
// does not count; time it waited for a cache line does.
double thread_cpu_ns() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

double one_thread(int cpu, std::uint64_t ops, const body_fn& body) {
    double ns = 0;
    std::thread t([&] {
        pin(cpu);
        percore::runtime::set_this_shard(0);
        const double t0 = thread_cpu_ns();
        body(0, ops);
        ns = thread_cpu_ns() - t0;
    });
    t.join();
    return ns / static_cast<double>(ops);
}

// Both threads start together (a spin on a flag) and run `ops` each; their mean CPU time counts.
double two_threads(int cpu_a, int cpu_b, std::uint64_t ops, const body_fn& body) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    double ns[2] = {0, 0};
    auto run = [&](unsigned i, int cpu) {
        pin(cpu);
        percore::runtime::set_this_shard(i);
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        const double t0 = thread_cpu_ns();
        body(i, ops);
        ns[i] = thread_cpu_ns() - t0;
    };
    std::thread a(run, 0u, cpu_a), b(run, 1u, cpu_b);
    while (ready.load() < 2) {
    }
    go.store(true, std::memory_order_release);
    a.join();
    b.join();
    return (ns[0] + ns[1]) / 2 / static_cast<double>(ops);
}

// Each figure is the median of `repeats` runs, in thread CPU time. Two threads contend only while
// both run: where other processes share the CPUs, the two-thread figure is a lower bound.
double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void report(const char* name, int cpu_a, int cpu_b, std::uint64_t ops, unsigned repeats, const body_fn& body) {
    std::vector<double> ones, twos;
    for (unsigned r = 0; r < repeats; ++r) {
        ones.push_back(one_thread(cpu_a, ops, body));
        twos.push_back(two_threads(cpu_a, cpu_b, ops, body));
    }
    const double one = median(ones), two = median(twos);
    std::printf("%-14s %9.1f %9.1f %7.2fx\n", name, one, two, two / one);
}

struct alignas(64) own_line {
    std::atomic<std::int64_t> value{0};
};

}  // namespace

int main(int argc, char** argv) {
    const int cpu_a = argc > 2 ? std::atoi(argv[1]) : 0;
    const int cpu_b = argc > 2 ? std::atoi(argv[2]) : 1;
    const std::uint64_t ops = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1) * 1'000'000;
    const unsigned repeats = argc > 4 ? static_cast<unsigned>(std::atoi(argv[4])) : 7;

    app_registry apps(2);
    app_entry* rated = apps.insert("rated");
    app_quota fast;
    fast.requests_per_second = 1'000'000'000;  // one request a nanosecond: every take is admitted
    rated->set_quota(fast);
    app_entry* plain = apps.insert("plain");
    app_entry* quoted = apps.insert("quoted");
    app_quota roomy;
    roomy.documents = 1ull << 40;  // a quota never reached: every write takes the usage mutex and passes
    quoted->set_quota(roomy);
    std::string value(16 * 1024, 'v');
    auto bytes = std::make_unique<char[]>(value.size());
    percore::store::document* doc = percore::store::make_document("app\0key", "application/octet-stream",
                                                                  std::move(bytes), value.size());
    std::atomic<std::int64_t> shared_usage{0};
    own_line lines[2];
    std::atomic<std::uint64_t> sink{0};

    std::printf("shared_writes: %llu M operations per thread, median of %u runs; CPUs %d and %d\n",
                static_cast<unsigned long long>(ops / 1'000'000), repeats, cpu_a, cpu_b);
    std::printf("%-14s %9s %9s %8s\n", "case", "1 thread", "2 threads", "ratio");
    std::printf("%-14s %9s %9s\n", "", "ns/op", "ns/op");
    report("rate-limit", cpu_a, cpu_b, ops, repeats, [&](unsigned, std::uint64_t n) {
        std::uint64_t refused = 0;
        const std::int64_t start = clock_type::now().time_since_epoch().count();
        for (std::uint64_t i = 0; i < n; ++i) refused += rated->take_request(start + static_cast<std::int64_t>(i));
        sink += refused;
    });
    report("connection", cpu_a, cpu_b, ops, repeats, [&](unsigned, std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) {
            if (rated->take_connection()) rated->drop_connection();
        }
    });
    report("quota-write", cpu_a, cpu_b, ops, repeats, [&](unsigned, std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) {
            if (quoted->try_apply(1, 16) == 0) quoted->undo(1, 16);
        }
    });
    report("zero-copy-get", cpu_a, cpu_b, ops, repeats, [&](unsigned, std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) {
            doc->retain();
            doc->release();
        }
    });
    report("usage-write", cpu_a, cpu_b, ops, repeats, [&](unsigned, std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) {
            if (plain->try_apply(1, 16) == 0) plain->undo(1, 16);
        }
    });
    report("shared-cas", cpu_a, cpu_b, ops, repeats, [&](unsigned, std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) {
            std::int64_t now = shared_usage.load(std::memory_order_relaxed);
            while (!shared_usage.compare_exchange_weak(now, now + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {
            }
        }
    });
    report("own-line-add", cpu_a, cpu_b, ops, repeats, [&](unsigned t, std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) lines[t].value.fetch_add(1, std::memory_order_relaxed);
    });
    doc->release();
    return sink.load() == 42 ? 1 : 0;
}
