#include "shards/runtime/poller.hpp"

#include <sys/epoll.h>

#include <utility>

#include "shards/runtime/check.hpp"
#include "shards/runtime/loop.hpp"

namespace percore::runtime {

poll_watcher::~poll_watcher() {
    if (queued_in_) queued_in_->unqueue(*this);
}

poller::poller(loop& l) : loop_(l) {
    for (std::size_t i = 0; i < max_turn_queues; ++i)
        free_[free_count_++] = static_cast<std::uint16_t>(max_turn_queues - 1 - i);
    l.add_source(*this);
}

// Watchers still queued forget this poller (they may outlive it).
poller::~poller() {
    for (turn_queue& q : queues_)
        for (poll_watcher* w = q.head; w; w = w->next_) w->queued_in_ = nullptr;
}

bool poller::watch(int fd, poll_watcher& w, trigger t) {
    epoll_event ev{};
    ev.events = t == trigger::edge ? std::uint32_t{EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET} : std::uint32_t{EPOLLIN};
    ev.data.ptr = &w;
    return ::epoll_ctl(loop_.epoll_fd(), EPOLL_CTL_ADD, fd, &ev) == 0;
}

bool poller::report(int fd, poll_watcher& w, bool on) {
    epoll_event ev{};
    ev.events = on ? std::uint32_t{EPOLLIN} : 0u;
    ev.data.ptr = &w;
    return ::epoll_ctl(loop_.epoll_fd(), EPOLL_CTL_MOD, fd, &ev) == 0;
}

// One harvest, then turns round robin over the classes, harvesting again every
// turns_between_polls turns while turns are queued, at most max_turns_per_round in all.
std::size_t poller::poll() {
    PERCORE_DEBUG_ASSERT(loop_.in_round());
    if (!std::exchange(harvested_, false)) harvest(std::chrono::nanoseconds(0));
    std::size_t turns = 0;
    while (queued_ > 0 && turns < max_turns_per_round) {
        run_turn();
        ++turns;
        if (turns % turns_between_polls == 0 && queued_ > 0 && turns < max_turns_per_round) harvest(std::chrono::nanoseconds(0));
    }
    return turns;
}

std::size_t poller::harvest(std::chrono::nanoseconds timeout) {
    epoll_event events[max_poll_events];
    std::size_t n = loop_.wait_events(events, timeout);
    for (std::size_t i = 0; i < n; ++i) enqueue(*static_cast<poll_watcher*>(events[i].data.ptr), events[i].events);
    return n;
}

void poller::wait(std::chrono::nanoseconds timeout) {
    harvest(timeout);
    harvested_ = true;
}

void poller::enqueue(poll_watcher& w, std::uint32_t events) {
    if (w.queued_in_) {
        w.queued_events_ |= events;   // one turn serves every edge so far
        return;
    }
    std::uint16_t q = queue_for(w.turn_class());
    turn_queue& tq = queues_[q];
    w.queued_in_ = this;
    w.queued_events_ = events;
    w.queue_ = q;
    w.next_ = nullptr;
    w.prev_ = tq.tail;
    if (tq.tail) tq.tail->next_ = &w;
    else tq.head = &w;
    tq.tail = &w;
    ++queued_;
}

// The queue of `turn_class`: the one it has (found among the queues in use), else a free one that
// joins the end of the ring, else the shared one.
std::uint16_t poller::queue_for(std::uint32_t turn_class) {
    if (last_queue_ != no_queue && queues_[last_queue_].turn_class == turn_class) return last_queue_;
    std::size_t at = ring_front_;
    for (std::size_t i = 0; i < ring_size_; ++i) {
        std::uint16_t q = ring_[at];
        if (q != shared_queue && queues_[q].turn_class == turn_class) return last_queue_ = q;
        if (++at == queue_count) at = 0;
    }
    if (free_count_ > 0) {
        std::uint16_t q = free_[--free_count_];
        queues_[q].turn_class = turn_class;
        ring_push(q);
        return last_queue_ = q;
    }
    if (!shared_in_use_) {
        shared_in_use_ = true;
        ring_push(shared_queue);
    }
    return shared_queue;
}

// The front queue's first watcher gets its turn, and the queue goes to the back of the ring (a
// quantum of one turn). Empty queues met at the front leave the ring. REQUIRES: queued_ > 0.
void poller::run_turn() {
    for (;;) {
        std::uint16_t q = ring_pop();
        turn_queue& tq = queues_[q];
        poll_watcher* w = tq.head;
        if (!w) {
            release(q);
            continue;
        }
        tq.head = w->next_;
        if (tq.head) {
            tq.head->prev_ = nullptr;
            ring_push(q);
        } else {
            tq.tail = nullptr;
            release(q);
        }
        std::uint32_t events = w->queued_events_;
        w->queued_in_ = nullptr;
        w->next_ = w->prev_ = nullptr;
        w->queued_events_ = 0;
        --queued_;
        w->on_events(events);
        return;
    }
}

// A watcher destroyed while queued: out of its queue (which leaves the ring at its turn if empty).
void poller::unqueue(poll_watcher& w) {
    turn_queue& tq = queues_[w.queue_];
    if (w.prev_) w.prev_->next_ = w.next_;
    else tq.head = w.next_;
    if (w.next_) w.next_->prev_ = w.prev_;
    else tq.tail = w.prev_;
    w.queued_in_ = nullptr;
    w.next_ = w.prev_ = nullptr;
    --queued_;
}

// An empty queue out of the ring is free again.
void poller::release(std::uint16_t q) {
    if (last_queue_ == q) last_queue_ = no_queue;
    if (q == shared_queue) shared_in_use_ = false;
    else free_[free_count_++] = q;
}

void poller::ring_push(std::uint16_t q) {
    PERCORE_DEBUG_ASSERT(ring_size_ < queue_count);
    std::size_t at = ring_front_ + ring_size_;
    if (at >= queue_count) at -= queue_count;
    ring_[at] = q;
    ++ring_size_;
}

std::uint16_t poller::ring_pop() {
    PERCORE_DEBUG_ASSERT(ring_size_ > 0);
    std::uint16_t q = ring_[ring_front_];
    if (++ring_front_ == queue_count) ring_front_ = 0;
    --ring_size_;
    return q;
}

}  // namespace percore::runtime
