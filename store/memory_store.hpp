// memory_store: one shard's documents in memory, written in batches, read through snapshots.
//
// Contract
// - Owned by one shard. submit(), flush() and reclaim() run on that shard's thread only.
// - Writes are applied in submission order; a write's precondition is evaluated against the state
//   left by every write submitted before it (one winner among concurrent conditional writes).
// - flush() applies the pending batch, publishes a new snapshot (release), and appends one
//   write_result per write of the batch to `done`. Nothing of a batch is visible to readers before
//   flush() publishes it, and after it every reader that begins a round sees it. (The durable store
//   keeps this interface: its flush() returns the results of batches whose sync has finished.)
// - current() may be called from any thread inside a reader round (epoch.hpp).
// - Old snapshots (and the tree nodes and documents only they hold) are freed by reclaim() once
//   every reader has passed the epoch stamped when they were replaced.
// - Versions: every write that changes a key gets the next version of this store, starting at
//   `first_version`; a version is never given twice by one store.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "store/doc_tree.hpp"
#include "store/document.hpp"
#include "store/epoch.hpp"
#include "store/precondition.hpp"
#include "store/snapshot.hpp"

namespace percore::store {

enum class write_kind : std::uint8_t { put, erase };

struct write_op {
    write_kind kind = write_kind::put;
    std::string key;               // for erase (for put, the document's key is used)
    document* doc = nullptr;       // put: one reference, given to the store
    precondition pre;
    std::uint64_t tag = 0;         // opaque to the store, returned in the result
};

enum class write_outcome : std::uint8_t { created, replaced, deleted, not_found, precondition_failed };

struct write_result {
    std::uint64_t tag = 0;
    write_outcome outcome = write_outcome::created;
    std::uint64_t version = 0;          // put: the new version; precondition_failed: the current one (0 if none)
    bool current_exists = false;        // precondition_failed: whether the key exists
};

struct batch_stats {
    std::uint64_t writes = 0;
    std::uint64_t bytes = 0;  // value bytes written
};

class memory_store {
public:
    memory_store(reader_epochs& epochs, std::uint64_t first_version);
    ~memory_store();
    memory_store(const memory_store&) = delete;
    memory_store& operator=(const memory_store&) = delete;

    void submit(write_op op);
    bool has_pending() const { return !pending_.empty(); }

    // Returns the size of the batch it applied (zero writes: nothing was published).
    batch_stats flush(std::vector<write_result>& done);

    const snapshot* current() const { return current_.load(std::memory_order_acquire); }

    // Frees what no reader can see anymore; returns how many snapshots it freed.
    std::size_t reclaim();

    std::uint64_t next_version() const { return next_version_; }

private:
    struct retired {
        const snapshot* snap;
        reader_epochs::stamp_type stamp;
    };
    void drop(const snapshot* snap);

    reader_epochs& epochs_;
    node_pool pool_;  // declared before every member holding nodes
    std::vector<write_op> pending_;
    std::atomic<const snapshot*> current_{nullptr};
    std::deque<retired> retired_;
    std::uint64_t next_version_;
    std::uint64_t sequence_ = 0;
};

}  // namespace percore::store
