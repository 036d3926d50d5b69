#include "shards/base/shard_task.hpp"

#include "shards/runtime/check.hpp"

namespace percore::shards {

// A task that issues no writes is never handed a result: the shard routes results by the issuer in
// their ticket, and only issuers are registered for it (server/shard.cpp).
void shard_task::write_done(const store::write_result&) {
    PERCORE_ASSERT(!"a write result reached a task that issues no writes");
}

void shard_tasks::add(shard_task& task) {
    PERCORE_REQUIRES(count_ < max_shard_tasks);
    tasks_[count_++] = &task;
    if (task.timed()) timed_[timed_count_++] = &task;
}

void shard_tasks::add_issuer(issuer who, shard_task& task) {
    const auto slot = static_cast<std::size_t>(who);
    PERCORE_REQUIRES(who != issuer::connection && slot < issuer_count && issuers_[slot] == nullptr);
    add(task);
    issuers_[slot] = &task;
}

void shard_tasks::begin_stop() {
    for (std::size_t i = 0; i < count_; ++i) tasks_[i]->begin_stop();
}

void shard_tasks::write_done(issuer who, const store::write_result& result) {
    const auto slot = static_cast<std::size_t>(who);
    PERCORE_REQUIRES(slot < issuer_count && issuers_[slot] != nullptr);
    issuers_[slot]->write_done(result);
}

}  // namespace percore::shards
