#include "shards/shard.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <system_error>

#include "shards/shard_group.hpp"

namespace percore::shards {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

net::simple_answer answer_for(store::write_outcome outcome, std::uint64_t version, bool current_exists) {
    net::simple_answer a;
    switch (outcome) {
    case store::write_outcome::created:
        a.status = 201;
        a.has_etag = true;
        a.etag = version;
        break;
    case store::write_outcome::replaced:
        a.status = 204;
        a.has_etag = true;
        a.etag = version;
        break;
    case store::write_outcome::deleted:
        a.status = 204;
        break;
    case store::write_outcome::not_found:
        a.status = 404;
        a.error = "not found";
        break;
    case store::write_outcome::no_space:
        a.status = 507;
        a.error = "insufficient storage";
        break;
    case store::write_outcome::unavailable:
        a.status = 503;
        a.error = "the shard cannot write to its log";
        break;
    case store::write_outcome::precondition_failed:
        a.status = 412;
        a.error = "precondition failed";
        a.has_etag = current_exists;
        a.etag = version;
        break;
    }
    return a;
}

}  // namespace

// posix_env() for the store, except that while the shard recovers, every read (list, open, read)
// fails with ECANCELED once the group stops. Recovery then returns an error before it decides
// anything from what it read: a failed read never removes or truncates a file (store/recovery.cpp).
// After recovery it only passes calls through; the store keeps it for compaction and value reads.
class recovery_env final : public store::env {
public:
    explicit recovery_env(const shard_group& group) : group_(group) {}

    void finish() { recovering_.store(false, std::memory_order_relaxed); }
    bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

    store::io_result<std::unique_ptr<store::readable_file>> open_readable(const std::string& path) override {
        if (cancel()) return std::unexpected(ECANCELED);
        auto f = base_.open_readable(path);
        if (!f) return std::unexpected(f.error());
        return std::make_unique<file>(*this, std::move(*f));
    }
    store::io_result<std::unique_ptr<store::writable_file>> open_writable(const std::string& path) override {
        return base_.open_writable(path);
    }
    store::io_result<std::vector<std::string>> list(const std::string& directory) override {
        if (cancel()) return std::unexpected(ECANCELED);
        return base_.list(directory);
    }
    store::io_result<void> create_directory(const std::string& path) override { return base_.create_directory(path); }
    store::io_result<void> remove(const std::string& path) override { return base_.remove(path); }
    store::io_result<void> rename(const std::string& from, const std::string& to) override {
        return base_.rename(from, to);
    }
    store::io_result<void> sync_directory(const std::string& path) override { return base_.sync_directory(path); }
    bool exists(const std::string& path) override { return base_.exists(path); }

private:
    class file final : public store::readable_file {
    public:
        file(recovery_env& env, std::unique_ptr<store::readable_file> base) : env_(env), base_(std::move(base)) {}
        store::io_result<std::size_t> read_at(std::uint64_t offset, std::span<char> out) override {
            if (env_.cancel()) return std::unexpected(ECANCELED);
            return base_->read_at(offset, out);
        }
        store::io_result<std::uint64_t> size() override { return base_->size(); }
        int descriptor() const override { return base_->descriptor(); }

    private:
        recovery_env& env_;
        std::unique_ptr<store::readable_file> base_;
    };

    bool cancel() {
        if (!recovering_.load(std::memory_order_relaxed) || !group_.stopping()) return false;
        cancelled_.store(true, std::memory_order_relaxed);
        return true;
    }

    const shard_group& group_;
    store::env& base_ = store::posix_env();
    std::atomic<bool> recovering_{true};
    std::atomic<bool> cancelled_{false};
};

shard::shard(shard_group& group, unsigned id, const net::connection_limits& limits, std::uint64_t first_version)
    : group_(group),
      id_(id),
      io_(1),
      acceptor_(io_),
      tls_acceptor_(io_),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      wake_descriptor_(io_),
      tick_(io_),
      files_(std::make_unique<recovery_env>(group)),
      store_(group.epochs(), first_version),
      api_(group, *this, metrics_),
      pool_(io_, api_, limits),
      backlog_(group.size()),
      sent_to_(group.size(), 0) {
    if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    wake_descriptor_.assign(wake_fd_);
    pool_.set_wake_hook([](void* self) { static_cast<shard*>(self)->enter_round(); }, this);
}

shard::~shard() {
    pool_.close_all();
    for (auto& b : backlog_)
        for (shard_message& m : b) free_message(m);  // left when the start was aborted
    // The eventfd is not closed here but by wake_descriptor_'s destructor, after store_'s (declared
    // later), which joins the log thread: that thread calls wake() right after it marks an append
    // done, so the loop may already have taken the result and stopped while the wake() is still to
    // come. Closed earlier, that write would hit a closed (or reused) descriptor.
}

namespace {

// Every shard binds its own socket to the same address (SO_REUSEPORT): the kernel spreads the
// connections over the shards.
void open_listener(tcp::acceptor& acceptor, const tcp::endpoint& endpoint) {
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    int one = 1;
    if (::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        throw std::system_error(errno, std::generic_category(), "SO_REUSEPORT");
    acceptor.bind(endpoint);
    acceptor.listen(asio::socket_base::max_listen_connections);
}

}  // namespace

void shard::listen(const tcp::endpoint& endpoint) { open_listener(acceptor_, endpoint); }

void shard::listen_tls(const tcp::endpoint& endpoint, crypto::tls_server& tls) {
    open_listener(tls_acceptor_, endpoint);
    tls_ = &tls;
}

void shard::wake() {
    std::uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof one);
    (void)n;  // EAGAIN only when the counter is saturated: the shard is awake then anyway
}

void shard::arm_wake() {
    wake_descriptor_.async_wait(asio::posix::descriptor_base::wait_read, [this](const boost::system::error_code& ec) {
        if (ec) return;
        enter_round();
        std::uint64_t value;
        while (::read(wake_fd_, &value, sizeof value) > 0) {
        }
        arm_wake();
    });
}

void shard::on_tick() {
    tick_.expires_after(tick_interval);
    tick_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        enter_round();
        pool_.set_date(static_cast<std::int64_t>(std::time(nullptr)));
        pool_.sweep();
        on_tick();
    });
}

void shard::enter_round() {
    if (in_round_) return;
    group_.epochs().begin_round(id_);
    in_round_ = true;
    pool_.set_now(net::clock_type::now());
}

void shard::run() {
    int cpu = group_.cpu_of(id_);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    char name[16] = "percore-s";
    std::snprintf(name + 9, sizeof name - 9, "%u", id_);
    pthread_setname_np(pthread_self(), name);

    auto guard = asio::make_work_guard(io_);
    if (!start_up()) {
        if (in_round_) group_.epochs().quiesce(id_);
        group_.started_one();
        return;
    }
    group_.started_one();

    while (!exit_) {
        if (in_round_) group_.epochs().quiesce(id_);
        in_round_ = false;
        enter_round();
        std::size_t work = io_.poll();
        work += drain_inbound();
        work += commit_writes();
        if (!stop_started_) work += store_.compact_step();
        work += flush_outbound();
        store_.reclaim();
        check_stop();
        if (work == 0 && !exit_) idle_wait();
    }
    pool_.close_all();
    tick_.cancel();
    group_.epochs().quiesce(id_);
}

// Recovers the store and starts accepting; false when the shard cannot start (it told the group).
bool shard::start_up() {
    try {
        if (!recover_store()) return false;
        if (group_.aborting()) return false;  // another shard failed while this one recovered
        pool_.set_date(static_cast<std::int64_t>(std::time(nullptr)));
        arm_wake();
        on_tick();
        enter_round();
        pool_.accept_from(acceptor_);
        if (tls_) pool_.accept_from(tls_acceptor_, tls_);
        return true;
    } catch (const std::exception& e) {
        group_.fail("shard " + std::to_string(id_) + " cannot start: " + e.what());
    } catch (...) {
        group_.fail("shard " + std::to_string(id_) + " cannot start");
    }
    return false;
}

bool shard::recover_store() {
    std::string dir = group_.layout().shard_directory(id_);
    auto stats = store_.recover(*files_, dir);
    files_->finish();
    if (!stats) {
        // Given up because the group stops (another shard failed, or SIGTERM): not a failure.
        group_.fail(files_->cancelled() ? std::string() : "shard " + std::to_string(id_) + ": " + stats.error());
        return false;
    }
    if (group_.aborting()) return false;  // no new log segment for a start that will not happen
    metrics_.recovery_seconds.store(stats->seconds, std::memory_order_relaxed);
    std::string line = "percore: shard " + std::to_string(id_) + " recovered " + std::to_string(stats->records) +
                       " records (" + std::to_string(store_.current()->document_count()) + " documents) from " +
                       std::to_string(stats->segments) + " segments in " + std::to_string(stats->seconds) + " s";
    if (!stats->notes.empty()) line += "; " + stats->notes;
    line += "\n";
    ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    (void)n;
    store::log_options o;
    o.directory = dir;
    o.shard = id_;
    o.sync = group_.options().durability == durability_mode::sync;
    o.segment_target_bytes = group_.options().segment_bytes;
    store_.attach_log(std::make_unique<store::shard_log>(store::posix_env(), o, stats->next_segment_id, stats->segment_ids,
                                                          [this] { wake(); }));
    return true;
}

bool shard::has_inbound() const {
    for (unsigned from = 0; from < group_.size(); ++from)
        if (from != id_ && !group_.queue(from, id_).empty()) return true;
    return false;
}

void shard::idle_wait() {
    group_.epochs().quiesce(id_);
    in_round_ = false;
    sleeping.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool backlog = false;
    for (const auto& b : backlog_) backlog = backlog || !b.empty();
    if (has_inbound() || store_.ready() || backlog) {
        sleeping.store(false, std::memory_order_relaxed);
        return;
    }
    pool_.asleep();
    io_.run_one();
    sleeping.store(false, std::memory_order_relaxed);
}

std::size_t shard::drain_inbound() {
    std::size_t total = 0;
    for (unsigned from = 0; from < group_.size(); ++from) {
        if (from == id_) continue;
        total += group_.queue(from, id_).drain(
            [this](shard_message& m) {
                add(metrics_.messages_received);
                if (m.type == shard_message::kind::write) {
                    store_.submit(std::move(*m.op));
                    delete m.op;
                } else {
                    --outstanding_remote_;
                    pool_.complete(tag_ticket(m.tag), answer_for(m.outcome, m.version, m.current_exists));
                }
            },
            drain_batch_messages);
    }
    return total;
}

void shard::submit(unsigned owner, store::write_op op) {
    if (owner == id_) {
        store_.submit(std::move(op));
        return;
    }
    shard_message m;
    m.type = shard_message::kind::write;
    m.op = new store::write_op(std::move(op));
    ++outstanding_remote_;
    add(metrics_.remote_writes);
    send(owner, m);
}

void shard::deliver(std::uint64_t tag, store::write_outcome outcome, std::uint64_t version, bool current_exists) {
    unsigned origin = tag_origin(tag);
    if (origin == id_) {
        pool_.complete(tag_ticket(tag), answer_for(outcome, version, current_exists));
        return;
    }
    shard_message m;
    m.type = shard_message::kind::write_done;
    m.outcome = outcome;
    m.current_exists = current_exists;
    m.tag = tag;
    m.version = version;
    send(origin, m);
}

std::size_t shard::commit_writes() {
    if (!store_.ready()) return 0;
    results_.clear();
    bool was_in_flight = store_.in_flight();
    store::batch_stats stats = store_.advance_batches(results_);
    if (was_in_flight && !store_.in_flight() && store_.log()) metrics_.record_sync(store_.last_sync_ns());
    if (stats.writes) metrics_.record_batch(stats.writes, stats.bytes);
    for (const store::write_result& r : results_) deliver(r.tag, r.outcome, r.version, r.current_exists);
    return results_.size();
}

void shard::send(unsigned to, const shard_message& m) {
    add(metrics_.messages_sent);
    sent_to_[to] = 1;
    if (backlog_[to].empty() && group_.queue(id_, to).try_push(m)) return;
    backlog_[to].push_back(m);
}

std::size_t shard::flush_outbound() {
    std::size_t moved = 0;
    bool any = false;
    for (unsigned to = 0; to < group_.size(); ++to) {
        auto& b = backlog_[to];
        while (!b.empty() && group_.queue(id_, to).try_push(b.front())) {
            b.pop_front();
            ++moved;
            sent_to_[to] = 1;
        }
        any = any || sent_to_[to];
    }
    if (!any) return moved;
    // Pairs with the fence in the receiver's idle_wait(): either it sees our messages before it
    // sleeps, or we see it sleeping and wake it.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (unsigned to = 0; to < group_.size(); ++to) {
        if (!sent_to_[to]) continue;
        sent_to_[to] = 0;
        shard& receiver = group_.at(to);
        if (receiver.sleeping.load(std::memory_order_relaxed)) {
            receiver.wake();
            add(metrics_.wakeups_sent);
        }
    }
    return moved;
}

void shard::check_stop() {
    if (!group_.stopping()) return;
    auto now = pool_.now();
    if (!stop_started_) {
        stop_started_ = true;
        boost::system::error_code ec;
        acceptor_.close(ec);
        tls_acceptor_.close(ec);
        pool_.begin_shutdown();
        stop_deadline_ = now + stop_grace;
    }
    if (group_.aborting()) {
        // The start was aborted: a shard never ran, so its answers and its drain cannot be waited
        // for. Nothing is lost: writes are acknowledged once durable; the rest never will be.
        pool_.close_all();
        exit_ = true;
        return;
    }
    if (!drained_ && pool_.open_connections() == 0 && outstanding_remote_ == 0) {
        drained_ = true;
        group_.drained_one();
    }
    if (!drained_ && now > stop_deadline_) pool_.close_all();
    if (drained_ && group_.all_drained() && !has_inbound() && !store_.has_pending() && !store_.in_flight()) {
        bool backlog = false;
        for (const auto& b : backlog_) backlog = backlog || !b.empty();
        if (!backlog) exit_ = true;
    }
}

}  // namespace percore::shards
