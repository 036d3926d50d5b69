// delivery_engine: one shard's deliveries (SPEC §9) — the delivery records this shard's store holds,
// each sending its app's committed changes to its receiver, one batch at a time, in feed order, at
// least once.
//
// Contract
// - One per shard, on that shard's thread, inside rounds. The shard calls step() every round,
//   asks has_work() before it sleeps, and gives every result of a write it made (write_ticket
//   issuer::delivery) to write_done() (base/shard_task.hpp).
// - What a delivery does is in its durable record (delivery_record.hpp), a catalog document on the
//   shard that owns its key; each shard's engine runs the records of its own store, so after a
//   restart or a resharding whichever shard holds a record runs it. step() takes the records as
//   they are in the store whenever the store published since it last looked.
// - A batch is the changes after the record's cursor (delivery_batch.hpp: at most 1 MiB of values).
//   Its id goes into the record, durably, before its first attempt, so every try of it, in this
//   process or after a crash, carries the same webhook-id. An attempt's outcome goes into the
//   record (delivery_progress.hpp) before the delivery does anything else: the next batch after a
//   2xx, a timer after a failure. A crash repeats at most the batch in flight, and no batch is
//   skipped: the cursor moves only past a batch a receiver answered 2xx.
// - Records are written with If-Match on the version the engine last saw: an administrator's change
//   in between (PUT, DELETE) wins — the write fails its precondition and the engine takes the record
//   as it now is (a deleted one stops the delivery and closes its connection).
// - Never in the way: a delivery costs its record, one connection and a timer; an exchange runs on
//   the loop (net/client_connection.hpp), bounded in time (15 s: delivery_schedule.hpp) and in the
//   answer's size, so a dead, slow or hostile receiver delays only its own delivery.
// - Wake-ups: a delivery with nothing to send looks again when its app's changed_batches counters
//   move (the counters waiting feeds use, feed_waits.hpp; feed_signal wakes this shard while it
//   runs deliveries), or at its retry time (to the loop's tick).
// - Receivers' addresses (SPEC §9): the address connected to, literal or resolved, is checked with
//   net::allowed() against `allow` (--deliveries-allow) before any connection is made, at every
//   resolution; a refused one fails that try with last_error "address not allowed" (cause
//   connect_failed) and is not kept, so the next try resolves the name again.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "shards/base/result.hpp"
#include "net/client_connection.hpp"
#include "net/address_policy.hpp"
#include "net/resolve.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/feed/change_feed.hpp"
#include "shards/deliveries/delivery_batch.hpp"
#include "shards/deliveries/delivery_transports.hpp"
#include "shards/deliveries/delivery_progress.hpp"
#include "shards/deliveries/delivery_record.hpp"
#include "shards/deliveries/delivery_schedule.hpp"
#include "shards/base/metrics.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/feed/feed_waits.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/base/store_client.hpp"

namespace percore::shards {

// A pre-resharding cursor of this directory made valid for the current layout (see the .cpp), or
// nothing when it is not one or the feed no longer holds its changes.
std::optional<std::string> rebase_after_reshard(const change_feed& feed, std::string_view cursor);

class delivery_engine final : public shard_task {
public:
    // Counts attempts, deliveries and failures into `metrics` (the shard's: one writer). `allow`
    // (--deliveries-allow) outlives the engine.
    delivery_engine(store_client& stores, app_registry& apps, feed_identity identity, delivery_transports& transports,
                    delivery_timing timing, shard_metrics& metrics, runtime::loop& loop, const net::cidr_list& allow);
    ~delivery_engine();
    delivery_engine(const delivery_engine&) = delete;
    delivery_engine& operator=(const delivery_engine&) = delete;

    // While it runs deliveries, other shards' commits wake this shard (feed_signal: the server's).
    void attach_signal(feed_signal* signal) { signal_ = signal; }
    // Deliveries this shard runs (what feed_signal is told).
    std::size_t runs() const { return runs_.size(); }
    // The bytes the runs hold for their batches (plain and sealed): a batch waiting a minute or more
    // for its next try holds none.
    std::size_t batch_bytes_held() const;

    // shard_task (issuer::delivery)
    // Takes record changes, starts due batches, ends timed-out exchanges; returns the work done.
    std::size_t step(time_point now) override;
    bool has_work(time_point now) const override;
    // The end of a pause after a partial batch (delivery_linger), when one is ahead.
    time_point wake_by() const override;
    bool timed() const override { return true; }
    // The server stops: connections close, nothing new starts (records stay as they are).
    void begin_stop() override;
    // One of the engine's record writes (its ticket's issuer is issuer::delivery).
    void write_done(const store::write_result& result) override;

private:
    struct run;
    void scan();
    void adopt(run& r, const delivery_record& d, std::uint64_t version);
    void advance(run& r, std::int64_t now_ns);
    bool begin_batch(run& r);
    enum class link : std::uint8_t { ready, resolving, refused };
    result<link> connect(run& r);
    void resolve(run& r, const std::string& host, std::uint16_t port, const std::string& host_port);
    result<signed_batch> sign(run& r, std::int64_t now_ms);
    void send(run& r, std::int64_t now_ns);
    void attempt_failed(run& r, const attempt_outcome& outcome, std::int64_t now_ms, std::string_view cause);
    void exchange_done(run& r, const net::client_outcome& outcome);
    void persist(run& r, delivery_record next, bool send_after);
    bool app_changed(run& r);
    void take_record(run& r, const store::document& doc);
    void release_waiting_batch(run& r);

    store_client& stores_;
    const unsigned shard_;  // stores_.self(), asked every round
    app_registry& apps_;
    change_feed feed_;
    delivery_transports& transports_;
    delivery_timing timing_;
    std::vector<std::unique_ptr<run>> runs_;    // in key order (scan() merges them with the records)
    std::vector<std::unique_ptr<run>> merged_;  // scan()'s scratch, kept for its capacity
    // the snapshot's watched_sequence() scan() last read: the shard's store watches the delivery
    // records (shard::shard: store::shard_store::watch_keys), so it moves only when they may have
    // changed
    std::uint64_t scanned_sequence_ = 0;
    std::uint32_t write_sequence_ = 0;
    std::minstd_rand jitter_;
    shard_metrics& metrics_;
    runtime::loop& loop_;
    const net::cidr_list& allow_;  // --deliveries-allow
    feed_signal* signal_ = nullptr;
    std::size_t told_runs_ = 0;       // what feed_signal was last told
    std::int64_t last_step_ns_ = 0;  // the round clock at the last step (wake_by: pauses still ahead)
    bool stopped_ = false;
};

}  // namespace percore::shards
