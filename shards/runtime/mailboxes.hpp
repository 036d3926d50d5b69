// mailboxes<M>: the typed messages between the shards of one process — one bounded lock-free
// queue per ordered pair of shards, a backlog per destination on the sender's side for when a
// queue is full, and the wake-up of receivers that sleep.
//
// Contract
// - Built on the main thread before the shards start; `loops` outlive it.
// - outbox(s).send() and outbox(s).flush() on shard s's thread only; drain_into(s) and
//   has_inbound(s) on shard s's thread only.
// - Ordering: messages from one sender to one receiver arrive in the order sent (backlog first).
// - Wake-ups: flush() pushes each destination's backlog, issues one seq_cst fence, and writes the
//   eventfd of every destination it sent to that marked itself sleeping (loop.hpp's sleep
//   protocol); a busy receiver costs no system call.
// - M must be trivially copyable (it is copied into the ring); what it owns travels as a handoff.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "shards/runtime/check.hpp"
#include "shards/runtime/limits.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/spsc_queue.hpp"

namespace percore::runtime {

template <class M>
class mailboxes {
public:
    // One shard's sending side.
    class outbox {
    public:
        void send(unsigned to, const M& m) {
            PERCORE_DEBUG_ASSERT(this_shard() == from_ || this_shard() == no_shard);
            PERCORE_DEBUG_ASSERT(to != from_ && to < owner_->count_);
            ++sent_;
            sent_to_[to] = 1;
            if (backlog_[to].empty() && owner_->queue(from_, to).try_push(m)) return;
            backlog_[to].push_back(m);
        }
        // Pushes what waits, wakes sleeping receivers; returns the backlog messages it moved.
        std::size_t flush();
        bool has_backlog() const {
            for (const auto& b : backlog_)
                if (!b.empty()) return true;
            return false;
        }
        std::uint64_t sent() const { return sent_; }
        std::uint64_t wakeups() const { return wakeups_; }

    private:
        friend class mailboxes;
        mailboxes* owner_ = nullptr;
        unsigned from_ = 0;
        std::vector<std::deque<M>> backlog_;
        std::vector<std::uint8_t> sent_to_;
        std::uint64_t sent_ = 0;
        std::uint64_t wakeups_ = 0;
    };

    mailboxes(std::span<loop* const> loops, std::size_t capacity = queue_capacity_messages)
        : count_(static_cast<unsigned>(loops.size())), loops_(loops.begin(), loops.end()),
          queues_(static_cast<std::size_t>(count_) * count_), outboxes_(count_) {
        PERCORE_REQUIRES(count_ >= 1 && count_ <= max_shards);
        for (unsigned from = 0; from < count_; ++from) {
            for (unsigned to = 0; to < count_; ++to)
                if (from != to) queues_[from * count_ + to] = std::make_unique<spsc_queue<M>>(capacity);
            outbox& o = outboxes_[from];
            o.owner_ = this;
            o.from_ = from;
            o.backlog_.resize(count_);
            o.sent_to_.assign(count_, 0);
        }
    }

    unsigned size() const { return count_; }
    outbox& outbox_of(unsigned shard) { return outboxes_[shard]; }

    // Calls f(M&) for up to `max` messages from each other shard; returns how many.
    template <class F>
    std::size_t drain_into(unsigned shard, F&& f, std::size_t max = drain_batch_messages) {
        std::size_t total = 0;
        for (unsigned from = 0; from < count_; ++from)
            if (from != shard) total += queue(from, shard).drain(f, max);
        return total;
    }
    bool has_inbound(unsigned shard) const {
        for (unsigned from = 0; from < count_; ++from)
            if (from != shard && !queues_[from * count_ + shard]->empty()) return true;
        return false;
    }
    // After every shard stopped: everything still queued or in a backlog, for the caller to free.
    template <class F>
    void discard_all(F&& f) {
        for (auto& q : queues_)
            if (q) q->drain(f, ~std::size_t{0});
        for (auto& o : outboxes_)
            for (auto& b : o.backlog_) {
                for (M& m : b) f(m);
                b.clear();
            }
    }

private:
    spsc_queue<M>& queue(unsigned from, unsigned to) { return *queues_[from * count_ + to]; }

    unsigned count_;
    std::vector<loop*> loops_;
    std::vector<std::unique_ptr<spsc_queue<M>>> queues_;
    std::vector<outbox> outboxes_;
};

template <class M>
std::size_t mailboxes<M>::outbox::flush() {
    std::size_t moved = 0;
    bool any = false;
    for (unsigned to = 0; to < owner_->count_; ++to) {
        auto& b = backlog_[to];
        while (!b.empty() && owner_->queue(from_, to).try_push(b.front())) {
            b.pop_front();
            ++moved;
            sent_to_[to] = 1;
        }
        any = any || sent_to_[to];
    }
    if (!any) return moved;
    // Pairs with the fence in the receiver's loop::sleep(): either it sees our messages before it
    // sleeps, or we see it sleeping and wake it.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (unsigned to = 0; to < owner_->count_; ++to) {
        if (!sent_to_[to]) continue;
        sent_to_[to] = 0;
        loop* receiver = owner_->loops_[to];
        if (receiver->is_sleeping()) {
            receiver->wake();
            ++wakeups_;
        }
    }
    return moved;
}

}  // namespace percore::runtime
