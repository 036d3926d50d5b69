#include "shards/server/shard.hpp"

#include <unistd.h>

#include <ctime>
#include <string>

#include "shards/apps/catalog.hpp"
#include "shards/base/board_role.hpp"
#include "shards/base/http_decisions.hpp"
#include "shards/base/key_owner.hpp"
#include "shards/server/recovery_env.hpp"
#include "shards/runtime/check.hpp"
#include "shards/base/write_ticket.hpp"

namespace percore::shards {

shard::shard(shard_context& context, unsigned id, const net::connection_limits& limits, std::uint64_t first_version)
    : context_(context),
      id_(id),
      loop_(id),
      poller_(loop_),
      files_(std::make_unique<recovery_env>(context)),
      store_(context.epochs, first_version, std::chrono::seconds(context.options.changes_retention_seconds)),
      service_(*this, context.view, metrics_, context.apps, context.auth, context.options.deliveries_allow),
      pool_(loop_.clock(), service_, limits),
      http_(loop_, poller_, pool_),
      capabilities_(context, id, *this, service_, metrics_, loop_, poller_) {
    loop_.attach(*this);
    store_.watch_keys(std::string(delivery_records));   // the delivery engine's scan (delivery_engine.cpp)
    service_.attach(&pool_, context.feeds, this,
                    backup_source{context.layout.root, context.layout.generation, context.layout.shards});
    capabilities_.register_with(tasks_);
    if (context.sync) {
        PERCORE_REQUIRES(context.options.replication == replication_mode::sync && context.role != nullptr);
        sync_ = std::make_unique<sync_holds>(std::chrono::seconds(context.options.sync_timeout_seconds));
        service_.set_sync_acks(context.sync);
    }
}

// The store's log thread is joined by store_'s destructor; the loop (declared first) goes last, so
// a wake() from that thread's final append never meets a closed eventfd.
shard::~shard() { pool_.close_all(); }

void shard::listen_tls(const boost::asio::ip::tcp::endpoint& endpoint, crypto::tls_server& tls) {
    tls_ = std::make_unique<net::listener>(loop_, poller_, pool_, &tls);
    tls_->listen(endpoint);
}

unsigned shard::owner_of(std::string_view key) const { return shards::owner_of(key, context_.shard_count); }

void shard::round_began() { context_.epochs.begin_round(id_); }
void shard::round_ended() { context_.epochs.quiesce(id_); }

void shard::run() {
    PERCORE_REQUIRES(runtime::this_shard() == id_);
    if (!start_up()) {
        loop_.end_round();
        context_.threads->started_one();
        return;
    }
    context_.threads->started_one();
    loop_.run();
    pool_.close_all();
}

std::size_t shard::step() {
    const std::size_t inbound = drain_inbound();
    std::size_t work = inbound + advance_store();
    work += tasks_.step(loop_.clock().now());
    if (!stop_started_) work += store_.compact_step();
    if (sync_) work += release_synced();
    work += flush_outbox();
    // Sent this round: by this step or by the connections' turns before it (a write for a key
    // another shard owns).
    const std::uint64_t sent = context_.mail->outbox_of(id_).sent();
    exchanged_messages_ = inbound > 0 || sent != sent_by_last_step_;
    sent_by_last_step_ = sent;
    store_.reclaim();
    check_stop();
    return work;
}

bool shard::has_work() {
    return context_.mail->has_inbound(id_) || store_.ready() || context_.mail->outbox_of(id_).has_backlog() ||
           tasks_.has_work(loop_.clock().now()) || (sync_ && sync_ready());
}

void shard::tick() {
    pool_.set_date(static_cast<std::int64_t>(std::time(nullptr)));
    if (store_.log()) store_.expire_changes(std::chrono::steady_clock::now());  // the feed's retention (SPEC §8)
    http_.retry_if_stalled();
    if (tls_) tls_->retry_if_stalled();
    pool_.sweep();
}

// Recovers the store and starts accepting; false when the shard cannot start (it told the group).
bool shard::start_up() {
    try {
        if (!recover_store()) return false;
        if (context_.threads->aborting()) return false;  // another shard failed while this one recovered
        pool_.set_date(static_cast<std::int64_t>(std::time(nullptr)));
        loop_.enter_round();
        http_.start();
        if (tls_) tls_->start();
        return true;
    } catch (const std::exception& e) {
        context_.threads->fail("shard " + std::to_string(id_) + " cannot start: " + e.what());
    } catch (...) {
        context_.threads->fail("shard " + std::to_string(id_) + " cannot start");
    }
    return false;
}

bool shard::recover_store() {
    std::string dir = context_.layout.shard_directory(id_);
    auto stats = store_.recover(*files_, dir);
    files_->finish();
    if (!stats) {
        // Given up because the group stops (another shard failed, or SIGTERM): not a failure.
        context_.threads->fail(files_->cancelled() ? std::string() : "shard " + std::to_string(id_) + ": " + stats.error());
        return false;
    }
    if (context_.threads->aborting()) return false;  // no new log segment for a start that will not happen
    metrics_.recovery_seconds.store(stats->seconds, std::memory_order_relaxed);
    std::string line = "percore: shard " + std::to_string(id_) + " recovered " + std::to_string(stats->records) +
                       " records (" + std::to_string(store_.current()->document_count()) + " documents) from " +
                       std::to_string(stats->segments) + " segments in " + std::to_string(stats->seconds) + " s";
    if (!stats->notes.empty()) line += "; " + stats->notes;
    line += "\n";
    ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    (void)n;
    service_.recovered(*store_.current(), context_.auth.on);
    if (sync_) store_.hold_visibility();  // what it recovered is shown; what comes next waits (SPEC §12)
    attach_log(stats->next_segment_id, stats->segment_ids);
    if (recovered_hook_) recovered_hook_();
    return true;
}

void shard::attach_log(std::uint64_t next_segment_id, const std::vector<std::uint64_t>& segment_ids) {
    store::log_options o;
    o.directory = context_.layout.shard_directory(id_);
    o.shard = id_;
    o.sync = context_.options.durability == durability_mode::sync;
    o.segment_target_bytes = context_.options.segment_bytes;
    store_.attach_log(std::make_unique<store::shard_log>(store::posix_env(), o, next_segment_id, segment_ids,
                                                          [this] { loop_.wake(); }));
    // Concurrent writers share a sync (store/limits.hpp, max_batch_linger); nothing to wait for
    // without one.
    if (o.sync) store_.set_batch_linger(store::max_batch_linger);
}

std::size_t shard::drain_inbound() {
    return context_.mail->drain_into(id_, [this](shard_message& m) { receive(m); });
}

void shard::receive(shard_message& m) {
    add(metrics_.messages_received);
    switch (m.type) {
    case shard_message::kind::write:
        store_.submit(std::move(*m.op.take()));
        return;
    case shard_message::kind::write_done:
        write_done(m);
        return;
    case shard_message::kind::backup_capture:
        send_capture(m.tag);
        return;
    case shard_message::kind::backup_captured:
        service_.backups().captured(m.tag, m.part.take());
        return;
    }
}

void shard::write_done(const shard_message& m) {
    PERCORE_ASSERT(outstanding_remote_ > 0);
    --outstanding_remote_;
    store::write_result r;
    r.tag = m.tag;
    r.outcome = m.outcome;
    r.version = m.version;
    r.current_exists = m.current_exists;
    r.refusal = m.refusal;
    complete_write(r);
}

// A write this shard issued was settled: its issuer takes the result (write_ticket.hpp).
void shard::complete_write(const store::write_result& r) {
    const write_ticket t = write_ticket::decode(r.tag);
    PERCORE_REQUIRES(t.origin == id_);
    const issuer who = t.from();
    if (who != issuer::connection) {
        tasks_.write_done(who, r);
        return;
    }
    if (auto answer = service_.write_done(r)) pool_.complete(t.answer, *answer);
}

// A backup (backup_stream.hpp): every other shard's capture, taken on its own thread.
void shard::request_captures(std::uint64_t tag) {
    shard_message m;
    m.type = shard_message::kind::backup_capture;
    m.tag = tag;
    for (unsigned s = 0; s < context_.shard_count; ++s)
        if (s != id_) context_.mail->outbox_of(id_).send(s, m);
}

// This shard's capture for a backup, handed off to the backup's origin with its open files.
void shard::send_capture(std::uint64_t tag) {
    auto part = std::make_unique<backup_part>();
    part->shard = id_;
    part->files = store_.capture_files();
    const unsigned origin = backup_tag::decode(tag).origin;
    shard_message m;
    m.type = shard_message::kind::backup_captured;
    m.tag = tag;
    m.part = runtime::handoff<backup_part>::send(std::move(part), origin);
    context_.mail->outbox_of(id_).send(origin, m);
}

void shard::submit(unsigned owner, store::write_op op) {
    if (owner == id_) {
        store_.submit(std::move(op));
        return;
    }
    shard_message m;
    m.type = shard_message::kind::write;
    m.op = runtime::handoff<store::write_op>::send(std::make_unique<store::write_op>(std::move(op)), owner);
    ++outstanding_remote_;
    add(metrics_.remote_writes);
    context_.mail->outbox_of(id_).send(owner, m);
}

void shard::deliver(const store::write_result& r) {
    write_ticket t = write_ticket::decode(r.tag);
    if (t.origin == id_) {
        complete_write(r);
        return;
    }
    shard_message m;
    m.type = shard_message::kind::write_done;
    m.outcome = r.outcome;
    m.current_exists = r.current_exists;
    m.refusal = r.refusal;
    m.tag = r.tag;
    m.version = r.version;
    context_.mail->outbox_of(id_).send(t.origin, m);
}

std::size_t shard::advance_store() {
    if (!store_.ready()) return 0;
    results_.clear();
    bool was_in_flight = store_.in_flight();
    store::batch_stats stats = store_.advance_batches(results_);
    if (was_in_flight && !store_.in_flight() && store_.log()) metrics_.record_sync(store_.last_sync_ns());
    if (stats.writes) metrics_.record_batch(stats.writes, stats.bytes);
    const std::size_t settled = results_.size();
    if (sync_) {
        // The follower's own writes are not held: its copies (on a follower, which shows everything
        // at once) and its records of this board, such as the epoch it leads, which promotion
        // waits for before any client write (diverged_capture.hpp) — held, a lone sync board could
        // never lead. Every other result waits until a follower acknowledged the batch's snapshot.
        std::erase_if(results_, [this](const store::write_result& r) {
            if (write_ticket::decode(r.tag).from() != issuer::follower) return false;
            deliver(r);
            return true;
        });
        sync_->hold(results_, store_.durable()->high_version(), loop_.clock().now());
        metrics_.sync_held.store(sync_->size(), std::memory_order_relaxed);
    } else {
        for (const store::write_result& r : results_) deliver(r);
    }
    if (settled > 0) signal_feeds();  // durable: a follower's long poll copies it now
    return settled;
}

// --replication sync (SPEC §12): readers are shown what a follower acknowledged, and the writes it
// covers are answered; those held past --sync-timeout are answered 503 (not acknowledged). A board
// that follows shows what it copied at once: it has no follower of its own to wait for.
std::size_t shard::release_synced() {
    PERCORE_REQUIRES(sync_ && context_.sync);
    const bool following = context_.role->kind() == board_kind::follower;
    const std::uint64_t watermark = following ? ~std::uint64_t{0} : context_.sync->watermark(id_);
    const std::uint64_t durable = store_.durable()->high_version();
    metrics_.sync_ack_lag.store(durable > watermark ? durable - watermark : 0, std::memory_order_relaxed);
    if (store_.show_through(watermark) && context_.feeds)
        context_.feeds->published(id_, true, [this](unsigned w) {  // the clients' feeds see it now
            runtime::loop& l = context_.threads->loop_of(w);
            if (l.is_sleeping()) l.wake();
        });
    if (sync_->empty()) return 0;
    const std::size_t answered = sync_->release(watermark, loop_.clock().now(), [this](const store::write_result& r, bool acked) {
        add(acked ? metrics_.sync_acknowledged : metrics_.sync_timeouts);
        deliver(acked ? r : not_acknowledged(r));
    });
    metrics_.sync_held.store(sync_->size(), std::memory_order_relaxed);
    PERCORE_ASSERT(answered > 0 || sync_->oldest_version() > watermark);
    return answered;
}

// Whether release_synced() has something to do: a follower acknowledged what is held or shown.
bool shard::sync_ready() const {
    const std::uint64_t watermark = context_.sync->watermark(id_);
    return (!sync_->empty() && sync_->oldest_version() <= watermark) ||
           (store_.held_snapshots() > 0 && store_.current()->high_version() < watermark);
}

// A batch was settled (published, or failed): shards whose change feeds wait look again.
void shard::signal_feeds() {
    if (!context_.feeds) return;
    publish_changes(*context_.feeds, context_.apps, id_, store_.classes_published(), [this](unsigned w) {
        runtime::loop& l = context_.threads->loop_of(w);
        if (l.is_sleeping()) l.wake();
    });
}

std::size_t shard::flush_outbox() {
    auto& out = context_.mail->outbox_of(id_);
    std::size_t moved = out.flush();
    metrics_.messages_sent.store(out.sent(), std::memory_order_relaxed);
    metrics_.wakeups_sent.store(out.wakeups(), std::memory_order_relaxed);
    return moved;
}

void shard::begin_stop() {
    stop_started_ = true;
    http_.close();
    if (tls_) tls_->close();
    // Before the pool's shutdown: long polls are answered now with what they have (they would hold
    // the drain), backups cut off without their end (not ended cleanly by the pool), an exchange
    // in flight (a delivery, a follower's page) is repeated after the restart.
    tasks_.begin_stop();
    pool_.begin_shutdown();
    stop_deadline_ = loop_.clock().now() + stop_grace;
}

void shard::check_stop() {
    if (!context_.threads->stopping()) return;
    if (!stop_started_) begin_stop();
    if (context_.threads->aborting()) {
        // The start was aborted: a shard never ran, so its answers and its drain cannot be waited
        // for. Nothing is lost: writes are acknowledged once durable; the rest never will be.
        pool_.close_all();
        exit_ = true;
        return;
    }
    if (!drained_ && pool_.open_connections() == 0 && outstanding_remote_ == 0) {
        drained_ = true;
        context_.drained_one();
    }
    if (!drained_ && loop_.clock().now() > stop_deadline_) pool_.close_all();
    if (drained_ && ready_to_exit()) exit_ = true;
}

bool shard::ready_to_exit() const {
    // (held sync results are answered within --sync-timeout: another shard's drain waits for them)
    return context_.all_drained() && !context_.mail->has_inbound(id_) && !store_.has_pending() && !store_.in_flight() &&
           !context_.mail->outbox_of(id_).has_backlog() && (!sync_ || sync_->empty());
}

}  // namespace percore::shards
