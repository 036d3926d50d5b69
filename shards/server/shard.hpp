// shard: one core's server — the composition of a runtime loop, the shard's store, its listeners
// and connections, the document service, and its end of the mailboxes.
//
// A round (runtime::loop runs it; this is the step):
//   1. I/O handlers have run: accepts, reads → parse → answer reads from snapshots, writes;
//   2. drain the mailboxes: writes for keys this shard owns, answers to writes it sent, a backup's
//      requests for this shard's capture and the captures for its own backups (backup_stream.hpp);
//   3. advance the store's batches: publish the batch whose sync returned and answer its writes
//      (locally, or over the mailbox to the shard holding the connection), then hand the next
//      batch to the log thread (one write + fdatasync in flight per shard); wake the shards whose
//      change feeds or deliveries wait for this shard's commits;
//   4. every task, a bounded step each (base/shard_task.hpp; which ones: shard_capabilities.hpp);
//   5. compaction, a bounded step (not once stopping);
//   6. flush the outbox: push backlogs, wake receivers that sleep;
//   7. free snapshots no shard can still be reading; check the graceful stop.
// A write's result goes to its issuer (write_ticket::from): a connection's to the document
// service, which names the answer (then the pool sends it), a task's to that task.
// The log thread wakes the loop (runtime::loop::wake) when its append returns.
//
// Thread: everything runs on the shard's own thread, except the read-only accessors other shards
// use (store().current(), metrics(), connection_stats()) and loop().wake().
//
// Start: run() recovers the store (on the shard's thread), then accepts and loops. A shard that
// cannot start tells the group (runtime::group::fail), which aborts the start. Recovery reads its
// files through a recovery_env that fails them with ECANCELED once the group stops, so a shard
// still recovering gives up within one read when another shard failed or SIGTERM came; it then
// counts as given up (fail() with no reason), not as a failure of its own.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "crypto/tls.hpp"
#include "net/connection_pool.hpp"
#include "net/listener.hpp"
#include "shards/backup/backup_stream.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/http/document_service.hpp"
#include "shards/base/metrics.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"
#include "shards/server/shard_capabilities.hpp"
#include "shards/server/shard_context.hpp"
#include "shards/base/store_client.hpp"
#include "shards/base/sync_holds.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

class recovery_env;

// After SIGTERM: connections get this long to finish their current answer before they are closed.
inline constexpr std::chrono::milliseconds stop_grace{3000};

class shard final : public runtime::loop_owner, public store_client, private backup_captures {
public:
    shard(shard_context& context, unsigned id, const net::connection_limits& limits, std::uint64_t first_version);
    ~shard();

    unsigned id() const { return id_; }
    runtime::loop& loop() { return loop_; }
    // Main thread, before run(); throw std::system_error.
    void listen(const boost::asio::ip::tcp::endpoint& endpoint) { http_.listen(endpoint); }
    std::uint16_t local_port() const { return http_.local_port(); }
    void listen_tls(const boost::asio::ip::tcp::endpoint& endpoint, crypto::tls_server& tls);
    std::uint16_t local_tls_port() const { return tls_ ? tls_->local_port() : 0; }

    // On the shard's own thread (runtime::group::start).
    void run();
    // Main thread, before run(): f runs on the shard's thread once its store recovered (the
    // systemd STATUS lines, service_notify.hpp).
    void on_recovered(std::function<void()> f) { recovered_hook_ = std::move(f); }

    const store::shard_store& store() const { return store_; }
    const shard_metrics& metrics() const { return metrics_; }
    const net::connection_stats& connection_stats() const { return pool_.stats(); }

    // store_client
    unsigned shard_count() const override { return context_.shard_count; }
    unsigned self() const override { return id_; }
    unsigned owner_of(std::string_view key) const override;
    const store::snapshot* current(unsigned owner) const override { return context_.stores[owner]->current(); }
    const store::snapshot* durable(unsigned owner) const override { return context_.stores[owner]->durable(); }
    void submit(unsigned owner, store::write_op op) override;
    store::document_pool* own_documents() override { return &store_.document_memory(); }

private:
    // backup_captures (backup_stream.hpp): the other shards' captures over the mailbox, and its own
    void request_captures(std::uint64_t tag) override;
    store::result<store::shard_capture> capture_own() override { return store_.capture_files(); }

    // loop_owner
    void round_began() override;
    void round_ended() override;
    std::size_t step() override;
    bool has_work() override;
    bool exchanged_messages() const override { return exchanged_messages_; }
    void tick() override;
    runtime::clock_type::time_point wake_by() override {
        const auto by = std::min(store_.linger_until(), tasks_.wake_by());
        return sync_ ? std::min(by, sync_->next_deadline()) : by;
    }
    bool finished() override { return exit_; }

    std::size_t drain_inbound();
    void receive(shard_message& m);
    void write_done(const shard_message& m);
    void send_capture(std::uint64_t tag);
    std::size_t advance_store();
    std::size_t release_synced();
    bool sync_ready() const;
    void signal_feeds();
    void deliver(const store::write_result& r);
    void complete_write(const store::write_result& r);
    std::size_t flush_outbox();
    void check_stop();
    void begin_stop();
    bool ready_to_exit() const;
    bool start_up();
    bool recover_store();
    void attach_log(std::uint64_t next_segment_id, const std::vector<std::uint64_t>& segment_ids);

    shard_context& context_;
    unsigned id_;
    runtime::loop loop_;                    // first: its eventfd outlives the log thread (store_)
    runtime::poller poller_;                // the connection sockets' epoll set
    std::unique_ptr<recovery_env> files_;  // the store's env; outlives store_
    store::shard_store store_;
    shard_metrics metrics_;
    document_service service_;
    net::connection_pool pool_;
    net::listener http_;
    std::unique_ptr<net::listener> tls_;
    shard_capabilities capabilities_;       // the tasks; after the poller: their connections leave it first
    shard_tasks tasks_;                     // what step() drives (capabilities_ registers them)

    std::vector<store::write_result> results_;
    // --replication sync (SPEC §12; null in async): this store's results held until a follower has
    // them (sync_holds.hpp); the store shows readers only what the followers acknowledged.
    std::unique_ptr<sync_holds> sync_;
    std::uint64_t outstanding_remote_ = 0;   // writes sent to owners, not yet answered
    std::uint64_t received_ = 0;
    bool exit_ = false;
    bool stop_started_ = false;
    bool exchanged_messages_ = false;      // the last round moved messages between shards (loop_owner)
    std::uint64_t sent_by_last_step_ = 0;  // the outbox's sent() then
    bool drained_ = false;
    runtime::clock_type::time_point stop_deadline_{};
    std::function<void()> recovered_hook_;
};

}  // namespace percore::shards
