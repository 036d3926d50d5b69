// app_registry: every app the server knows (SPEC §7) — its state, its quota, its usage and its
// counters — shared by all shards of one server.
//
// Contract
// - What: the catalog's durable records (catalog.hpp) are the truth across restarts; the registry is
//   their in-memory index, rebuilt from the snapshots at start (every shard adds what its slice
//   holds) and kept current by whoever applies a change: a write's quota gate at the owner when it
//   is applied, the administration when a catalog write is acknowledged. Every change is made
//   before the answer that reports it, so a request admitted after an answer sees it, on any shard.
// - Ownership: the registry owns its entries; an entry lives as long as the registry (a deleted
//   app's entry stays, absent, and is reused if the name is created again), so a pointer or an
//   index to one never dangles. At most max_apps names per process life.
// - Threads: every function may be called from any shard's thread at any time. Entries are made of
//   atomics: quotas and state with release/acquire; usage (documents, bytes) counted per shard,
//   each shard on its own line what it applied, summed on read; a write that would grow a usage
//   that has a quota takes the entry's usage mutex to check the sum and count (so concurrent
//   writers on several shards never pass it together, and an app without those quotas writes no
//   line another shard writes); counters per shard with one writer each (relaxed). insert() takes
//   a mutex (a new name is rare); find() takes none.
// - Cost: an app that exists but is idle costs its entry (five 64-byte lines, apart by who writes
//   them, plus two lines of counters and usage per shard and two more for threads that are no
//   shard) and nothing else: no thread, no buffer.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "net/limits.hpp"
#include "store/write_gate.hpp"

namespace percore::shards {

// Names one process life may hold; 16384 × 8 B of table, untouched (so not resident) until used.
inline constexpr std::size_t max_apps = 16384;
inline constexpr std::uint64_t unlimited = ~std::uint64_t{0};

enum class app_state : std::uint8_t {
    absent,    // never existed, or deleted (its documents and tokens are gone)
    implicit,  // --auth off: made by its first write, or found in the store at start
    created,   // made by PUT /_apps/{app} (a catalog record holds it)
    deleting,  // DELETE /_apps/{app} answered; documents and tokens are being erased
};

struct app_quota {
    std::uint64_t documents = unlimited;
    std::uint64_t bytes = unlimited;
    std::uint64_t max_document_bytes = unlimited;
    std::uint64_t requests_per_second = unlimited;
    std::uint64_t connections = unlimited;
    bool operator==(const app_quota&) const = default;
};

// The control-plane objects an app holds, counted against SPEC §7's caps (limits.hpp:
// max_app_tokens, max_app_deliveries).
enum class app_object : std::uint8_t { token, delivery };

// Which quota a refused write passed.
enum class quota_verdict : std::uint8_t { ok, documents, bytes };

// One shard's counters for one app (one writer: that shard), and its share of the app's usage, in
// lines no other shard writes.
struct alignas(64) app_counters {
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> refused_quota{0};
    std::atomic<std::uint64_t> refused_rate{0};
    std::atomic<std::uint64_t> refused_auth{0};
    // the change feed (SPEC §8)
    std::atomic<std::uint64_t> changed_batches{0};       // batches this shard published that changed the app (owner;
                                                         // stored with release after the snapshot that holds them)
    std::atomic<std::uint64_t> feeds_open{0};            // the app's long polls and streams waiting here (a gauge)
    std::atomic<std::uint64_t> feed_changes_sent{0};     // changes this shard's feeds of the app listed
    std::atomic<std::uint64_t> feed_cursors_expired{0};  // the app's cursors this shard answered 410
    // the usage this shard applied (app_entry::documents(), bytes(): the sum over shards); may be
    // below zero when another thread counted what this shard later removed (recovery at start)
    std::atomic<std::int64_t> documents{0};
    std::atomic<std::int64_t> bytes{0};
};
static_assert(sizeof(app_counters) == 128, "two cache lines per app and shard (the registry's cost per app)");

class app_entry final : public store::write_gate {
public:
    app_entry(std::string_view name, std::uint32_t index, unsigned shards);

    std::string_view name() const { return {name_.data(), name_size_}; }
    // 1-based; the app's turn class (fair turns and fair batches).
    std::uint32_t index() const { return index_; }

    app_state state() const { return state_.load(std::memory_order_acquire); }
    void set_state(app_state s) { state_.store(s, std::memory_order_release); }
    // from → to, only if the state is `from` now.
    bool promote(app_state from, app_state to) {
        return state_.compare_exchange_strong(from, to, std::memory_order_acq_rel, std::memory_order_acquire);
    }
    bool exists() const { app_state s = state(); return s == app_state::implicit || s == app_state::created; }

    app_quota quota() const;
    bool limits_rate() const { return quota_requests_per_second_.load(std::memory_order_acquire) != unlimited; }
    std::uint64_t max_document_bytes() const { return quota_max_document_bytes_.load(std::memory_order_acquire); }
    void set_quota(const app_quota& q);

    // Committed usage: documents and value bytes of the app, as published (sums over the shards).
    std::int64_t documents() const { return usage_sum(&app_counters::documents); }
    std::int64_t bytes() const { return usage_sum(&app_counters::bytes); }
    // At start, each shard adds what its slice holds.
    void add_recovered(std::int64_t documents, std::int64_t bytes);
    // Whether a write that changes usage by (documents, bytes) would pass the quota now (admission,
    // before the body is read: the request's own estimate from the owner's snapshot).
    quota_verdict would_pass(std::int64_t documents, std::int64_t bytes) const;
    // Resets the usage (a deleted app's documents, tokens and deliveries are gone).
    void reset_usage();

    // Tokens and deliveries (SPEC §7: at most `cap` of each per app). Whoever makes one reserves
    // its place before the catalog write (false: `cap` are held or reserved; nothing changes) and
    // releases it when that write fails; whoever removes one releases it once removed. At start
    // every shard adds the records its slice holds. Exact under concurrency (a CAS loop).
    [[nodiscard]] bool reserve(app_object kind, std::uint64_t cap);
    void release(app_object kind);
    void add_recovered(app_object kind) { objects(kind).fetch_add(1, std::memory_order_acq_rel); }
    std::uint64_t held(app_object kind) const {
        return (kind == app_object::token ? tokens_ : deliveries_).load(std::memory_order_acquire);
    }

    // store::write_gate: applied at the owner, in the batch (exact under concurrency).
    // 0, or the quota_verdict that refused (counted as a quota refusal of the applying shard).
    std::uint8_t try_apply(std::int64_t documents, std::int64_t bytes) override;
    void undo(std::int64_t documents, std::int64_t bytes) override;

    // Connections that presented a token of the app (or addressed it, with --auth off).
    bool take_connection();
    void drop_connection();
    std::uint64_t connections() const { return connections_.load(std::memory_order_relaxed); }

    // Requests per second: a generic cell rate algorithm (one atomic) with a burst of one second.
    // 0: admitted; else the seconds after which to retry.
    std::uint32_t take_request(std::int64_t now_ns);

    app_counters& counters(unsigned shard) { return counters_[shard]; }
    const app_counters& counters(unsigned shard) const { return counters_[shard]; }
    unsigned shard_count() const { return shards_; }

private:
    // Lines by who writes them (a line two shards write per request moves between their caches on
    // every write, and slows every reader of that line too; docs/perf/shared-writes.md):
    // read on every request (name, state, quotas), written only by the administration
    alignas(64) std::array<char, net::max_app_bytes> name_{};
    std::uint8_t name_size_ = 0;
    std::uint32_t index_;
    unsigned shards_;
    std::atomic<app_state> state_{app_state::absent};
    std::atomic<std::uint64_t> quota_documents_{unlimited};
    std::atomic<std::uint64_t> quota_bytes_{unlimited};
    std::atomic<std::uint64_t> quota_max_document_bytes_{unlimited};
    std::atomic<std::uint64_t> quota_requests_per_second_{unlimited};
    std::atomic<std::uint64_t> quota_connections_{unlimited};
    std::unique_ptr<app_counters[]> counters_;  // shards_ + 1: the last for threads that are no shard
    // taken by any shard per write that would grow a usage with a quota (the quota is the app's)
    alignas(64) std::mutex usage_mutex_;
    std::int64_t usage_sum(std::atomic<std::int64_t> app_counters::*field) const;
    // the calling shard's line; threads that are no shard (start, tests) share one more line
    app_counters& own_usage();
    void count_usage(std::int64_t documents, std::int64_t bytes);
    // written by any shard per connection that presents a token (not per request), per token or
    // delivery made or removed
    alignas(64) std::atomic<std::uint64_t> connections_{0};
    std::atomic<std::uint64_t> tokens_{0};
    std::atomic<std::uint64_t> deliveries_{0};
    std::atomic<std::uint64_t>& objects(app_object kind) { return kind == app_object::token ? tokens_ : deliveries_; }
    // written by any shard per request of an app with a requests_per_second quota: the limit is
    // the app's, across shards (SPEC §7; docs/decisions.md)
    alignas(64) std::atomic<std::int64_t> rate_tat_ns_{0};  // GCRA: the theoretical arrival time
};

class app_registry {
public:
    explicit app_registry(unsigned shards);
    ~app_registry();
    app_registry(const app_registry&) = delete;
    app_registry& operator=(const app_registry&) = delete;

    // The entry of `name`, or null when the name was never seen (any state: check exists()).
    app_entry* find(std::string_view name) const;
    // The entry of `name`, made (absent) when new; null when max_apps names are taken.
    app_entry* insert(std::string_view name);
    // By index (1-based, as app_entry::index()); null for 0 or an index never given.
    app_entry* at(std::uint32_t index) const;

    // Names of apps that exist, in byte-wise order.
    std::vector<std::string> names() const;
    // Every entry ever made (any state), in the order they were made.
    std::vector<app_entry*> entries() const;
    unsigned shard_count() const { return shards_; }

    // Bumped (release) after a token record is erased and before the erase is answered: a
    // connection that verified its token at the current value skips looking the record up again.
    std::uint64_t token_epoch() const { return token_epoch_.load(std::memory_order_acquire); }
    void token_revoked() { token_epoch_.fetch_add(1, std::memory_order_acq_rel); }

    // When each token was last used (unix seconds), in memory only: noted at most once a second
    // per connection, so a mutex is cheap; forgotten when the token is revoked.
    void note_token_use(std::string_view id, std::int64_t unix_seconds);
    std::int64_t token_last_used(std::string_view id) const;  // 0: not since the start
    void forget_token(std::string_view id);

private:
    std::size_t slot_of(app_entry** table, std::string_view name) const;

    unsigned shards_;
    // open addressing, max_apps × 2 slots so probes stay short; made by the first insert (a server
    // without apps maps nothing: idle RSS), zero pages until touched (calloc), published atomically
    std::atomic<app_entry**> table_{nullptr};
    std::atomic<std::uint32_t> count_{0};
    std::atomic<std::uint64_t> token_epoch_{0};
    mutable std::mutex insert_mutex_;
    std::vector<std::unique_ptr<app_entry>> owned_;  // under insert_mutex_
    app_entry** by_index_holder_ = nullptr;          // index - 1 → entry; calloc'd with table_, read atomically
    mutable std::mutex token_use_mutex_;
    std::unordered_map<std::string, std::int64_t> token_use_;  // under token_use_mutex_
};

}  // namespace percore::shards
