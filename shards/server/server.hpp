// server: every shard of the process and what they share — the composition's top. Built and bound
// on the main thread, then run by the shard runtime's group (one pinned thread per shard).
//
// Contract
// - listen()/listen_tls() on the main thread report bind errors as values; start() runs the
//   shards; stop() from any thread (the signal waiter); join() waits for them.
// - Start-up failure: a shard that cannot be built (listen() reports it), whose thread cannot be
//   created, or that cannot start (its store does not recover, or stop() came while it was still
//   recovering) aborts the start (runtime::group::fail): main exits 1 with the first reason.
// - server_view: read by any shard for /_health, /_metrics and /_stats.
#pragma once

#include <atomic>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shards/base/result.hpp"
#include "shards/server/options.hpp"
#include "shards/runtime/group.hpp"
#include "shards/runtime/mailboxes.hpp"
#include "shards/follower/follower.hpp"
#include "shards/base/server_view.hpp"
#include "shards/server/shard.hpp"
#include "shards/server/shard_context.hpp"
#include "store/data_layout.hpp"
#include "store/epoch.hpp"

namespace percore::crypto {
class tls_server;
}

namespace percore::shards {

class server final : public server_view {
public:
    server(const server_options& options, store::data_layout layout, std::vector<int> cpus, auth_config auth = {});
    ~server();

    result<std::uint16_t> listen();  // returns the bound port
    // --tls-listen: every shard also accepts HTTPS there; returns the bound port.
    result<std::uint16_t> listen_tls(crypto::tls_server& tls);
    void start();
    int wait_started_or_signal() { return threads_->wait_started_or_signal(); }
    void stop() { threads_->stop(); }
    // --cluster (SPEC §12), at SIGTERM before stop(): shard 0's coordinator hands the group over (a
    // primary lets a follower copy its last writes, then releases the leader key and its lease).
    // Waits at most cluster/limits.hpp's handover_bound; false when it was not done by then.
    bool hand_over();
    void join() { threads_->join(); }
    std::string failure() const { return threads_->failure(); }
    void set_serving() { serving_.store(true, std::memory_order_release); }
    // Before start(): f runs on each shard's thread once its store recovered.
    void on_shard_recovered(const std::function<void()>& f) {
        for (auto& s : shards_) s->on_recovered(f);
    }
    // Any thread, while the shards run: f runs on shard i's loop, inside a round, soon.
    void run_on_shard(unsigned shard, std::function<void()> f) { threads_->run_on_shard(shard, std::move(f)); }

    // server_view
    unsigned shard_count() const override { return count_; }
    bool serving() const override { return serving_.load(std::memory_order_acquire) && !stopping(); }
    bool stopping() const override { return threads_->stopping(); }
    bool any_store_failed() const override;
    int cpu_of(unsigned shard) const override { return threads_->cpu_of(shard); }
    const shard_metrics& metrics_of(unsigned shard) const override { return shards_[shard]->metrics(); }
    const net::connection_stats& connections_of(unsigned shard) const override { return shards_[shard]->connection_stats(); }
    const store::snapshot* snapshot_of(unsigned shard) const override { return shards_[shard]->store().current(); }
    const app_registry& apps() const override { return apps_; }
    feed_identity data_identity() const override { return {layout_.directory_id, layout_.generation}; }
    const board_role& role() const override { return role_; }
    const follower_status* follower() const override {
        return role_.kind() == board_kind::follower ? &follow_status_ : nullptr;
    }

private:
    void build_shards(std::uint64_t first_version);
    void apply_delivery_timing();

    server_options options_;
    store::data_layout layout_;
    unsigned count_;
    store::reader_epochs epochs_;
    app_registry apps_;
    auth_config auth_;
    feed_signal feeds_;
    follower_status follow_status_;
    board_role role_;
    std::unique_ptr<sync_acks> sync_acks_;  // --replication sync only (SPEC §12)
    shard_context context_;
    std::vector<std::unique_ptr<shard>> shards_;
    std::unique_ptr<runtime::mailboxes<shard_message>> mail_;
    std::unique_ptr<runtime::group> threads_;
    std::atomic<bool> serving_{false};
    std::string build_failure_;
};

}  // namespace percore::shards
