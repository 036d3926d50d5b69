// sync_acks: what synchronous followers acknowledged (SPEC §12, --replication sync) — per primary
// shard, the highest version some follower holds durable, shared by every shard of the server.
//
// A follower asks for its next page only once everything of the page before is durable on it
// (follower.hpp), so the cursor of its page request names, per shard, versions it holds durable:
// that request is the acknowledgement (no round trip of its own; the follower's group commit
// carries it). Whichever shard parses the request raises the watermarks it names (a monotonic max),
// then wakes each shard whose watermark rose, which answers the writes it held (sync_holds.hpp).
//
// Contract
// - One per server in sync mode (none in async: nothing of this runs there), owned by the server,
//   outliving every shard. Built on the main thread with the shard count and a waker (which must be
//   callable from any shard's thread: the loop's eventfd wake).
// - acknowledge(): any shard's thread, inside a round. watermark(), last_ack_ns(): any thread.
// - Cross-core: each watermark is its own atomic (release on raise, acquire on read), so the owner
//   that reads a raised one and then shows its snapshots shows only what a follower has.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shards/runtime/check.hpp"

namespace percore::shards {

// A group has a few boards; 16 bound the table whatever names followers send. A board's name is
// at most 64 bytes (--board).
inline constexpr std::size_t max_sync_boards = 16;
inline constexpr std::size_t max_sync_board_name_bytes = 64;

class sync_acks {
public:
    using waker = std::function<void(unsigned shard)>;
    sync_acks(unsigned shards, waker wake)
        : slots_(std::make_unique<slot[]>(shards)), shards_(shards), wake_(std::move(wake)) {
        PERCORE_REQUIRES(shards > 0 && wake_);
    }

    // A follower's page request named `versions` (one per shard of this server: a cursor of this
    // data directory and layout) at steady time `now_ns`. Returns how many shards it moved.
    unsigned acknowledge(std::span<const std::uint64_t> versions, std::int64_t now_ns) {
        PERCORE_REQUIRES(versions.size() == shards_);
        last_ack_ns_.store(now_ns, std::memory_order_relaxed);
        unsigned moved = 0;
        for (unsigned s = 0; s < shards_; ++s) {
            std::atomic<std::uint64_t>& w = slots_[s].watermark;
            std::uint64_t seen = w.load(std::memory_order_relaxed);
            bool raised = false;
            while (versions[s] > seen && !(raised = w.compare_exchange_weak(seen, versions[s], std::memory_order_release,
                                                                             std::memory_order_relaxed))) {
            }
            if (!raised) continue;
            ++moved;
            wake_(s);
        }
        return moved;
    }

    // The highest version of `shard` some follower acknowledged (0: none yet).
    std::uint64_t watermark(unsigned shard) const {
        PERCORE_REQUIRES(shard < shards_);
        return slots_[shard].watermark.load(std::memory_order_acquire);
    }
    // --cluster: the board that sent an acknowledgement (its Percore-Board field), at `now_ns`; a
    // board past max_sync_boards is not remembered (any shard's thread; a mutex: once a page).
    void note_board(std::string_view board, std::int64_t now_ns) {
        PERCORE_REQUIRES(!board.empty() && board.size() <= max_sync_board_name_bytes);
        std::lock_guard lock(boards_mutex_);
        for (auto& b : boards_)
            if (b.name == board) {
                b.last_ns = now_ns;
                return;
            }
        if (boards_.size() < max_sync_boards) boards_.push_back({std::string(board), now_ns});
    }
    // The boards that acknowledged at or after `since_ns` (SPEC §12's sync set), by name.
    std::vector<std::string> boards_since(std::int64_t since_ns) const {
        std::lock_guard lock(boards_mutex_);
        std::vector<std::string> out;
        for (const auto& b : boards_)
            if (b.last_ns >= since_ns) out.push_back(b.name);
        std::sort(out.begin(), out.end());
        return out;
    }
    // When the last acknowledgement came (steady ns; 0: never).
    std::int64_t last_ack_ns() const { return last_ack_ns_.load(std::memory_order_relaxed); }
    unsigned shard_count() const { return shards_; }

private:
    struct alignas(64) slot {
        std::atomic<std::uint64_t> watermark{0};
    };
    std::unique_ptr<slot[]> slots_;
    unsigned shards_;
    waker wake_;
    std::atomic<std::int64_t> last_ack_ns_{0};
    struct acknowledging_board {
        std::string name;
        std::int64_t last_ns = 0;
    };
    mutable std::mutex boards_mutex_;
    std::vector<acknowledging_board> boards_;
};


}  // namespace percore::shards
