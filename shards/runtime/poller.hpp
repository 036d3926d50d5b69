// poller: the shard's own edge-triggered epoll set for connection sockets, nested in the loop, and
// the fair order in which ready connections get their turns.
//
// Asio's reactor re-arms a descriptor with epoll_ctl(MOD) for every async_wait and reads
// speculatively after every event (one failed recv per request: docs/perf); a connection socket
// watched here is added once (EPOLLIN | EPOLLOUT | EPOLLRDHUP, edge-triggered) and removed by its
// close(), so the steady state of a keep-alive connection costs the kernel nothing beyond its
// reads and writes, and an accepted connection one epoll_ctl instead of Asio's ioctl + ADD + DEL.
//
// Fair turns (SPEC §7, "Isolation"): every watcher answers a turn_class() (an opaque number: an
// app's, 0 by default). Ready watchers wait in one FIFO queue per class, and the classes take
// turns round robin with a quantum of one turn (one on_events call), so one class's 64 ready
// connections do not all run before another class's one. Every turns_between_polls turns the
// poller asks epoll again (when turns are still queued) and queues what became ready, so a
// connection of another class that becomes ready behind a long backlog waits about that many
// turns, not the whole backlog. Bounds: shards/runtime/limits.hpp.
//
// Contract
// - One per loop, on the loop's thread; the sockets go into the loop's own epoll set (one set per
//   shard: the loop sleeps in it). The loop polls the poller once per round: epoll_wait with no
//   timeout (at most max_poll_events; skipped when the loop's sleep has just asked), then at most
//   max_turns_per_round turns; turns left over stay queued for the next round and has_work() is
//   true while any are (the loop does not sleep then). wait(): the loop's sleep, one blocking
//   epoll_wait whose readiness is queued for the next round.
// - watch(fd, w): w.on_events(mask) runs inside a round after every edge until fd is closed (a
//   level-triggered fd: in every round that finds it ready); the
//   edges that arrive while w waits in its queue are merged into the mask of its one turn (no edge
//   is lost, no watcher is queued twice). w's class is read when it is queued.
// - A queued watcher whose descriptor was closed (and maybe reused for another connection)
//   meanwhile still gets its turn: watchers tolerate spurious readiness (edge-triggered code must
//   anyway). A watcher destroyed while queued leaves its queue.
// - Cost with one class: per event, a turn_class() call and one compare to find the queue;
//   no allocation (fixed arrays, intrusive links in the watcher); one more epoll_wait per
//   turns_between_polls turns when more than that many are ready.
// - Classes beyond max_turn_queues at once share one more queue (fair against the others; first
//   come, first served inside it).
// - REQUIRES: a watcher outlives the descriptor it watches (transports are kept for reuse).
#pragma once

#include <cstddef>
#include <cstdint>

#include "shards/runtime/limits.hpp"
#include "shards/runtime/loop.hpp"

namespace percore::runtime {

class poller;

class poll_watcher {
public:
    virtual void on_events(std::uint32_t epoll_events) = 0;
    // The class whose turns this watcher's readiness waits in (0: the default class).
    virtual std::uint32_t turn_class() const { return 0; }

protected:
    poll_watcher() = default;
    ~poll_watcher();   // leaves its poller's queue when queued
    poll_watcher(const poll_watcher&) = delete;
    poll_watcher& operator=(const poll_watcher&) = delete;

private:
    friend class poller;
    poller* queued_in_ = nullptr;      // set while the watcher waits for its turn
    poll_watcher* prev_ = nullptr;     // its class queue's links
    poll_watcher* next_ = nullptr;
    std::uint32_t queued_events_ = 0;  // every edge since it was queued
    std::uint16_t queue_ = 0;
};

class poller final : public round_source {
public:
    explicit poller(loop& l);
    ~poller();
    poller(const poller&) = delete;
    poller& operator=(const poller&) = delete;

    // How a watched descriptor reports: each change once (connections), or for as long as it is
    // ready (a listening socket, which takes one connection a turn and is reported again while its
    // backlog holds more).
    enum class trigger : std::uint8_t { edge, level };
    [[nodiscard]] bool watch(int fd, poll_watcher& w, trigger t = trigger::edge);
    // A level-triggered descriptor stops (false) or resumes (true) being reported, as a listener
    // out of descriptors does until its tick retries.
    [[nodiscard]] bool report(int fd, poll_watcher& w, bool on);
    std::size_t poll() override;
    void wait(std::chrono::nanoseconds timeout) override;
    bool has_work() const override { return queued_ > 0; }
    // Watchers waiting for their turn.
    std::size_t queued() const { return queued_; }

private:
    friend class poll_watcher;
    struct turn_queue {
        std::uint32_t turn_class = 0;
        poll_watcher* head = nullptr;
        poll_watcher* tail = nullptr;
    };
    static constexpr std::uint16_t shared_queue = max_turn_queues;   // the classes beyond
    static constexpr std::uint16_t no_queue = 0xffff;
    static constexpr std::size_t queue_count = max_turn_queues + 1;

    std::size_t harvest(std::chrono::nanoseconds timeout);
    void enqueue(poll_watcher& w, std::uint32_t events);
    std::uint16_t queue_for(std::uint32_t turn_class);
    void run_turn();
    void unqueue(poll_watcher& w);
    void release(std::uint16_t q);
    void ring_push(std::uint16_t q);
    std::uint16_t ring_pop();

    loop& loop_;
    bool harvested_ = false;   // the loop's sleep asked epoll: the next poll() need not ask again

    turn_queue queues_[queue_count];
    // The queues in use, in turn order (each at most once); a queue that empties leaves the ring
    // when its turn comes round.
    std::uint16_t ring_[queue_count];
    std::size_t ring_front_ = 0;
    std::size_t ring_size_ = 0;
    std::uint16_t free_[max_turn_queues];   // unused class queues
    std::size_t free_count_ = 0;
    bool shared_in_use_ = false;
    std::uint16_t last_queue_ = no_queue;   // the queue found last (a flood of one class: one compare)
    std::size_t queued_ = 0;
};

}  // namespace percore::runtime
