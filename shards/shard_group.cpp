#include "shards/shard_group.hpp"

#include <sched.h>

#include <boost/asio/ip/address.hpp>

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
    for (unsigned i = 0; i < count_; ++i) shards_.push_back(std::make_unique<shard>(*this, i, limits, first_version));
}

shard_group::~shard_group() {
    stop();
    join();
}

std::expected<std::uint16_t, std::string> shard_group::listen() {
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
                                   e.what());
        }
        if (i == 0) port = shards_[0]->local_port();
    }
    return port;
}

void shard_group::start() {
    for (unsigned i = 0; i < count_; ++i) threads_.emplace_back([this, i] { shards_[i]->run(); });
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
    std::lock_guard lock(failure_mutex_);
    if (failure_.empty()) failure_ = why;
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
