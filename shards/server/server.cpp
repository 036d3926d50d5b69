#include "shards/server/server.hpp"

#include <thread>

#include "shards/cluster/limits.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <system_error>

#include <boost/asio/ip/address.hpp>
#include <boost/system/system_error.hpp>

#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {

// "Too many open files" rather than Boost's "open: Too many open files [system:24 at <source>]".
std::string error_text(const std::exception& e) {
    if (const auto* b = dynamic_cast<const boost::system::system_error*>(&e)) return b->code().message();
    if (const auto* s = dynamic_cast<const std::system_error*>(&e)) return s->code().message();
    return e.what();
}

net::connection_limits limits_of(const server_options& options) {
    net::connection_limits limits;
    limits.max_body_bytes = options.max_body_bytes;
    limits.body_budget_bytes = options.body_budget_bytes;
    limits.max_connections = options.max_connections;
    limits.idle_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.idle_timeout_seconds * 1000));
    return limits;
}

}  // namespace

void discard_message(shard_message& m) {
    if (m.type == shard_message::kind::backup_captured && m.part) {
        std::unique_ptr<backup_part> part = m.part.discard();  // its capture's files close here
        return;
    }
    if (m.type != shard_message::kind::write || !m.op) return;
    std::unique_ptr<store::write_op> op = m.op.discard();
    if (op->doc) op->doc->release();
}

server::server(const server_options& options, store::data_layout layout, std::vector<int> cpus, auth_config auth)
    : options_(options),
      layout_(std::move(layout)),
      count_(layout_.shards),
      epochs_(layout_.shards),
      apps_(layout_.shards),
      auth_(std::move(auth)),
      feeds_(layout_.shards),
      context_{options_, layout_, epochs_, *this, apps_, auth_, count_, {}, nullptr, nullptr, {}, &feeds_} {
    PERCORE_REQUIRES(count_ >= 1 && count_ <= runtime::max_shards);
    apply_delivery_timing();
    if (options_.follow_url) {
        context_.follow = &follow_status_;
        role_.become_follower(0, *options_.follow_url);
    } else if (!options_.cluster.empty()) {
        context_.follow = &follow_status_;  // fenced until the cluster's coordinator decides (SPEC §12)
    } else {
        role_.become_primary(0, board_role::never);  // without --cluster a primary holds its role alone
    }
    context_.role = &role_;
    if (options_.replication == replication_mode::sync) {
        // A follower's page request wakes the shards whose watermark it raised (sync_acks.hpp);
        // only called once the shards run, when threads_ is set.
        sync_acks_ = std::make_unique<sync_acks>(count_, [this](unsigned s) {
            runtime::loop& l = threads_->loop_of(s);
            if (l.is_sleeping()) l.wake();
        });
        context_.sync = sync_acks_.get();
    }
    // Versions start at the wall clock in microseconds (and above every recovered version), so
    // versions keep growing across restarts even for keys whose every record was compacted away.
    auto first_version = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    build_shards(first_version);
    std::vector<runtime::loop*> loops;
    for (auto& s : shards_) loops.push_back(&s->loop());
    if (!loops.empty()) mail_ = std::make_unique<runtime::mailboxes<shard_message>>(loops);
    threads_ = std::make_unique<runtime::group>(loops, std::move(cpus));
    context_.threads = threads_.get();
    context_.mail = mail_.get();
    if (!build_failure_.empty()) threads_->fail(build_failure_);
}

// PERCORE_TEST_DELIVERY_TIME_SCALE (tests only: delivery_schedule.hpp); a bad value is ignored, said once.
void server::apply_delivery_timing() {
    const std::string variable(delivery_time_scale_variable);
    const char* text = std::getenv(variable.c_str());
    if (auto t = delivery_timing_from(text)) {
        context_.deliveries_timing = *t;
        return;
    }
    std::string line = "percore: " + variable + "=" + text + " ignored: not a factor in (0, 1]\n";
    ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    (void)n;
}

// A shard that cannot be built (no descriptor left for its reactor or eventfd) fails the start:
// listen() reports it, and main exits 1 with that line instead of dying on the exception.
void server::build_shards(std::uint64_t first_version) {
    PERCORE_REQUIRES(shards_.empty() && context_.stores.empty());
    net::connection_limits limits = limits_of(options_);
    for (unsigned i = 0; i < count_; ++i) {
        try {
            shards_.push_back(std::make_unique<shard>(context_, i, limits, first_version));
            context_.stores.push_back(&shards_.back()->store());
        } catch (const std::exception& e) {
            build_failure_ = "shard " + std::to_string(i) + " cannot start: " + error_text(e);
            break;
        }
    }
}

server::~server() {
    stop();
    join();
    // Writes still queued when the start was aborted (no shard took them).
    if (mail_) mail_->discard_all([](shard_message& m) { discard_message(m); });
}

result<std::uint16_t> server::listen() {
    if (std::string why = failure(); !why.empty()) return std::unexpected(why);
    boost::system::error_code ec;
    std::string host = options_.listen_host == "localhost" ? "127.0.0.1" : options_.listen_host;
    auto address = boost::asio::ip::make_address(host, ec);
    if (ec) return std::unexpected("cannot listen on '" + options_.listen_host + "': not an IP address");
    std::uint16_t port = options_.listen_port;
    PERCORE_ASSERT(shards_.size() == count_);  // failure() says when a shard could not be built
    for (unsigned i = 0; i < count_; ++i) {
        try {
            shards_[i]->listen(boost::asio::ip::tcp::endpoint(address, port));
        } catch (const std::exception& e) {
            return std::unexpected("cannot listen on " + options_.listen_host + ":" + std::to_string(port) + ": " +
                                   error_text(e));
        }
        if (i == 0) port = shards_[0]->local_port();
    }
    return port;
}

result<std::uint16_t> server::listen_tls(crypto::tls_server& tls) {
    const std::string& spec = *options_.tls_listen;
    std::string host = options_.tls_listen_host == "localhost" ? "127.0.0.1" : options_.tls_listen_host;
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address(host, ec);
    if (ec) return std::unexpected("cannot listen on '" + spec + "' for HTTPS: not an IP address");
    std::uint16_t port = options_.tls_listen_port;
    for (unsigned i = 0; i < count_; ++i) {
        try {
            shards_[i]->listen_tls(boost::asio::ip::tcp::endpoint(address, port), tls);
        } catch (const std::exception& e) {
            return std::unexpected("cannot listen on " + host + ":" + std::to_string(port) + " for HTTPS: " + e.what());
        }
        if (i == 0) port = shards_[0]->local_tls_port();
    }
    return port;
}

void server::start() {
    PERCORE_REQUIRES(threads_ != nullptr);
    if (shards_.size() < count_) {
        // not every shard was built: the start already failed; count the missing ones as given up
        for (std::size_t i = 0; i < count_; ++i) threads_->started_one();
        return;
    }
    threads_->start([this](unsigned i) { shards_[i]->run(); });
}

bool server::any_store_failed() const {
    for (const auto& s : shards_)
        if (s->store().failed()) return true;
    return false;
}

bool server::hand_over() {
    PERCORE_REQUIRES(!options_.cluster.empty() && runtime::this_shard() == runtime::no_shard);
    context_.handover_requested.store(true, std::memory_order_release);
    threads_->loop_of(0).wake();
    const auto deadline = std::chrono::steady_clock::now() + handover_bound;
    while (!context_.handed_over.load(std::memory_order_acquire)) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

}  // namespace percore::shards
