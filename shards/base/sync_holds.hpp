// sync_holds: one primary shard's write results held until a synchronous follower has them
// (SPEC §12, --replication sync): answered in version order once the shard's watermark
// (sync_acks.hpp) covers the batch that made them, or, past the sync timeout, answered as not
// acknowledged (the caller turns that into 503 {"error":"no synchronous follower"}).
//
// Contract
// - Owned by one shard (in sync mode only); every call on that shard's thread.
// - hold(): the results of one published batch with that batch's snapshot's high version (a result
//   that changed nothing waits too: what it was judged against may not be acknowledged yet).
//   Batches come in version order, so the queue is in version order and in deadline order.
// - release(watermark, now, answer) answers, front first, every result whose version <= watermark
//   (acknowledged = true) and then every result whose deadline passed (acknowledged = false);
//   returns how many it answered. A result is answered exactly once.
// - The clock is the caller's (a test's fake): time points only, never read here.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <span>

#include "shards/runtime/check.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

// A result held past the timeout travels home (shard_message carries outcome and refusal) as
// unavailable with this refusal code, which no write gate gives (its codes are for
// quota_exceeded): every issuer treats it as unavailable, and the connection's answer is 503
// {"error":"no synchronous follower"} (http/document_service.hpp).
inline constexpr std::uint8_t no_sync_follower_refusal = 0xff;

inline store::write_result not_acknowledged(store::write_result r) {
    r.outcome = store::write_outcome::unavailable;
    r.refusal = no_sync_follower_refusal;
    return r;
}
inline bool no_sync_follower(const store::write_result& r) {
    return r.outcome == store::write_outcome::unavailable && r.refusal == no_sync_follower_refusal;
}

class sync_holds {
public:
    using clock = std::chrono::steady_clock;
    explicit sync_holds(clock::duration timeout) : timeout_(timeout) { PERCORE_REQUIRES(timeout.count() > 0); }

    void hold(std::span<const store::write_result> results, std::uint64_t version, clock::time_point now) {
        PERCORE_REQUIRES(held_.empty() || held_.back().version <= version);
        for (const store::write_result& r : results) held_.push_back(held{r, version, now + timeout_});
    }

    template <class Answer>
    std::size_t release(std::uint64_t watermark, clock::time_point now, Answer&& answer) {
        std::size_t answered = 0;
        while (!held_.empty() && (held_.front().version <= watermark || held_.front().deadline <= now)) {
            const held h = held_.front();
            held_.pop_front();
            ++answered;
            answer(h.result, h.version <= watermark);
        }
        return answered;
    }

    bool empty() const { return held_.empty(); }
    std::size_t size() const { return held_.size(); }
    // When the oldest held result times out (max(): none held): the owner's loop wakes by then.
    clock::time_point next_deadline() const { return held_.empty() ? clock::time_point::max() : held_.front().deadline; }
    // The version the oldest held result waits for (0: none held).
    std::uint64_t oldest_version() const { return held_.empty() ? 0 : held_.front().version; }

private:
    struct held {
        store::write_result result;
        std::uint64_t version;
        clock::time_point deadline;
    };
    std::deque<held> held_;
    clock::duration timeout_;
};

}  // namespace percore::shards
