// epoch: when may memory that readers on other threads might still be looking at be freed?
//
// Contract
// - One reader_epochs for the whole process, with one slot per reader thread (a shard).
// - A reader thread calls begin_round() before it loads any snapshot and quiesce() when it holds
//   no snapshot pointer anymore and is about to block. Pointers loaded during a round must not
//   be used after the next begin_round()/quiesce() of that thread.
// - A writer that unpublished something calls stamp() right after the new version is published;
//   the old one may be freed once passed(stamp) is true: every reader has since quiesced or
//   started a new round. stamp() and passed() may be called on any thread.
// - Memory order: begin_round() and the writer's publish+stamp are sequentially consistent, so a
//   reader that begins a round after stamp() sees the newer publication.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace percore::store {

class reader_epochs {
public:
    explicit reader_epochs(std::size_t readers);

    std::size_t readers() const { return count_; }

    // Reader thread `reader` only.
    void begin_round(std::size_t reader);
    void quiesce(std::size_t reader);

    // A record of every reader's epoch at one moment.
    struct stamp_type {
        std::vector<std::uint64_t> epochs;
    };
    void stamp(stamp_type& out) const;
    bool passed(const stamp_type& s) const;

private:
    struct alignas(64) slot {
        // even: inside a round (may hold snapshot pointers); odd: quiescent
        std::atomic<std::uint64_t> epoch{1};
    };
    std::size_t count_;
    std::unique_ptr<slot[]> slots_;
};

}  // namespace percore::store
