// shard_store: one shard's documents — applied in batches, made durable by the shard's log, and
// read by every shard through immutable snapshots.
//
// Contract
// - Owned by one shard. submit(), advance_batches(), compact_step(), reclaim() and recover() run on
//   that shard's thread only.
// - Writes of one turn class (write_op::turn_class) are applied in submission order; a write's
//   precondition is evaluated against the state left by every write applied before it, of any class
//   (one winner among concurrent conditional writes).
// - advance_batches(), once per loop round, moves the batches one step along: if the batch in flight
//   has become durable, publishes its snapshot and appends its results to `done`; then, if no batch
//   is in flight, forms the next one from the pending writes (at most max_batch_bytes of records, at
//   least one write; limits.hpp), applies it to a working tree and hands its records to the log.
//   Fair batches: while writes of several classes wait, the classes take turns, one write per turn,
//   in the order of their class ids, beginning after the class that took the last turn before; a
//   class whose records in the batch reached max_class_batch_bytes skips its turns while another
//   class has writes waiting. So one class's backlog, however long, cannot keep another class's
//   write out of the next batch (unless the writes taken before it, one per class, fill it). With
//   one class a batch is the arrival-order prefix, as it always was.
//   Without a log (attach_log() never called) a batch is published at once. Nothing of a batch is visible to readers, and no write of it is answered,
//   before its log append returned ok; every reader that begins a round after publication sees it.
// - A batch whose append fails is dropped whole: its writes are answered no_space (ENOSPC) or
//   unavailable (any other error); after a failed sync the log refuses everything (unavailable).
// - current() may be called from any thread inside a reader round (epoch.hpp).
// - Two snapshots (off until hold_visibility()): durable() is the newest published snapshot (its
//   batch is durable), current() the one readers are shown. Without the hold they are the same
//   snapshot. With it, a publication only makes durable() newer; show_through(v) (owner thread)
//   then shows the newest published snapshot whose high_version() <= v, so a caller may keep what is
//   durable here but not yet elsewhere (a synchronous follower: shards/base/sync_acks.hpp) from its
//   readers. The snapshots published but not shown are held (immutable trees: each costs its
//   changed paths), freed once shown and superseded, like any replaced snapshot.
// - Old snapshots (and what only they hold) are freed by reclaim() once every reader has passed the
//   epoch stamped when they were replaced.
// - REQUIRES (PERCORE_REQUIRES, release builds too, unless noted):
//   - submit(), advance_batches(), compact_step(), reclaim(), read_value() on the owner shard's
//     thread (debug builds; owner.hpp);
//   - submit(): a put carries its document (one reference), an erase none;
//   - attach_log() once, with a log, after recover() and before the first batch;
//   - recover() once, before attach_log() and before any write;
//   - compact_step() only with a log and after recover() (it does nothing otherwise);
//   - capture_files() on the owner shard's thread (debug builds).
// - Versions: every change gets the next version, starting at `first_version` or above the highest
//   recovered one; a version is never given twice. It is the change's position in the shard's
//   change feed (ascending in commit order) and, for the store's own puts, the document's ETag
//   version too (document.hpp). A put with a copied version (write_op::copied_version: a follower's
//   copy of its primary's document) still gets the next version as its position, keeps the copied
//   one as its ETag version (a copy record, log_format.hpp), and raises the next version above the
//   copied one: every later write — after a promotion, the primary's — gets a version above every
//   ETag version the store holds, across restarts (recovery continues above the highest ETag
//   version, and the segment lists' floor follows the next version). Preconditions compare ETag
//   versions; the feed, its cursors and the window of recent changes use the store's versions.
// - Change feed (changes.hpp reads it): a delete of an existing key leaves the key's tombstone in
//   the snapshot's tombstone tree (snapshot.hpp), a put of the key removes it; each published
//   snapshot carries its high_version() and the feed floor. expire_changes(now), called by the owner
//   about once per second, removes the tombstones past their retention and raises the floor
//   (change_retention.hpp says how), and publishes a snapshot when it removed tombstones or raised
//   the floor (at once when no batch is in flight, else right after it); then persists the floor
//   (feed_floor.hpp). recover() reads the floor (missing: 0) and rebuilds the tombstones from the
//   tombstone records above it whose key has no newer put. Once a reader asked for it, each
//   snapshot also carries a bounded window of the latest changes (recent_changes.hpp), which
//   changes_after() reads instead of scanning when the cursor is inside it.
// - Parts of its own, owned here: segment_set.hpp (the segment files, their live and dead bytes,
//   the read handles, retirement), compactor.hpp (compaction), change_retention.hpp (the feed's
//   retention and floor), document_pool.hpp (the memory of its documents: a client's document is
//   moved into it when its batch applies it, recovery and compaction make theirs there).
// - REQUIRES: destroyed only after every reference others took to its documents (retain()) was
//   released: their memory goes with the store (checked at destruction, release builds too).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <expected>
#include <memory>
#include <string>
#include <vector>

#include "store/change_retention.hpp"
#include "store/compactor.hpp"
#include "store/doc_tree.hpp"
#include "store/document.hpp"
#include "store/document_pool.hpp"
#include "store/env.hpp"
#include "store/recovery.hpp"
#include "store/segment_reader.hpp"
#include "store/shard_log.hpp"
#include "store/epoch.hpp"
#include "store/limits.hpp"
#include "store/owner.hpp"
#include "store/precondition.hpp"
#include "store/recent_changes.hpp"
#include "store/segment_set.hpp"
#include "store/shard_capture.hpp"
#include "store/snapshot.hpp"
#include "store/write_gate.hpp"

namespace percore::store {

enum class write_kind : std::uint8_t { put, erase };

struct write_op {
    write_kind kind = write_kind::put;
    std::string key;               // for erase (for put, the document's key is used)
    document* doc = nullptr;       // put: one reference, given to the store
    precondition pre;
    std::uint64_t tag = 0;         // opaque to the store, returned in the result
    std::uint64_t copied_version = 0;  // put: another board's ETag version to keep (contract above); 0: none
    std::uint32_t turn_class = 0;  // fair batches (contract above): the app's index, set by the caller (0: default)
    write_gate* gate = nullptr;    // a limit the write must pass when applied (write_gate.hpp); null: none
};

enum class write_outcome : std::uint8_t {
    created, replaced, deleted, not_found, precondition_failed, no_space, unavailable,
    quota_exceeded,  // the write's gate refused it (write_result::refusal says why); nothing changed
};

// Copied once per write (the batch's results into `done`, then per delivery): kept at 32 bytes, the
// small fields packed together.
struct write_result {
    std::uint64_t tag = 0;
    write_outcome outcome = write_outcome::created;
    bool current_exists = false;        // precondition_failed: whether the key exists
    std::uint8_t refusal = 0;           // quota_exceeded: the gate's code
    // The change this write made to the store's usage, for per-app quotas: documents +1 created, -1
    // deleted; bytes (sum of the current values' sizes) new size minus the replaced value's size for
    // a put, minus the deleted value's size for a delete. Both 0 when nothing changed
    // (precondition_failed, not_found, no_space, unavailable, quota_exceeded).
    std::int32_t documents_delta = 0;
    std::uint64_t version = 0;          // put: the new ETag version; precondition_failed: the current one (0 if none)
    std::int64_t bytes_delta = 0;
};
static_assert(sizeof(write_result) == 32);

struct batch_stats {
    std::uint64_t writes = 0;
    std::uint64_t bytes = 0;  // value bytes written
};

class shard_store {
public:
    // changes_retention: how long expire_changes() keeps a deleted key's tombstone (contract above).
    shard_store(reader_epochs& epochs, std::uint64_t first_version,
                std::chrono::seconds changes_retention = std::chrono::seconds(default_changes_retention_seconds));
    ~shard_store();
    shard_store(const shard_store&) = delete;
    shard_store& operator=(const shard_store&) = delete;

    // Rebuilds the state from the segments in `directory` (before serving) and publishes it.
    result<recovery_stats> recover(env& e, const std::string& directory);
    // From now on every batch is appended to `log` before it is published.
    void attach_log(std::unique_ptr<shard_log> log) {
        PERCORE_REQUIRES(log && !log_ && !in_flight_);
        log_ = std::move(log);
        log_->note_versions_below(next_version_);
    }
    const shard_log* log() const { return log_.get(); }

    void submit(write_op op);
    // Client writes or compaction copies not yet in a batch.
    bool has_pending() const { return !pending_.empty() || !relocations_.empty(); }
    bool in_flight() const { return in_flight_; }
    // Whether advance_batches() has something to do now (a batch to start, or one that finished;
    // not while the next batch lingers).
    bool ready() const {
        return (in_flight_ && log_->finished()) ||
               (!in_flight_ && ((has_pending() && !lingering()) || segments_.roll_due()));
    }
    // Batch linger (off until set; limits.hpp, max_batch_linger): once a batch's answers went out,
    // the next batch starts when as many writes wait as were just answered plus those that waited
    // already (the answered clients' next writes joined them), or when the linger ends — `max`, or
    // a 1/batch_linger_sync_fraction of the last sync if less. So concurrent writers share a sync
    // instead of splitting into two halves that take turns. Never with compaction copies waiting.
    // `clock`: what the linger reads the time with (a test's fake; steady_clock's now by default).
    using linger_clock = std::chrono::steady_clock::time_point (*)();
    void set_batch_linger(std::chrono::nanoseconds max, linger_clock clock = &std::chrono::steady_clock::now) {
        max_linger_ = max;
        linger_clock_ = clock;
    }
    // While the next batch lingers: when the linger ends (the owner's loop wakes then); else max().
    std::chrono::steady_clock::time_point linger_until() const {
        return lingering() ? linger_until_ : std::chrono::steady_clock::time_point::max();
    }
    bool failed() const { return log_ && log_->failed(); }

    // Compaction (owner thread, between other work; compactor.hpp): a bounded step that queues
    // copies of the live records of the victim segment. The copies wait in a queue of their own (at
    // most max_pending_relocations; limits.hpp); each batch takes up to
    // max_relocation_bytes_per_batch of them before the client writes, so a client write is in the
    // next batch however many copies wait. A copy is written only if its version is still current.
    // Returns the records it queued.
    std::size_t compact_step();
    // Every segment's bytes and live bytes (segment_set.hpp).
    const std::map<std::uint32_t, segment_usage>& segments() const { return segments_.usage(); }
    std::uint64_t segments_deleted() const { return segments_.deleted(); }
    // Compacted segments whose files wait for a segment list that leaves them out.
    std::size_t segments_retiring() const { return segments_.retiring(); }
    // A backup's capture of this shard's durable files, held open (shard_capture.hpp): every write
    // answered so far, none of the batch in flight. Owner thread; an error before recover().
    result<shard_capture> capture_files() const;

    // A document's value, from memory or from the log (owner thread).
    io_result<void> read_value(const document& d, std::string& out) const;

    // Publishes the batch whose sync finished (its results appended to `done`), then forms the next
    // batch and hands it to the log (contract above). Returns the size of the batch it published or
    // started (zero writes: nothing happened).
    batch_stats advance_batches(std::vector<write_result>& done);
    std::uint64_t last_sync_ns() const { return last_sync_ns_; }

    // The snapshot readers see, and the newest durable one (contract above: the same without a hold).
    const snapshot* current() const { return visible_.load(std::memory_order_acquire); }
    const snapshot* durable() const { return current_.load(std::memory_order_acquire); }
    // From now on publications are held until show_through() (owner thread; after recover(), whose
    // state is shown, and before the first batch).
    // From now on snapshot::watched_sequence() moves only with the publications that may have
    // changed a key starting with `prefix` (a write to one, a recovery): the delivery engine reads
    // the delivery records (SPEC §9) again only then, not after every write (its scan was ~440
    // instructions of a durable PUT, callgrind). REQUIRES: before the first write.
    void watch_keys(std::string prefix) { watched_prefix_ = std::move(prefix); }
    void hold_visibility() {
        PERCORE_REQUIRES(!in_flight_ && held_.empty());
        hold_ = true;
    }
    // Shows the newest held snapshot whose high version is at most `version` (owner thread);
    // returns whether current() moved.
    bool show_through(std::uint64_t version);
    // Published snapshots not yet shown (owner thread).
    std::size_t held_snapshots() const { return held_.size(); }

    // Frees what no reader can see anymore; returns how many snapshots it freed.
    std::size_t reclaim();
    // The window of recent changes (recent_changes.hpp): whether kept, and the chunks allocated
    // (inside the window or still held by a live older snapshot).
    const recent_changes& recent() const { return recent_; }

    std::uint64_t next_version() const { return next_version_; }

    // The memory of the documents this store keeps (owner thread): the client's documents are moved
    // into it when applied, recovery and compaction make theirs there.
    const document_pool& document_memory() const { return docs_; }
    document_pool& document_memory() { return docs_; }  // owner thread: documents this store will keep

    // The turn classes (write_op::turn_class) of the client writes that changed something in the
    // batch the last advance_batches() call published, each once per run of equal classes (so a
    // class may repeat, in batch order); empty when that call published nothing. The change feed's
    // waits use it to page only the apps that changed (shards/feed/feed_waits.hpp).
    const std::vector<std::uint32_t>& classes_published() const { return classes_published_; }

    // Change feed upkeep (owner thread, about once per second; contract above). `now`: a monotonic
    // clock that never goes back between calls.
    void expire_changes(std::chrono::steady_clock::time_point now);
    // The floor as raised so far (readers see it in snapshot::feed_floor() after the next
    // publication), and as last written to the feed_floor file (0 until one was).
    std::uint64_t feed_floor() const { return retention_.floor(); }
    std::uint64_t persisted_feed_floor() const { return retention_.persisted_floor(); }
    // Checkpoints of the time-based floor held now (bounded: limits.hpp).
    std::size_t feed_checkpoints() const { return retention_.checkpoints(); }
    // Tombstones held for their retention (each one document, also when replaced since): what the
    // change feed costs in memory, reclaimed snapshots aside.
    std::size_t deletions_held() const { return retention_.deletions_held(); }

private:
    bool lingering() const {
        if (linger_writes_ == 0 || pending_.size() >= linger_writes_ || !relocations_.empty()) return false;
        return linger_clock_() < linger_until_;
    }
    void begin_linger(std::size_t answered);

    struct retired {
        const snapshot* snap;
        reader_epochs::stamp_type stamp;
    };
    struct gated_change {  // what a write's gate let through, given back if the batch fails
        write_gate* gate;
        std::int64_t documents;
        std::int64_t bytes;
    };
    struct formed_batch {
        const tree_node* root = nullptr;  // frozen, not yet published
        const tree_node* tombstones = nullptr;  // frozen with root (changed together)
        std::uint64_t high_version = 0;
        std::uint64_t document_count = 0;
        std::uint64_t value_bytes = 0;
        bool changed = false;
        // puts of this batch, retained until stamped with their segment; with their value's offset
        // from the start of the batch
        std::vector<std::pair<document*, std::uint64_t>> written;
        std::vector<std::pair<std::uint32_t, std::uint64_t>> superseded;  // (segment, record bytes) now dead
        std::uint64_t own_dead_bytes = 0; // records of this batch already superseded within it
        std::uint64_t relocations = 0;
        bool relocations_superseded = false;  // compaction copies dropped for a write of this batch
        std::vector<gated_change> gated;
        std::vector<std::uint32_t> classes;  // of the client writes that changed something (classes_published())
        bool noted = false;  // its changes are in notes_ (a window of recent changes is kept or wanted)
        bool watched_changed = false;  // a write to a key under watched_prefix_ (watch_keys) was applied
    };
    formed_batch take_spare_lists();
    void recycle_lists(formed_batch& b);
    // The most entries a batch's list may hold to be kept for the next batch (recycle_lists): 256
    // is 4 KiB of `written`, enough for the batches of 64 busy connections, and what a burst's batch
    // grows beyond is given back.
    static constexpr std::size_t max_recycled_entries = 256;
    void settle(formed_batch& b, bool ok, std::uint32_t segment, std::uint64_t batch_offset, std::uint64_t batch_bytes);
    void stamp_written(formed_batch& b, std::uint32_t segment, std::uint64_t batch_offset);
    void account_superseded(formed_batch& b, const document* existing);
    void finish_compaction() { compactor_.finish(*log_, in_flight_); }
    void drop(const snapshot* snap);
    // A batch's working trees: documents and tombstones, started from the published snapshot.
    struct working_trees {
        doc_tree docs;
        doc_tree tombs;
    };
    formed_batch apply_pending(std::vector<write_result>& results, std::string* records, batch_stats& stats);
    void apply_fair(working_trees& work, formed_batch& b, std::vector<write_result>& results, std::string* records,
                    batch_stats& stats);
    void compact_pending();
    void apply_relocations(working_trees& work, formed_batch& b, std::string* records);
    void apply_relocation(working_trees& work, formed_batch& b, std::string* records, relocation& r);
    write_result apply_write(working_trees& work, formed_batch& b, std::string* records, write_op& op, batch_stats& stats);
    void apply_put(working_trees& work, formed_batch& b, std::string* records, write_op& op, const document* existing,
                   write_result& result, batch_stats& stats);
    void apply_erase(working_trees& work, formed_batch& b, std::string* records, std::string_view key,
                     const document* existing, write_result& result);
    static void note_class(formed_batch& b, std::uint32_t turn_class) {
        if (b.classes.empty() || b.classes.back() != turn_class) b.classes.push_back(turn_class);
    }
    std::uint8_t pass_gate(formed_batch& b, write_gate* gate, std::int64_t documents, std::int64_t bytes);
    bool finish_flight(std::vector<write_result>& done);
    void start_empty_roll();
    void start_batch(std::vector<write_result>& done, batch_stats& stats);
    void publish(const formed_batch& b);
    formed_batch same_as_current();  // the current state, its roots retained, to publish again
    void republish();
    void refresh_changes();  // change feed (contract above)
    struct recovery_state {
        working_trees work;
        formed_batch b;
        std::vector<std::uint32_t> file_segments;  // that hold values read from the file
        std::uint64_t high = 0;                    // the highest version replayed
    };
    void replay_record(recovery_state& st, const record_view& rec, std::uint64_t segment_id, std::uint64_t offset);

    reader_epochs& epochs_;
    // The memory of the documents this store keeps (document_pool.hpp): declared before every
    // member holding documents, so destroyed after them.
    document_pool docs_;
    node_pool pool_;  // declared before every member holding nodes
    std::vector<write_op> pending_;         // client writes, in submission order
    std::uint32_t pending_class_ = 0;       // the class of every pending write, unless pending_mixed_
    bool pending_mixed_ = false;            // pending_ holds writes of more than one class
    std::uint32_t last_class_ = 0;          // took the last turn: the next batch's turns begin after it
    // apply_fair's scratch, kept from batch to batch (no allocation once they have grown)
    struct class_run {
        std::uint32_t turn_class;
        std::uint32_t next;   // in fair_order_: the class's next write
        std::uint32_t end;
        std::uint64_t bytes;  // the class's records in the batch being formed
    };
    std::vector<std::uint64_t> fair_order_;  // turn_class << 32 | index in pending_, sorted
    std::vector<class_run> fair_runs_;       // one per class, in class order
    std::vector<std::uint32_t> fair_turns_;  // the runs with writes left, in turn order
    std::vector<std::uint8_t> fair_taken_;   // per index in pending_
    std::vector<relocation> relocations_;   // compaction copies (compactor.hpp), in the order it read them
    std::atomic<const snapshot*> current_{nullptr};  // the newest durable (durable())
    std::atomic<const snapshot*> visible_{nullptr};  // what readers see (current()): current_ without a hold
    std::deque<const snapshot*> held_;  // published after visible_, oldest first; the last is current_
    bool hold_ = false;                 // hold_visibility() was called
    void retire(const snapshot* old);
    std::deque<retired> retired_;
    std::uint64_t next_version_;
    std::uint64_t sequence_ = 0;

    std::unique_ptr<shard_log> log_;
    bool in_flight_ = false;
    formed_batch flight_;
    formed_batch spare_;   // only its lists: their capacity, for the next batch (recycle_lists)
    std::string watched_prefix_;   // watch_keys(); empty: every publication moves watched_sequence()
    std::vector<write_result> flight_results_;
    std::string records_;  // reused between batches
    std::uint64_t last_sync_ns_ = 0;
    std::vector<std::uint32_t> classes_published_;
    std::chrono::nanoseconds max_linger_{0};        // 0: no linger
    std::size_t linger_writes_ = 0;                 // the next batch waits for this many (0: it does not)
    std::chrono::steady_clock::time_point linger_until_{};
    linger_clock linger_clock_ = &std::chrono::steady_clock::now;

    env* env_ = nullptr;   // set by recover()
    std::string directory_;
    segment_set segments_;
    compactor compactor_{segments_, docs_};
    bool recovered_ = false;
    change_retention retention_;          // change feed (contract above)
    recent_changes recent_;               // the feed's window of recent changes (recent_changes.hpp)
    change_notes notes_;                  // the changes of the batch formed (one at a time), for recent_
    bool refresh_due_ = false;            // expire_changes() came while a batch was in flight
    owner_thread owner_;
};

}  // namespace percore::store
