// poller: the shard's own edge-triggered epoll set for connection sockets, nested in the loop.
//
// Asio's reactor re-arms a descriptor with epoll_ctl(MOD) for every async_wait and reads
// speculatively after every event (one failed recv per request: docs/perf); a connection socket
// watched here is added once (EPOLLIN | EPOLLOUT | EPOLLRDHUP, edge-triggered) and removed by its
// close(), so the steady state of a keep-alive connection costs the kernel nothing beyond its
// reads and writes, and an accepted connection one epoll_ctl instead of Asio's ioctl + ADD + DEL.
//
// Contract
// - One per loop, on the loop's thread. The loop polls it once per round (epoll_wait with no
//   timeout, at most max_events) and, before it sleeps, arms one Asio wait on the epoll descriptor
//   itself, so readiness of any watched socket ends the sleep.
// - watch(fd, w): w.on_events(mask) runs inside a round for every edge until fd is closed. An
//   event may arrive for a watcher whose descriptor was closed and reused earlier in the same
//   batch of events: watchers tolerate spurious readiness (edge-triggered code must anyway).
// - REQUIRES: a watcher outlives the descriptor it watches (transports are kept for reuse).
#pragma once

#include <cstddef>
#include <cstdint>

#include <boost/asio/posix/stream_descriptor.hpp>

#include "shards/runtime/loop.hpp"

namespace percore::runtime {

class poll_watcher {
public:
    virtual void on_events(std::uint32_t epoll_events) = 0;

protected:
    ~poll_watcher() = default;
};

class poller final : public round_source {
public:
    // Events handled per epoll_wait: 256 × 12 B on the stack; a shard with more ready sockets
    // takes them in the next round.
    static constexpr int max_events = 256;

    explicit poller(loop& l);
    ~poller();
    poller(const poller&) = delete;
    poller& operator=(const poller&) = delete;

    [[nodiscard]] bool watch(int fd, poll_watcher& w);
    std::size_t poll() override;
    void arm() override;

private:
    loop& loop_;
    int epoll_fd_ = -1;
    boost::asio::posix::stream_descriptor descriptor_;
    bool armed_ = false;
};

}  // namespace percore::runtime
