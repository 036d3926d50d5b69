#include "shards/shard_group.hpp"

#include <sched.h>
#include <signal.h>

#include <cerrno>
#include <ctime>
#include <system_error>

#include <boost/asio/ip/address.hpp>
#include <boost/system/system_error.hpp>

#include "shards/shard.hpp"

namespace percore::shards {

std::uint64_t key_hash(std::string_view key) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : key) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

namespace {

// "Too many open files" rather than Boost's "open: Too many open files [system:24 at <source>]".
std::string error_text(const std::exception& e) {
    if (const auto* b = dynamic_cast<const boost::system::system_error*>(&e)) return b->code().message();
    if (const auto* s = dynamic_cast<const std::system_error*>(&e)) return s->code().message();
    return e.what();
}

}  // namespace

void free_message(shard_message& m) {
    if (m.type != shard_message::kind::write || !m.op) return;
    if (m.op->doc) m.op->doc->release();
    delete m.op;
    m.op = nullptr;
}

unsigned owner_for_hash(std::uint64_t hash, unsigned shard_count) {
    return static_cast<unsigned>((static_cast<unsigned __int128>(hash) * shard_count) >> 64);
}

std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int i = 0; i < CPU_SETSIZE; ++i)
            if (CPU_ISSET(i, &set)) cpus.push_back(i);
    }
    if (cpus.empty()) cpus.push_back(0);
    return cpus;
}

shard_group::shard_group(const server_options& options, store::data_layout layout, std::vector<int> cpus)
    : options_(options),
      layout_(std::move(layout)),
      count_(layout_.shards),
      cpus_(std::move(cpus)),
      epochs_(layout_.shards),
      queues_(static_cast<std::size_t>(layout_.shards) * layout_.shards),
      started_(layout_.shards) {
    for (unsigned from = 0; from < count_; ++from)
        for (unsigned to = 0; to < count_; ++to)
            if (from != to) queues_[from * count_ + to] = std::make_unique<spsc_queue<shard_message>>(queue_capacity_messages);

    net::connection_limits limits;
    limits.max_body_bytes = options.max_body_bytes;
    limits.body_budget_bytes = options.body_budget_bytes;
    limits.max_connections = options.max_connections;
    limits.idle_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.idle_timeout_seconds * 1000));
    // Versions start at the wall clock in microseconds (and above every recovered version), so
    // versions keep growing across restarts even for keys whose every record was compacted away.
    auto first_version = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    // A shard that cannot be built (no descriptor left for its reactor or eventfd) fails the start:
    // listen() reports it, and main exits 1 with that line instead of dying on the exception.
    for (unsigned i = 0; i < count_; ++i) {
        try {
            shards_.push_back(std::make_unique<shard>(*this, i, limits, first_version));
        } catch (const std::exception& e) {
            fail("shard " + std::to_string(i) + " cannot start: " + error_text(e));
            break;
        }
    }
}

shard_group::~shard_group() {
    stop();
    join();
    // Writes still queued when the start was aborted (no shard took them).
    for (auto& q : queues_)
        if (q) q->drain([](shard_message& m) { free_message(m); }, ~std::size_t{0});
}

std::expected<std::uint16_t, std::string> shard_group::listen() {
    if (std::string why = failure(); !why.empty()) return std::unexpected(why);
    boost::system::error_code ec;
    std::string host = options_.listen_host == "localhost" ? "127.0.0.1" : options_.listen_host;
    auto address = boost::asio::ip::make_address(host, ec);
    if (ec) return std::unexpected("cannot listen on '" + options_.listen_host + "': not an IP address");
    std::uint16_t port = options_.listen_port;
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

std::expected<std::uint16_t, std::string> shard_group::listen_tls(crypto::tls_server& tls) {
    const std::string& spec = *options_.tls_listen;
    auto colon = spec.rfind(':');
    std::string host = spec.substr(0, colon);
    if (host == "localhost") host = "127.0.0.1";
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address(host, ec);
    if (ec) return std::unexpected("cannot listen on '" + spec + "' for HTTPS: not an IP address");
    auto port = static_cast<std::uint16_t>(std::stoul(spec.substr(colon + 1)));
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

void shard_group::start() {
    unsigned i = 0;
    try {
        for (; i < count_ && i < shards_.size(); ++i) threads_.emplace_back([this, i] { shards_[i]->run(); });
    } catch (const std::exception& e) {
        fail("shard " + std::to_string(i) + " cannot start: no thread: " + error_text(e));
    }
    if (i < count_ && failure().empty()) fail("shard " + std::to_string(i) + " cannot start: it was not built");
    for (; i < count_; ++i) started_one();  // shards without a thread count as given up
}

int shard_group::wait_started_or_signal() {
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    // Polled: shards count down a latch, and a signal can only be waited for with sigwait here.
    constexpr timespec poll_interval{0, 10'000'000};
    while (!started_.try_wait() && !aborting()) {
        int sig = ::sigtimedwait(&stop_signals, nullptr, &poll_interval);
        if (sig > 0) return sig;
    }
    return 0;
}

void shard_group::stop() {
    stopping_.store(true, std::memory_order_release);
    for (auto& s : shards_) s->wake();
}

void shard_group::join() {
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    threads_.clear();
}

void shard_group::fail(const std::string& why) {
    {
        std::lock_guard lock(failure_mutex_);
        if (failure_.empty()) failure_ = why;
    }
    aborting_.store(true, std::memory_order_release);
    stop();
}

std::string shard_group::failure() const {
    std::lock_guard lock(failure_mutex_);
    return failure_;
}

bool shard_group::any_store_failed() const {
    for (const auto& s : shards_)
        if (s->store().failed()) return true;
    return false;
}

void shard_group::drained_one() {
    drained_.fetch_add(1, std::memory_order_acq_rel);
    for (auto& s : shards_) s->wake();
}

}  // namespace percore::shards
