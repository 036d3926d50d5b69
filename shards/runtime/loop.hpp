// loop: one shard's event loop — an Asio io_context driven one round at a time by its own thread.
//
// A round: the loop enters it (reads the clock once, tells its round_observer, which begins the
// shard's reader epoch), runs every ready handler (io_context::poll), runs the owner's step
// (drain queues, commit writes, …), and ends it. A round that did nothing sleeps in the reactor
// until I/O, the tick or wake() — and the handler that ends the sleep runs inside a new round,
// because every handler is bound to the loop (bind()/post()): entering a round happens in one
// place, enter_round(), and nowhere else.
//
// Contract
// - Everything runs on the loop's thread, except wake() (any thread) and is_sleeping() (any
//   thread: the cross-shard mailboxes read it to decide whether a receiver needs an eventfd write).
// - REQUIRES: every handler given to io() is wrapped with bind() (or posted with post()); a
//   handler that is not runs outside a round: PERCORE_DEBUG_ASSERT in in_round() users catch it.
// - Sleep protocol (pairs with mailboxes::flush): the loop marks itself sleeping, issues a seq_cst
//   fence, then asks has_work() (the owner's and its source's) once more before it blocks; a sender pushes, fences, and wakes a
//   receiver it sees sleeping. Either the receiver sees the message or the sender sees it asleep.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "shards/runtime/round_clock.hpp"

namespace percore::runtime {

// Readiness the loop collects itself each round, outside Asio's reactor (the poller).
class round_source {
public:
    // Handles what is ready now without blocking; returns how much.
    virtual std::size_t poll() = 0;
    // Before the loop sleeps: make readiness end the sleep (one Asio wait).
    virtual void arm() = 0;
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
    // Every tick_interval, inside a round.
    virtual void tick() = 0;
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
    boost::asio::io_context& io() { return io_; }
    const round_clock& clock() const { return clock_; }
    bool in_round() const { return in_round_; }

    // A handler that enters the round before it runs.
    template <class F>
    auto bind(F&& f) {
        return [this, f = std::forward<F>(f)](auto&&... args) mutable {
            enter_round();
            f(std::forward<decltype(args)>(args)...);
        };
    }
    template <class F>
    void post(F&& f) {
        boost::asio::post(io_, bind(std::forward<F>(f)));
    }

    // The owner whose observer hooks every round calls; before the first round (start-up work
    // done in a round, such as recovery and the first accepts, is observed too).
    void attach(loop_owner& owner) { owner_ = &owner; }
    // A source every round polls and the loop arms before it sleeps (one: the poller).
    void add_source(round_source& s) { source_ = &s; }
    // Runs rounds until the owner is finished(). REQUIRES: attached; on the loop's own thread, once.
    void run();
    // Outside run(): enter a round to do setup work that reads snapshots (start-up).
    void enter_round();
    void end_round();

    // Any thread: make a sleeping loop run a round. No syscall is needed when it is not sleeping,
    // but callers that cannot tell may call it anyway (an eventfd write, ~1 µs).
    void wake();
    bool is_sleeping() const { return sleeping_.load(std::memory_order_relaxed); }

private:
    void sleep();
    void arm_wake();
    void arm_tick();

    unsigned shard_;
    boost::asio::io_context io_;
    round_clock clock_;
    loop_owner* owner_ = nullptr;
    round_source* source_ = nullptr;
    bool in_round_ = false;
    int wake_fd_ = -1;
    boost::asio::posix::stream_descriptor wake_descriptor_;
    boost::asio::steady_timer tick_;
    alignas(64) std::atomic<bool> sleeping_{false};
};

}  // namespace percore::runtime
