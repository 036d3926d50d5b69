// while_primary: a task that runs only while the board is its group's primary (SPEC §12) — the
// deliveries and the erasure of deleted apps of a board whose role changes (--cluster). While the
// board follows or is fenced its task is not stepped: the primary's effects arrive as changes.
//
// Contract: as shard_task's (base/shard_task.hpp), on the owning shard's thread; `role` and `task`
// outlive it. Results of writes the task submitted while primary still reach it after a demotion.
#pragma once

#include "shards/base/board_role.hpp"
#include "shards/base/shard_task.hpp"

namespace percore::shards {

class while_primary final : public shard_task {
public:
    while_primary(const board_role& role, shard_task& task) : role_(role), task_(task) {}

    std::size_t step(time_point now) override { return primary() ? task_.step(now) : 0; }
    bool has_work(time_point now) const override { return primary() && task_.has_work(now); }
    time_point wake_by() const override { return primary() ? task_.wake_by() : time_point::max(); }
    bool timed() const override { return task_.timed(); }
    void begin_stop() override { task_.begin_stop(); }
    void write_done(const store::write_result& result) override { task_.write_done(result); }

private:
    bool primary() const { return role_.kind() == board_kind::primary; }

    const board_role& role_;
    shard_task& task_;
};

}  // namespace percore::shards
