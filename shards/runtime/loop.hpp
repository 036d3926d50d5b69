// loop: one shard's event loop — the shard's own epoll set, driven one round at a time by its own
// thread, with an Asio io_context kept only as the queue of posted handlers.
//
// A round: the loop enters it (reads the clock once, tells its round_observer, which begins the
// shard's reader epoch), runs the tick when it is due, runs every posted handler, lets its source
// (the poller) serve the sockets that are ready, runs the owner's step (drain queues, commit
// writes, …), and ends it. Then it sleeps in one epoll_wait on the loop's set (unless work is left,
// or the round did work and exchanged messages with other shards: then one more round first),
// bounded by the next tick; the sockets' readiness, wake() (an eventfd in the same set) or the
// tick end it, and what it returned is served in the next round. Entering a round happens in one
// place, enter_round(), and nowhere else.
//
// Why not Asio's reactor: it was a second epoll set around the poller's, and every round asked it
// for readiness (io_context::poll = one epoll_wait(0)) besides the poller's own, and every sleep
// re-armed a wait on the nested set (epoll_ctl): with a client that keeps a shard busy but not
// saturated, that was one epoll_wait per request (docs/perf/README.md, "one set"). No Asio
// descriptor, socket or timer is made on the io_context: it then never builds a reactor, and
// run_posted() is a queue drain without a system call.
//
// Contract
// - Everything runs on the loop's thread, except wake(), post() (any thread) and is_sleeping()
//   (any thread: the cross-shard mailboxes read it to decide whether a receiver needs an eventfd
//   write).
// - epoll_fd(): the set the poller adds the sockets to (data.ptr: the watcher, never null; the
//   loop's own eventfd is the entry whose pointer is null). wait_events() is the one epoll_wait.
// - post(f): f runs inside a later round of this loop. From another thread it wakes a sleeping
//   loop (the same protocol as the mailboxes' below).
// - Sleep protocol (pairs with mailboxes::flush and post): the loop marks itself sleeping, issues a
//   seq_cst fence, then asks has_work() (the owner's, its source's, posted handlers) once more
//   before it blocks; a sender pushes, fences, and wakes a receiver it sees sleeping. Either the
//   receiver sees the work or the sender sees it asleep.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <chrono>
#include <span>
#include <utility>

#include <sys/epoll.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "shards/runtime/round_clock.hpp"

namespace percore::runtime {

// Readiness the loop collects itself each round, outside Asio's reactor (the poller).
class round_source {
public:
    // Handles what is ready now without blocking; returns how much.
    virtual std::size_t poll() = 0;
    // The loop sleeps: wait at most `timeout` for readiness (loop::wait_events) and keep what came
    // for the next round's poll().
    virtual void wait(std::chrono::nanoseconds timeout) = 0;
    // Work already collected and left for the next round (bounded rounds): the loop does not sleep.
    virtual bool has_work() const = 0;

protected:
    ~round_source() = default;
};

// Told when the loop's thread enters and leaves a round (the composition begins and quiesces the
// shard's reader epoch there).
class round_observer {
public:
    virtual void round_began() = 0;
    virtual void round_ended() = 0;

protected:
    ~round_observer() = default;
};

// What the loop asks its owner each round.
class loop_owner : public round_observer {
public:
    // The round's own work after I/O; returns how much it did (0: nothing).
    virtual std::size_t step() = 0;
    // Checked after the sleeping flag is set and fenced: anything that would make the next round
    // do work (inbound messages, a batch to publish, a backlog). True: do not sleep.
    virtual bool has_work() = 0;
    // Whether the last step() moved messages to or from other shards. A round of work is followed
    // by the loop's wait at once (its epoll_wait standing for the next harvest) unless it did:
    // peers that keep sending would find the loop in that wait and pay a wake-up each, where a
    // busy receiver costs them nothing (mailboxes.hpp).
    virtual bool exchanged_messages() const { return false; }
    // Every tick_interval, inside a round.
    virtual void tick() = 0;
    // The latest time the loop may sleep until (besides the tick), asked before it sleeps; max():
    // no deadline of the owner's. A round follows at that time or soon after (~50 µs).
    virtual clock_type::time_point wake_by() { return clock_type::time_point::max(); }
    // True when the loop should return from run().
    virtual bool finished() = 0;

protected:
    ~loop_owner() = default;
};

class loop {
public:
    explicit loop(unsigned shard_id);
    ~loop();
    loop(const loop&) = delete;
    loop& operator=(const loop&) = delete;

    unsigned shard() const { return shard_; }
    const round_clock& clock() const { return clock_; }
    bool in_round() const { return in_round_; }

    // f runs inside a later round on this loop's thread. Any thread.
    template <class F>
    void post(F&& f) {
        boost::asio::post(io_, [this, f = std::forward<F>(f)]() mutable {
            posts_pending_.fetch_sub(1, std::memory_order_relaxed);
            enter_round();
            f();
        });
        posts_pending_.fetch_add(1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (is_sleeping()) wake();
    }
    // Runs the handlers posted so far (a test's pump; run() does it every round). Loop's thread.
    std::size_t run_posted();

    // The owner whose observer hooks every round calls; before the first round (start-up work
    // done in a round, such as recovery and the first accepts, is observed too).
    void attach(loop_owner& owner) { owner_ = &owner; }
    // A source every round polls and the loop lets wait while it sleeps (one: the poller).
    void add_source(round_source& s) { source_ = &s; }
    // Runs rounds until the owner is finished(). REQUIRES: attached; on the loop's own thread, once.
    void run();
    // Outside run(): enter a round to do setup work that reads snapshots (start-up).
    void enter_round();
    void end_round();

    // The loop's epoll set (the poller adds sockets to it; see the contract above).
    int epoll_fd() const { return epoll_fd_; }
    // One epoll_wait on the set, at most `timeout` (0: do not block). Returns how many entries of
    // `out` are sockets' readiness; the wake eventfd's is consumed here and not returned.
    // Loop's thread.
    std::size_t wait_events(std::span<epoll_event> out, std::chrono::nanoseconds timeout);

    // Any thread: make a sleeping loop run a round. No syscall is needed when it is not sleeping,
    // but callers that cannot tell may call it anyway (an eventfd write, ~1 µs).
    void wake();
    bool is_sleeping() const { return sleeping_.load(std::memory_order_relaxed); }

private:
    void sleep();
    bool tick_if_due();
    std::chrono::nanoseconds time_to_sleep();

    unsigned shard_;
    boost::asio::io_context io_;     // posted handlers only: nothing here builds its reactor
    round_clock clock_;
    clock_type::time_point next_tick_{};
    loop_owner* owner_ = nullptr;
    round_source* source_ = nullptr;
    bool in_round_ = false;
    int epoll_fd_ = -1;
    int wake_fd_ = -1;
    // Posted and not yet run: the sleeping loop's check (a signed count: the handler may run, and
    // count down, before its poster counts up).
    std::atomic<std::int64_t> posts_pending_{0};
    alignas(64) std::atomic<bool> sleeping_{false};
};

}  // namespace percore::runtime
