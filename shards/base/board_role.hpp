// board_role: what this board is in its replica group right now (SPEC §10, §12) — a primary that
// may acknowledge writes until a deadline, a follower of some primary, or neither (fenced, or not
// yet decided) — the one fact every shard reads on every write.
//
// Contract
// - One per server, owned by the server; outlives every shard.
// - Written by one thread only: the main thread before the shards run (a plain primary, or
//   --follow's follower), then with --cluster the coordinator (shard 0's thread). Read by any
//   shard's thread, lock-free but for leader_url() (a mutex: only refusals and /_health read it).
// - may_acknowledge(now) is the fence (SPEC §12 "Fencing"): a write is admitted and its success
//   answered only while the steady clock is before acknowledge_until. The coordinator moves that
//   deadline forward after each lease renewal (to when the lease can first expire, less a margin);
//   when it cannot renew, the deadline passes by itself, so a board whose coordinator stalls stops
//   acknowledging on every shard without being told. Without --cluster a primary's deadline is
//   never (INT64_MAX) and a follower's is 0.
// - epoch: the group's epoch as this board last saw it (0 without --cluster or before the first).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>

namespace percore::shards {

// A group's or a board's name (--group, --board; SPEC §12): a-z, 0-9, '-' and '_', 1..64 bytes,
// not starting with '_' — what an app's name may be (SPEC §2), so it is safe in an etcd key.
inline bool is_board_name(std::string_view name) {
    if (name.empty() || name.size() > 64 || name.front() == '_') return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
    return true;
}

enum class board_kind : std::uint8_t {
    primary,   // takes writes while may_acknowledge()
    follower,  // copies leader_url(); writes are refused 421 naming it
    fenced,    // lost its lease, or has not decided yet: writes 503 with Retry-After
};

class board_role {
public:
    using clock = std::chrono::steady_clock;
    static constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();

    board_kind kind() const { return kind_.load(std::memory_order_acquire); }
    std::uint64_t epoch() const { return epoch_.load(std::memory_order_relaxed); }
    // Whether a write may be admitted, or its success answered, at `now`.
    bool may_acknowledge(clock::time_point now) const {
        return kind() == board_kind::primary &&
               now.time_since_epoch().count() < acknowledge_until_.load(std::memory_order_acquire);
    }
    // Without --cluster a primary's deadline is never: no clock read (two a write were 40 of its
    // ~16,900 instructions, callgrind put16).
    bool may_acknowledge_now() const {
        if (kind() != board_kind::primary) return false;
        const std::int64_t until = acknowledge_until_.load(std::memory_order_acquire);
        return until == never || clock::now().time_since_epoch().count() < until;
    }
    // The primary a follower copies (empty otherwise); bumped `leader_changes()` each time it moves.
    std::string leader_url() const {
        std::lock_guard lock(mutex_);
        return leader_url_;
    }
    std::uint64_t leader_changes() const { return leader_changes_.load(std::memory_order_acquire); }

    // The writer's (see Contract).
    void become_primary(std::uint64_t epoch, std::int64_t until_ns) {
        epoch_.store(epoch, std::memory_order_relaxed);
        acknowledge_until_.store(until_ns, std::memory_order_release);
        set_leader({});
        kind_.store(board_kind::primary, std::memory_order_release);
    }
    void extend(std::int64_t until_ns) { acknowledge_until_.store(until_ns, std::memory_order_release); }
    void become_follower(std::uint64_t epoch, std::string url) {
        acknowledge_until_.store(0, std::memory_order_release);
        kind_.store(board_kind::follower, std::memory_order_release);
        epoch_.store(epoch, std::memory_order_relaxed);
        set_leader(std::move(url));
    }
    void fence() {
        acknowledge_until_.store(0, std::memory_order_release);
        kind_.store(board_kind::fenced, std::memory_order_release);
    }

private:
    void set_leader(std::string url) {
        std::lock_guard lock(mutex_);
        if (url == leader_url_) return;
        leader_url_ = std::move(url);
        leader_changes_.fetch_add(1, std::memory_order_acq_rel);
    }

    std::atomic<board_kind> kind_{board_kind::fenced};
    std::atomic<std::int64_t> acknowledge_until_{0};  // steady clock ns
    std::atomic<std::uint64_t> epoch_{0};
    std::atomic<std::uint64_t> leader_changes_{0};
    mutable std::mutex mutex_;
    std::string leader_url_;
};

}  // namespace percore::shards
