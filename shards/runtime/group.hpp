// group: the shards' threads — one per shard, pinned to its CPU — and the start and stop of them
// all together. Knows nothing of what a shard does.
//
// Contract
// - Built on the main thread with the loops of every shard (they outlive it). start() runs
//   body(i) on thread i, pinned to cpu_of(i), named "percore-s<i>", with this_shard() == i.
// - Start: each body calls started_one() once, when it serves or when it gave up. A body that cannot
//   start calls fail(why): the first reason is kept, and every shard is told to stop at once
//   (aborting() is true: no graceful drain, since a shard that never ran owes answers it will
//   never give). wait_started_or_signal() returns when every shard started, on such a failure,
//   or on SIGTERM/SIGINT (blocked by the caller), which it returns without acting on it.
// - stop() from any thread: stopping() becomes true and every loop is woken; join() waits for the
//   threads.
// - run_on_shard(i, f): f runs on shard i's thread, inside a round, soon (any thread may call).
#pragma once

#include <atomic>
#include <functional>
#include <latch>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "shards/runtime/loop.hpp"

namespace percore::runtime {

// CPUs this process may run on, in order.
std::vector<int> allowed_cpus();

class group {
public:
    group(std::vector<loop*> loops, std::vector<int> cpus);
    ~group();
    group(const group&) = delete;
    group& operator=(const group&) = delete;

    unsigned size() const { return static_cast<unsigned>(loops_.size()); }
    int cpu_of(unsigned shard) const { return cpus_[shard % cpus_.size()]; }
    loop& loop_of(unsigned shard) { return *loops_[shard]; }

    void start(std::function<void(unsigned)> body);
    void started_one() { started_.count_down(); }
    int wait_started_or_signal();

    template <class F>
    void run_on_shard(unsigned shard, F&& f) {
        loops_[shard]->post(std::forward<F>(f));
    }

    void stop();
    void join();
    bool stopping() const { return stopping_.load(std::memory_order_acquire); }

    void fail(const std::string& why);
    std::string failure() const;
    bool aborting() const { return aborting_.load(std::memory_order_acquire); }

private:
    std::vector<loop*> loops_;
    std::vector<int> cpus_;
    std::vector<std::thread> threads_;
    std::latch started_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> aborting_{false};
    mutable std::mutex failure_mutex_;
    std::string failure_;
};

}  // namespace percore::runtime
