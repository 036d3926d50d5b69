// shard_group: every shard of the process, the queues between them, and the state they share.
//
// Contract
// - Built and bound on the main thread (listen() reports bind errors as values), then start()
//   runs one pinned thread per shard. stop() may be called from any thread (the signal waiter).
// - Start-up failure: a shard that cannot be built (listen() reports it), whose thread cannot be
//   created, or that cannot start (its store does not recover, or stop() came while it was still
//   recovering) aborts the start: fail() keeps the first reason and tells every shard to stop at
//   once, without the graceful drain (answers that the missing shard owes would never come).
//   Shards still recovering give up at their next file read, running ones close their connections
//   and leave their loop; so wait_started() returns and join() ends promptly, and main exits 1.
// - Key ownership: owner_of() hashes the store key (app '\0' key) with a hash that is fixed
//   forever (FNV-1a 64 then a 64-bit finalizer, then multiply-high by the shard count), so the
//   same key maps to the same shard on every build and platform for a given shard count.
// - queue(from, to): the single-producer single-consumer queue that `from`'s thread pushes and
//   `to`'s thread drains. One per ordered pair; none from a shard to itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <expected>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "shards/options.hpp"
#include "shards/shard_message.hpp"
#include "shards/spsc_queue.hpp"
#include "store/data_layout.hpp"
#include "store/epoch.hpp"

namespace percore::crypto {
class tls_server;
}

namespace percore::shards {

class shard;

inline constexpr std::size_t queue_capacity_messages = 4096;

std::uint64_t key_hash(std::string_view key);
// Frees what a message owns (a write's op and its document) when no shard will take it.
void free_message(shard_message& m);
unsigned owner_for_hash(std::uint64_t hash, unsigned shard_count);

// CPUs this process may run on, in order.
std::vector<int> allowed_cpus();

class shard_group {
public:
    shard_group(const server_options& options, store::data_layout layout, std::vector<int> cpus);
    ~shard_group();

    std::expected<std::uint16_t, std::string> listen();  // returns the bound port
    // --tls-listen: every shard also accepts HTTPS there; returns the bound port.
    std::expected<std::uint16_t, std::string> listen_tls(crypto::tls_server& tls);
    void start();
    void wait_started() { started_.wait(); }
    // Waits until every shard runs its loop or gave up, until a start-up failure (the reason is in
    // failure()), or until SIGTERM or SIGINT arrives (both blocked by the caller), which it returns
    // (0 otherwise) and does not act on: the caller stops the group.
    int wait_started_or_signal();
    void stop();
    void join();

    unsigned size() const { return count_; }
    shard& at(unsigned i) { return *shards_[i]; }
    const shard& at(unsigned i) const { return *shards_[i]; }
    unsigned owner_of(std::string_view key) const { return owner_for_hash(key_hash(key), count_); }
    spsc_queue<shard_message>& queue(unsigned from, unsigned to) { return *queues_[from * count_ + to]; }
    store::reader_epochs& epochs() { return epochs_; }
    const server_options& options() const { return options_; }
    int cpu_of(unsigned shard_id) const { return cpus_[shard_id % cpus_.size()]; }

    bool serving() const { return serving_.load(std::memory_order_acquire) && !stopping(); }
    void set_serving() { serving_.store(true, std::memory_order_release); }
    bool stopping() const { return stopping_.load(std::memory_order_acquire); }

    // Shutdown bookkeeping, called by shards.
    void started_one() { started_.count_down(); }
    void drained_one();
    bool all_drained() const { return drained_.load(std::memory_order_acquire) == count_; }

    const store::data_layout& layout() const { return layout_; }
    // A shard that cannot start says why (empty: it gave up because the group is stopping) and
    // the start is aborted: every shard stops at once; main exits 1.
    void fail(const std::string& why);
    std::string failure() const;
    bool aborting() const { return aborting_.load(std::memory_order_acquire); }
    // Shards whose log can no longer sync (they answer writes 503).
    bool any_store_failed() const;

private:
    server_options options_;
    store::data_layout layout_;
    unsigned count_;
    std::vector<int> cpus_;
    store::reader_epochs epochs_;
    std::vector<std::unique_ptr<spsc_queue<shard_message>>> queues_;
    std::vector<std::unique_ptr<shard>> shards_;
    std::vector<std::thread> threads_;
    std::latch started_;
    std::atomic<bool> serving_{false};
    std::atomic<bool> stopping_{false};
    std::atomic<bool> aborting_{false};
    std::atomic<unsigned> drained_{0};
    mutable std::mutex failure_mutex_;
    std::string failure_;
};

}  // namespace percore::shards
