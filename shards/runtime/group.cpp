#include "shards/runtime/group.hpp"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <cstdio>
#include <ctime>

#include "shards/runtime/check.hpp"
#include "shards/runtime/limits.hpp"

namespace percore::runtime {

std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int i = 0; i < CPU_SETSIZE; ++i)
            if (CPU_ISSET(i, &set)) cpus.push_back(i);
    }
    if (cpus.empty()) cpus.push_back(0);
    return cpus;
}

group::group(std::vector<loop*> loops, std::vector<int> cpus)
    : loops_(std::move(loops)), cpus_(std::move(cpus)), started_(static_cast<std::ptrdiff_t>(loops_.size())) {
    PERCORE_REQUIRES(loops_.size() <= max_shards);   // none: a server whose shards could not be built
    PERCORE_REQUIRES(!cpus_.empty());
}

group::~group() {
    stop();
    join();
}

namespace {

void pin_and_name(unsigned shard, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    char name[16];
    std::snprintf(name, sizeof name, "percore-s%u", shard);
    pthread_setname_np(pthread_self(), name);
    set_this_shard(shard);
}

}  // namespace

void group::start(std::function<void(unsigned)> body) {
    PERCORE_REQUIRES(threads_.empty());
    unsigned i = 0;
    try {
        for (; i < size(); ++i)
            threads_.emplace_back([this, i, body] {
                pin_and_name(i, cpu_of(i));
                body(i);
            });
    } catch (const std::exception& e) {
        fail("shard " + std::to_string(i) + " cannot start: no thread: " + e.what());
    }
    for (; i < size(); ++i) started_one();  // shards without a thread count as given up
}

int group::wait_started_or_signal() {
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    // Polled: shards count down a latch, and a signal can only be waited for with sigwait here.
    constexpr timespec poll_interval{0, 10'000'000};
    while (!started_.try_wait() && !aborting()) {
        int sig = ::sigtimedwait(&stop_signals, nullptr, &poll_interval);
        if (sig > 0) return sig;
    }
    return 0;
}

void group::stop() {
    stopping_.store(true, std::memory_order_release);
    for (loop* l : loops_) l->wake();
}

void group::join() {
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    threads_.clear();
}

void group::fail(const std::string& why) {
    {
        std::lock_guard lock(failure_mutex_);
        if (failure_.empty()) failure_ = why;
    }
    aborting_.store(true, std::memory_order_release);
    stop();
}

std::string group::failure() const {
    std::lock_guard lock(failure_mutex_);
    return failure_;
}

}  // namespace percore::runtime
