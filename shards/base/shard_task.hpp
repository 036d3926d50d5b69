// shard_task: a capability that runs in its shard's rounds beside the connections — the change
// feeds that wait, backups, the delivery engine, a follower's copy, the erasure of deleted apps.
// The shard drives every registered task the same way (server/shard.cpp) and names none of them.
//
// Contract
// - Owned by the shard's composition (server/shard_capabilities.hpp), registered once before the shard
//   runs, called only on the owning shard's thread, inside a round. REQUIRES of every entry point:
//   PERCORE_REQUIRES(on_shard_thread(shard)).
// - step(now): a bounded piece of work; returns how much it did (0: nothing), so the loop knows
//   whether to go round again. `now` is the round's clock (runtime::round_clock).
// - has_work(now): asked before the shard sleeps; true keeps the loop awake for another round.
// - wake_by(): the latest time the shard may sleep to for this task's sake (a pace, a timer);
//   max() when it waits for nothing timed. Asked only of tasks whose timed() is true (read once,
//   when registered: an idle round then asks no one). Timers coarser than the loop's tick (250 ms)
//   need not say: the tick wakes the shard anyway.
// - begin_stop(): the server stops (SIGTERM): end or drop what is in flight so the shard can drain;
//   after it, step() and has_work() may be called and do nothing that starts new work.
// - busy(): false only while the task has nothing to step, no work to report and no timer; the
//   table then skips it without a virtual call (a keep-alive GET pays a whole loop round: the
//   idle tasks' calls were ~60 instructions of it, callgrind). A task that keeps it sets it when
//   work arrives and clears it when the last of it ends; one that does not is always busy.
// - write_done(result): a write this task submitted (its write_ticket names the task's issuer)
//   was settled; called once per write, on the task's shard. Only tasks registered as an issuer
//   get it.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

#include "shards/runtime/check.hpp"
#include "shards/runtime/round_clock.hpp"
#include "shards/base/write_ticket.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

class shard_task {
public:
    using time_point = runtime::clock_type::time_point;

    virtual std::size_t step(time_point now) = 0;
    virtual bool has_work(time_point now) const = 0;
    virtual time_point wake_by() const { return time_point::max(); }
    virtual bool timed() const { return false; }
    virtual void begin_stop() = 0;
    virtual void write_done(const store::write_result& result);
    bool busy() const { return busy_; }

protected:
    ~shard_task() = default;
    void set_busy(bool busy) { busy_ = busy; }

private:
    bool busy_ = true;
};

// A shard's tasks, driven alike: stepped in the order they were added, asked before the shard
// sleeps, stopped together; and the results of background writes routed to their issuer by the
// ticket (write_ticket::from), a table lookup, not a question to each task.
// Bound: max_shard_tasks (the composition registers five kinds: feeds, backups, deliveries, the
// follower, app erasures; room for three more before this constant must grow).
inline constexpr std::size_t max_shard_tasks = 8;

class shard_tasks {
public:
    // REQUIRES: before the shard runs; fewer than max_shard_tasks added.
    void add(shard_task& task);
    // add(task), and results of `who`'s writes go to it. REQUIRES: who is not issuer::connection
    // and has no task yet.
    void add_issuer(issuer who, shard_task& task);

    // Inline: they run every round (a keep-alive GET pays one round; callgrind, docs/perf/instructions.md).
    std::size_t step(shard_task::time_point now) {
        std::size_t work = 0;
        for (std::size_t i = 0; i < count_; ++i)
            if (tasks_[i]->busy()) work += tasks_[i]->step(now);
        return work;
    }
    bool has_work(shard_task::time_point now) const {
        for (std::size_t i = 0; i < count_; ++i)
            if (tasks_[i]->busy() && tasks_[i]->has_work(now)) return true;
        return false;
    }
    shard_task::time_point wake_by() const {
        auto at = shard_task::time_point::max();
        for (std::size_t i = 0; i < timed_count_; ++i)
            if (timed_[i]->busy()) at = std::min(at, timed_[i]->wake_by());
        return at;
    }
    void begin_stop();
    // REQUIRES: `who` was registered (add_issuer).
    void write_done(issuer who, const store::write_result& result);
    std::size_t size() const { return count_; }

private:
    std::array<shard_task*, max_shard_tasks> tasks_{};
    std::size_t count_ = 0;
    std::array<shard_task*, max_shard_tasks> timed_{};  // those whose timed() said true
    std::size_t timed_count_ = 0;
    std::array<shard_task*, issuer_count> issuers_{};
};

// The owning shard's thread, or a thread of no shard (a test's, driving one shard's parts by hand;
// the main thread before the shards run).
inline bool on_shard_thread(unsigned shard) {
    const unsigned t = runtime::this_shard();
    return t == shard || t == runtime::no_shard;
}

// Nanoseconds since the clock's epoch: the unit the tasks' own timers keep.
inline std::int64_t nanoseconds_of(shard_task::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace percore::shards
