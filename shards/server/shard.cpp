#include "shards/server/shard.hpp"

#include <unistd.h>

#include <ctime>
#include <string>

#include "net/client_socket.hpp"
#include "net/tls_client_socket.hpp"
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
      service_(*this, context.view, metrics_, context.apps, context.auth),
      pool_(loop_.clock(), service_, limits),
      http_(loop_, poller_, pool_),
      deliveries_(*this, context.apps, context.view.data_identity(), *this, context.deliveries_timing, metrics_, loop_) {
    loop_.attach(*this);
    service_.attach_feeds(this, context.feeds);
    service_.attach_backups(this, backup_source{context.layout.root, context.layout.generation, context.layout.shards});
    if (context.follow && context.options.follow_url) {
        service_.set_follower(*context.options.follow_url);
        if (id_ == 0)
            follower_ = std::make_unique<follower>(*this, context.apps, context.view, static_cast<delivery_transports&>(*this), loop_,
                                                   follow_config{*context.options.follow_url, context.options.follow_token},
                                                   *context.follow, context.auth.on);
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
    work += service_.feeds_step();
    work += service_.backups_step();
    work += step_deliveries();
    if (follower_ && !stop_started_) work += follower_->step(loop_.clock().now().time_since_epoch().count());
    if (!stop_started_) work += store_.compact_step();
    // a follower's deleted apps are erased by the primary's erasures, copied (follower.hpp)
    if (!stop_started_ && !context_.follow) work += service_.administration().step();
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
    return context_.mail->has_inbound(id_) || store_.ready() || service_.feeds_news() || service_.backups_ready() ||
           deliveries_.has_work(loop_.clock().now().time_since_epoch().count()) || context_.mail->outbox_of(id_).has_backlog() ||
           (!stop_started_ && !context_.follow && service_.administration().has_work()) ||
           (follower_ && !stop_started_ && follower_->has_work(loop_.clock().now().time_since_epoch().count()));
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
    service_.administration().recovered(*store_.current(), context_.auth.on);
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
        service_.backup_captured(m.tag, m.part.take());
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
    if (write_ticket::decode(r.tag).delivery() && deliveries_.write_done(r.tag, r)) return;
    if (follower_ && follower_->write_done(r.tag, r)) return;
    if (auto answer = service_.write_done(r.tag, r)) pool_.complete(write_ticket::decode(m.tag).answer, *answer);
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
        if (t.delivery() && deliveries_.write_done(r.tag, r)) return;
        if (follower_ && follower_->write_done(r.tag, r)) return;
        if (auto answer = service_.write_done(r.tag, r)) pool_.complete(t.answer, *answer);
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
    for (const store::write_result& r : results_) deliver(r);
    if (!results_.empty()) signal_feeds();
    return results_.size();
}

// Deliveries run on the shard that holds their records (delivery_engine.hpp); while it runs any,
// other shards' commits wake it (feed_signal), as they wake waiting feeds.
std::size_t shard::step_deliveries() {
    if (stop_started_ || context_.follow) return 0;  // a follower copies delivery records, it does not run them
    std::size_t work = deliveries_.step(loop_.clock().now().time_since_epoch().count());
    if (context_.feeds) context_.feeds->set_deliveries(id_, static_cast<std::uint32_t>(deliveries_.runs()));
    return work;
}

std::unique_ptr<net::client_transport> shard::make(const delivery_url& url, const std::string& ca_file,
                                                   const net::socket_address& peer, std::string& error) {
    if (!url.https) return std::make_unique<net::client_socket>(loop_, poller_, peer);
    // one trust configuration per ca_file (the system's CAs for none), made on first use
    auto it = tls_clients_.find(ca_file);
    if (it == tls_clients_.end()) {
        auto made = crypto::make_tls_client(ca_file);
        if (!made) {
            error = "TLS: " + std::string(made.error().message());
            return nullptr;
        }
        it = tls_clients_.emplace(ca_file, std::make_unique<crypto::tls_client>(std::move(*made))).first;
    }
    std::string host = url.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return std::make_unique<net::tls_client_socket>(loop_, poller_, peer, *it->second, std::move(host));
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
    deliveries_.stop();  // an exchange in flight is repeated after the restart (at least once)
    if (follower_) follower_->stop();  // a page in flight is copied again after the restart
    http_.close();
    if (tls_) tls_->close();
    service_.end_feeds();  // long polls answered now with what they have: they would hold the drain
    service_.end_backups();  // cut off without their end (before the pool ends streams cleanly)
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
    return context_.all_drained() && !context_.mail->has_inbound(id_) && !store_.has_pending() && !store_.in_flight() &&
           !context_.mail->outbox_of(id_).has_backlog();
}

}  // namespace percore::shards
