#include "store/shard_store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "store/doc_tree.hpp"
#include "store/feed_floor.hpp"
#include "store/log_format.hpp"
#include "shards/runtime/check.hpp"

namespace percore::store {

namespace {

// A document's record is a copy when its ETag version is not its own (encode_document_record).
std::uint64_t document_record_bytes(const document* d) {
    return record_bytes(d->key().size(), d->content_type().size(), d->value_size(), d->etag_version() != d->version());
}

// Where the value of `d`'s record starts, from the record's first byte.
std::uint64_t value_offset_of(const document& d) {
    return record_bytes(d.key().size(), d.content_type().size(), 0, d.etag_version() != d.version());
}

// What a write that passed its precondition changes in the store's usage: documents +1 (a new
// key), -1 (an erase of an existing one) or 0; bytes the new value's size minus the current one's.
std::pair<std::int64_t, std::int64_t> usage_change(const write_op& op, const document* existing) {
    const std::int64_t old_bytes = existing ? static_cast<std::int64_t>(existing->value_size()) : 0;
    if (op.kind == write_kind::put) return {existing ? 0 : 1, static_cast<std::int64_t>(op.doc->value_size()) - old_bytes};
    return {existing ? -1 : 0, -old_bytes};
}

}  // namespace

shard_store::shard_store(reader_epochs& epochs, std::uint64_t first_version, std::chrono::seconds changes_retention)
    : epochs_(epochs), next_version_(first_version), retention_(changes_retention) {
    auto* first = new snapshot();
    first->recent_asking_ = recent_.asking_flag();
    current_.store(first, std::memory_order_seq_cst);
    visible_.store(first, std::memory_order_seq_cst);
}

shard_store::~shard_store() {
    log_.reset();  // waits for the append in flight
    if (in_flight_) {
        settle(flight_, false, 0, 0, 0);
        doc_tree::release(pool_, flight_.root);
        doc_tree::release(pool_, flight_.tombstones);
        notes_.clear();
    }
    for (auto& op : pending_)
        if (op.doc) op.doc->release();
    for (auto& r : relocations_)
        if (r.doc) r.doc->release();
    for (auto& r : retired_) drop(r.snap);
    for (const snapshot* h : held_) drop(h);  // the last of them is current_
    drop(visible_.load(std::memory_order_relaxed));
    PERCORE_ASSERT(pool_.live() == 0);
}

void shard_store::drop(const snapshot* snap) {
    doc_tree::release(pool_, snap->root_);
    doc_tree::release(pool_, snap->tombstones_);
    delete snap;
}

void shard_store::submit(write_op op) {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    PERCORE_REQUIRES((op.kind == write_kind::put) == (op.doc != nullptr));
    PERCORE_REQUIRES(op.copied_version < version_limit && (op.copied_version == 0 || op.kind == write_kind::put));
    if (pending_.empty()) {
        pending_class_ = op.turn_class;
        pending_mixed_ = false;
    } else if (op.turn_class != pending_class_) {
        pending_mixed_ = true;
    }
    pending_.push_back(std::move(op));
}

// Forms a batch on a working tree: first the compaction copies one batch carries, then the client
// writes until the records reach max_batch_bytes (at least one client write when any is pending):
// with one class, in arrival order (the prefix of pending_); with several, in fair turns.
shard_store::formed_batch shard_store::apply_pending(std::vector<write_result>& results, std::string* records,
                                                    batch_stats& stats) {
    const snapshot* old = current_.load(std::memory_order_relaxed);
    working_trees work{{pool_, old->root_}, {pool_, old->tombstones_}};
    formed_batch b = take_spare_lists();
    b.document_count = old->document_count_;
    b.value_bytes = old->value_bytes_;
    b.high_version = old->high_version_;
    b.noted = recent_.kept() || recent_.wanted();
    notes_.clear();
    apply_relocations(work, b, records);
    if (pending_mixed_) {
        apply_fair(work, b, results, records, stats);
    } else {
        std::size_t taken = 0;
        for (auto& op : pending_) {
            if (records && taken > 0 && records->size() >= max_batch_bytes) break;
            ++taken;
            results.push_back(apply_write(work, b, records, op, stats));
        }
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(taken));
        if (taken > 0) last_class_ = pending_class_;
    }
    if (b.changed) {
        b.root = work.docs.publish();
        b.tombstones = work.tombs.publish();
    }
    return b;
}

// Fair batches (header contract): the pending writes of several classes take turns. Per class they
// keep their arrival order. Across classes the order is free: no pending write has been answered
// (a connection submits its next write only after its answer), so each is concurrent with every
// other and any order is a linearization; and two apps never share a key (keys are app '\0' key),
// so with one class per app every key's writes keep their arrival order too. Preconditions see
// the working tree, so a write sees every write applied before it in the batch, of any class.
// Costs a sort of the pending writes (one per connection waiting for its answer); with one class
// apply_pending never comes here.
void shard_store::apply_fair(working_trees& work, formed_batch& b, std::vector<write_result>& results,
                             std::string* records, batch_stats& stats) {
    PERCORE_ASSERT(pending_.size() <= 0xFFFFFFFFu);
    fair_order_.clear();
    for (std::size_t i = 0; i < pending_.size(); ++i)
        fair_order_.push_back(std::uint64_t{pending_[i].turn_class} << 32 | i);
    std::sort(fair_order_.begin(), fair_order_.end());  // by class, then arrival
    fair_runs_.clear();
    for (std::size_t i = 0; i < fair_order_.size(); ++i) {
        auto c = static_cast<std::uint32_t>(fair_order_[i] >> 32);
        if (fair_runs_.empty() || fair_runs_.back().turn_class != c)
            fair_runs_.push_back(class_run{c, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i), 0});
        ++fair_runs_.back().end;
    }
    // the turns begin with the first class after the one that took the last turn, and wrap around
    std::size_t first = 0;
    while (first < fair_runs_.size() && fair_runs_[first].turn_class <= last_class_) ++first;
    if (first == fair_runs_.size()) first = 0;
    fair_turns_.clear();
    for (std::size_t i = 0; i < fair_runs_.size(); ++i)
        fair_turns_.push_back(static_cast<std::uint32_t>((first + i) % fair_runs_.size()));
    fair_taken_.assign(pending_.size(), 0);

    std::size_t waiting = fair_runs_.size();  // classes with writes not yet taken
    std::size_t taken = 0;
    bool full = false;
    for (bool took = true; took && !full && !fair_turns_.empty();) {
        took = false;
        std::size_t kept = 0;  // runs that go on to the next round
        for (std::size_t t = 0; t < fair_turns_.size(); ++t) {
            if (records && taken > 0 && records->size() >= max_batch_bytes) {
                full = true;
                break;
            }
            class_run& run = fair_runs_[fair_turns_[t]];
            if (records && run.bytes >= max_class_batch_bytes && waiting > 1) {
                fair_turns_[kept++] = fair_turns_[t];  // at its share while others wait: skips the turn
                continue;
            }
            auto index = static_cast<std::uint32_t>(fair_order_[run.next++]);
            std::size_t before = records ? records->size() : 0;
            results.push_back(apply_write(work, b, records, pending_[index], stats));
            if (records) run.bytes += records->size() - before;
            fair_taken_[index] = 1;
            ++taken;
            took = true;
            last_class_ = run.turn_class;
            if (run.next < run.end)
                fair_turns_[kept++] = fair_turns_[t];
            else
                --waiting;
        }
        fair_turns_.resize(kept);
    }
    compact_pending();
}

// Drops the writes apply_fair took from pending_, keeping the others in arrival order.
void shard_store::compact_pending() {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
        if (fair_taken_[i]) continue;
        if (kept != i) pending_[kept] = std::move(pending_[i]);
        ++kept;
    }
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(kept), pending_.end());
    pending_mixed_ = false;
    if (pending_.empty()) return;
    pending_class_ = pending_.front().turn_class;
    pending_mixed_ = std::any_of(pending_.begin(), pending_.end(),
                                 [this](const write_op& op) { return op.turn_class != pending_class_; });
}

// Takes the copies of this batch: at least one, then while their records stay below
// max_relocation_bytes_per_batch (all of them without a log: no records to bound).
void shard_store::apply_relocations(working_trees& work, formed_batch& b, std::string* records) {
    const std::size_t start = records ? records->size() : 0;
    std::size_t taken = 0;
    for (relocation& r : relocations_) {
        if (records && taken > 0 && records->size() - start >= max_relocation_bytes_per_batch) break;
        ++taken;
        apply_relocation(work, b, records, r);
    }
    relocations_.erase(relocations_.begin(), relocations_.begin() + static_cast<std::ptrdiff_t>(taken));
}

void shard_store::apply_relocation(working_trees& work, formed_batch& b, std::string* records, relocation& r) {
    std::string_view key = r.doc ? r.doc->key() : std::string_view(r.key);
    const document* existing = work.docs.find(key);
    if (r.doc && existing && existing->version() == r.version) {
        std::uint64_t at = records ? records->size() : 0;
        if (records)
            encode_document_record(*records, r.version, r.doc->etag_version(), key, r.doc->content_type(),
                                   r.doc->value());
        account_superseded(b, existing);
        r.doc->retain();
        b.written.push_back({r.doc, at + value_offset_of(*r.doc)});
        work.docs.put(r.doc);
        b.changed = true;
        ++b.relocations;
    } else if (!r.doc && !existing) {
        // (a tombstone copy)
        if (records) encode_record(*records, record_kind::tombstone, r.version, key, {}, {});
        b.changed = true;
        ++b.relocations;
    } else {
        // superseded by a write since: if the batch fails, the copy was needed
        if (r.doc) r.doc->release();
        compactor_.copy_dropped();
        b.relocations_superseded = true;
    }
    r.doc = nullptr;
}

// The write's gate (write_gate.hpp), asked with what the write would change: 0 when it may go on
// (or has no gate, or changes nothing: an erase of a missing key); the change it let through is
// kept with the batch, to be given back if the batch never reaches the disk.
std::uint8_t shard_store::pass_gate(formed_batch& b, write_gate* gate, std::int64_t documents, std::int64_t bytes) {
    if (!gate) return 0;
    if (std::uint8_t refusal = gate->try_apply(documents, bytes)) return refusal;
    b.gated.push_back({gate, documents, bytes});
    return 0;
}

// Applies one client write to the working tree (its precondition against the state the writes
// before it left); the op's document reference goes to the tree or is released.
write_result shard_store::apply_write(working_trees& work, formed_batch& b, std::string* records, write_op& op,
                                      batch_stats& stats) {
    ++stats.writes;
    write_result result;
    result.tag = op.tag;
    std::string_view key = op.kind == write_kind::put ? op.doc->key() : std::string_view(op.key);
    const document* existing = work.docs.find(key);
    // preconditions name ETags: a copy's is its primary's (contract in shard_store.hpp)
    std::uint64_t existing_version = existing ? existing->etag_version() : 0;

    if (!op.pre.holds(existing != nullptr, existing_version)) {
        result.outcome = write_outcome::precondition_failed;
        result.version = existing_version;
        result.current_exists = existing != nullptr;
        if (op.doc) op.doc->release();
        op.doc = nullptr;
        return result;
    }
    if (op.kind == write_kind::erase && !existing) {
        result.outcome = write_outcome::not_found;
        return result;
    }
    if (!watched_prefix_.empty() && key.starts_with(watched_prefix_)) b.watched_changed = true;
    const auto [documents, bytes] = usage_change(op, existing);
    if (std::uint8_t refusal = pass_gate(b, op.gate, documents, bytes)) {
        result.outcome = write_outcome::quota_exceeded;
        result.refusal = refusal;
        if (op.doc) op.doc->release();
        op.doc = nullptr;
        return result;
    }
    result.documents_delta = static_cast<std::int32_t>(documents);
    result.bytes_delta = bytes;
    note_class(b, op.turn_class);
    if (op.kind == write_kind::put) apply_put(work, b, records, op, existing, result, stats);
    else apply_erase(work, b, records, key, existing, result);
    op.doc = nullptr;
    return result;
}

// A put that passed its precondition and gate: the next version, its record, the working trees.
void shard_store::apply_put(working_trees& work, formed_batch& b, std::string* records, write_op& op,
                            const document* existing, write_result& result, batch_stats& stats) {
    // made on the receiving shard, with malloc; a copy gets the 8 bytes of its copied version
    op.doc = op.copied_version != 0 ? with_copied_version(docs_, op.doc, op.copied_version) : move_to_pool(docs_, op.doc);
    std::uint64_t size = op.doc->value_size();
    if (existing) {
        b.value_bytes -= existing->value_size();
        result.outcome = write_outcome::replaced;
    } else {
        ++b.document_count;
        result.outcome = write_outcome::created;
    }
    b.value_bytes += size;
    stats.bytes += size;
    const std::uint64_t version = next_version_++;
    op.doc->set_version(version);
    // every later version above the copied one (contract in shard_store.hpp)
    next_version_ = std::max(next_version_, op.copied_version + 1);
    result.version = op.doc->etag_version();
    std::uint64_t at = records ? records->size() : 0;
    if (records)
        encode_document_record(*records, version, result.version, op.doc->key(), op.doc->content_type(),
                               op.doc->value());
    if (existing) account_superseded(b, existing);
    op.doc->retain();
    b.written.push_back({op.doc, at + value_offset_of(*op.doc)});
    if (b.noted) notes_.note(version, op.doc->key(), false);
    work.docs.put(op.doc);
    std::string_view key = op.doc->key();
    if (work.tombs.find(key)) work.tombs.erase(key)->release();  // the key is no longer deleted
    b.high_version = version;
    b.changed = true;
}

// An erase of an existing key: its tombstone record, and a tombstone in the working trees for the feed.
void shard_store::apply_erase(working_trees& work, formed_batch& b, std::string* records, std::string_view key,
                              const document* existing, write_result& result) {
    --b.document_count;
    b.value_bytes -= existing->value_size();
    result.version = next_version_++;
    if (records) encode_record(*records, record_kind::tombstone, result.version, key, {}, {});
    if (b.noted) notes_.note(result.version, key, true);
    account_superseded(b, existing);
    work.docs.erase(key)->release();
    document* tomb = copy_document(docs_, key, {}, {});
    tomb->set_version(result.version);
    retention_.note_deletion(tomb);
    work.tombs.put(tomb);
    b.high_version = result.version;
    result.outcome = write_outcome::deleted;
    b.changed = true;
}

void shard_store::publish(const formed_batch& b) {
    const snapshot* old = current_.load(std::memory_order_relaxed);
    auto* next = new snapshot();
    next->root_ = b.root;
    next->tombstones_ = b.tombstones;
    next->high_version_ = b.high_version;
    next->feed_floor_ = retention_.floor();
    next->document_count_ = b.document_count;
    next->value_bytes_ = b.value_bytes;
    next->sequence_ = ++sequence_;
    next->watched_sequence_ =
        watched_prefix_.empty() || b.watched_changed ? next->sequence_ : old->watched_sequence_;
    next->segments_ = segments_.table_for_publication();
    const auto window = recent_.advance(b.noted ? &notes_ : nullptr, old->high_version_, b.high_version);
    if (b.noted) notes_.clear();
    next->recent_ = window.newest;
    next->recent_floor_ = window.floor;
    next->recent_asking_ = recent_.asking_flag();
    current_.store(next, std::memory_order_seq_cst);
    if (hold_) {
        held_.push_back(next);  // `old` is shown or held: retired once shown and superseded
        return;
    }
    visible_.store(next, std::memory_order_seq_cst);
    retire(old);
}

void shard_store::retire(const snapshot* old) {
    retired_.push_back(retired{old, {}});
    epochs_.stamp(retired_.back().stamp);
}

bool shard_store::show_through(std::uint64_t version) {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    const snapshot* shown = nullptr;
    while (!held_.empty() && held_.front()->high_version_ <= version) {
        if (shown) retire(shown);  // skipped: readers of durable() may hold it
        shown = held_.front();
        held_.pop_front();
    }
    if (!shown) return false;
    const snapshot* old = visible_.load(std::memory_order_relaxed);
    visible_.store(shown, std::memory_order_seq_cst);
    retire(old);
    return true;
}

// Publishes the current documents again with the current segment table, so that the handles that
// left it (deleted segments) are closed once the readers of the older snapshots have moved on.
void shard_store::republish() { publish(same_as_current()); }

shard_store::formed_batch shard_store::same_as_current() {
    const snapshot* old = current_.load(std::memory_order_relaxed);
    formed_batch b;
    b.document_count = old->document_count_;
    b.value_bytes = old->value_bytes_;
    b.high_version = old->high_version_;
    b.root = doc_tree(pool_, old->root_).publish();
    b.tombstones = doc_tree(pool_, old->tombstones_).publish();
    return b;
}

batch_stats shard_store::advance_batches(std::vector<write_result>& done) {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    batch_stats stats;
    classes_published_.clear();
    if (in_flight_ && !finish_flight(done)) return stats;
    if (refresh_due_) refresh_changes();
    if (!has_pending()) {
        if (segments_.roll_due()) start_empty_roll();
        return stats;
    }
    if (lingering()) return stats;
    linger_writes_ = 0;
    start_batch(done, stats);
    return stats;
}

void shard_store::begin_linger(std::size_t answered) {
    if (max_linger_.count() <= 0 || answered == 0) return;
    const auto share = std::chrono::nanoseconds(last_sync_ns_ / batch_linger_sync_fraction);
    linger_writes_ = answered + pending_.size();
    linger_until_ = linger_clock_() + std::min(max_linger_, share);
}

// The batch in flight: false while its append runs; once it finished, publishes it (or answers its
// writes with the failure) and returns true.
bool shard_store::finish_flight(std::vector<write_result>& done) {
    auto r = log_->poll();
    if (!r) return false;
    in_flight_ = false;
    records_ = log_->take_spent_buffer();   // start_batch left records_ empty: it went to the log
    last_sync_ns_ = r->duration_ns;
    // the log started r->segment_id after sealing every segment below it
    segments_.seal_below(r->segment_id);
    settle(flight_, r->error == 0, static_cast<std::uint32_t>(r->segment_id), r->offset, r->bytes);
    segments_.delete_retired(*r);
    if (r->error == 0) {
        if (flight_.changed) publish(flight_);
        classes_published_.swap(flight_.classes);
        done.insert(done.end(), flight_results_.begin(), flight_results_.end());
        begin_linger(flight_results_.size());
        finish_compaction();
    } else {
        doc_tree::release(pool_, flight_.root);
        doc_tree::release(pool_, flight_.tombstones);
        notes_.clear();
        for (const gated_change& g : flight_.gated) g.gate->undo(g.documents, g.bytes);
        // Every answer of the batch was computed against the state its own writes left, which
        // never became durable: none of them stands (a 412 or 404 included).
        for (write_result res : flight_results_) {
            // (the version stays: after a failed sync the write may still be on disk with it)
            res.outcome = r->error == ENOSPC ? write_outcome::no_space : write_outcome::unavailable;
            res.documents_delta = 0;  // nothing changed
            res.bytes_delta = 0;
            done.push_back(res);
        }
    }
    recycle_lists(flight_);
    flight_ = {};
    flight_results_.clear();
    // deleted segments: let the current snapshot drop their handles too (a batch that changed
    // something has just been published with the new table)
    if (segments_.table_changed()) republish();
    return true;
}

// A batch's lists, empty, with the capacity the last batch's recycle_lists() left (none the first
// time): a batch of one durable write allocated and freed each of the four (callgrind, put16).
shard_store::formed_batch shard_store::take_spare_lists() {
    formed_batch b;
    b.written.swap(spare_.written);
    b.superseded.swap(spare_.superseded);
    b.gated.swap(spare_.gated);
    b.classes.swap(spare_.classes);
    return b;
}

// Keeps a settled batch's lists (emptied) for the next batch, unless one grew past
// max_recycled_entries: a burst's lists are freed rather than held for good.
void shard_store::recycle_lists(formed_batch& b) {
    auto keep = [](auto& from, auto& into) {
        if (from.capacity() > max_recycled_entries || from.capacity() <= into.capacity()) return;
        from.clear();
        into.swap(from);
    };
    keep(b.written, spare_.written);
    keep(b.superseded, spare_.superseded);
    keep(b.gated, spare_.gated);
    keep(b.classes, spare_.classes);
}

// No write will make the log start the segment that leaves the retired ones out: an empty append
// does (once; if it fails, the next batch starts it). Cleared either way, so that a failed log does
// not keep ready() true.
void shard_store::start_empty_roll() {
    segments_.roll_started();
    if (!log_ || log_->failed()) return;
    flight_ = {};
    in_flight_ = true;
    PERCORE_ASSERT(!log_->busy());
    log_->append(std::string());
}

// Forms the next batch from the pending writes and hands it to the log (without a log: publishes it).
void shard_store::start_batch(std::vector<write_result>& done, batch_stats& stats) {
    if (!log_) {
        formed_batch b = apply_pending(done, nullptr, stats);
        settle(b, true, 0, 0, 0);
        if (b.changed) publish(b);
        classes_published_.swap(b.classes);
        recycle_lists(b);
        return;
    }
    if (log_->failed()) {
        for (auto& op : pending_) {
            if (op.doc) op.doc->release();
            done.push_back(write_result{.tag = op.tag, .outcome = write_outcome::unavailable});
        }
        for (auto& r : relocations_)
            if (r.doc) r.doc->release();
        pending_.clear();
        pending_mixed_ = false;
        relocations_.clear();
        return;
    }
    records_.clear();
    formed_batch b = apply_pending(flight_results_, &records_, stats);
    if (!b.changed) {
        // nothing to write: these answers depend only on published (durable) state
        done.insert(done.end(), flight_results_.begin(), flight_results_.end());
        flight_results_.clear();
        settle(b, true, 0, 0, 0);
        recycle_lists(b);
        finish_compaction();
        return;
    }
    flight_ = std::move(b);
    in_flight_ = true;
    log_->note_versions_below(next_version_);
    PERCORE_ASSERT(!log_->busy());
    log_->append(std::move(records_));
    records_ = std::string();
}

result<recovery_stats> shard_store::recover(env& e, const std::string& directory) {
    PERCORE_REQUIRES(!recovered_ && !log_ && pending_.empty());
    recovered_ = true;
    const snapshot* old = current_.load(std::memory_order_relaxed);
    recovery_state st{{{pool_, old->root_}, {pool_, old->tombstones_}}, {}, {}, 0};
    st.b.document_count = old->document_count_;
    st.b.value_bytes = old->value_bytes_;
    env_ = &e;
    directory_ = directory;
    segments_.attach(e, directory);
    auto floor = read_feed_floor(e, directory);
    if (!floor) return std::unexpected(floor.error());
    retention_.set_recovered_floor(*floor);
    auto stats = recover_segments(e, directory, [&](const record_view& rec, std::uint64_t segment_id, std::uint64_t offset) {
        replay_record(st, rec, segment_id, offset);
    }, [&](std::uint64_t segment_id, std::uint64_t valid_bytes) {
        segments_.set_valid_bytes(static_cast<std::uint32_t>(segment_id), valid_bytes);
    });
    if (!stats) return stats;
    segments_.keep_only(stats->segment_ids);
    if (stats->max_version >= next_version_) next_version_ = stats->max_version + 1;
    const std::uint64_t floor_version = retention_.floor();
    if (floor_version >= next_version_) next_version_ = floor_version + 1;
    // every recovered segment is sealed: the log starts a new one
    segments_.seal_below(stats->next_segment_id);
    // A handle (an fd) only where a document's value is read from the file: a segment of small
    // values needs none.
    for (std::uint32_t id : st.file_segments) {
        if (std::find(stats->segment_ids.begin(), stats->segment_ids.end(), id) == stats->segment_ids.end()) continue;
        if (!segments_.open(id))
            return std::unexpected("cannot open " + directory + "/" + segment_file_name(id) + " to read values from it");
    }
    // every change at or below the floor is covered by it, even one whose record compaction dropped
    st.b.high_version = std::max(st.high, floor_version);
    if (st.b.changed || floor_version != 0) {
        st.b.root = st.work.docs.publish();
        st.b.tombstones = st.work.tombs.publish();
        st.b.watched_changed = true;   // whatever was recovered may be under the watched prefix
        publish(st.b);
    }
    retention_.note_recovered(*current());  // stamped by the next expire_changes()
    return stats;
}

// One record of recovery, in log order: the last record of a key is its state. A tombstone record
// (re)creates the key's tombstone unless a newer one is there already (compaction copies an older
// tombstone forward after a newer one) or the persisted floor covers it (removed by retention).
void shard_store::replay_record(recovery_state& st, const record_view& rec, std::uint64_t segment_id,
                                std::uint64_t offset) {
    auto segment = static_cast<std::uint32_t>(segment_id);
    formed_batch& b = st.b;
    const document* existing = st.work.docs.find(rec.key);
    if (existing) {
        b.value_bytes -= existing->value_size();
        --b.document_count;
        segments_.remove_live_bytes(existing->segment(), document_record_bytes(existing));
    }
    segments_.add_live_bytes(segment, record_bytes(rec.key.size(), rec.content_type.size(), rec.value.size(),
                                                   rec.kind == record_kind::copy));
    st.high = std::max(st.high, rec.version);
    const document* tomb = st.work.tombs.find(rec.key);
    if (rec.holds_document()) {
        document* doc = rec.value.size() >= file_value_min_bytes
                            ? file_document(docs_, rec.key, rec.content_type, rec.value.size(), segment,
                                            offset + rec.value_offset, rec.copied_version)
                            : copy_document(docs_, rec.key, rec.content_type, rec.value, rec.copied_version);
        doc->set_version(rec.version);
        doc->set_segment(segment);
        if (doc->in_file() && (st.file_segments.empty() || st.file_segments.back() != segment))
            st.file_segments.push_back(segment);
        st.work.docs.put(doc);
        ++b.document_count;
        b.value_bytes += rec.value.size();
        if (tomb) st.work.tombs.erase(rec.key)->release();
    } else {
        if (existing) st.work.docs.erase(rec.key)->release();
        if (rec.version > retention_.floor() && (!tomb || tomb->version() < rec.version)) {
            document* t = copy_document(docs_, rec.key, {}, {});
            t->set_version(rec.version);
            t->set_segment(segment);
            st.work.tombs.put(t);
        }
    }
    b.changed = true;
}

void shard_store::account_superseded(formed_batch& b, const document* existing) {
    if (existing->segment() != 0) b.superseded.emplace_back(existing->segment(), document_record_bytes(existing));
    else b.own_dead_bytes += document_record_bytes(existing);
}

// After a batch's append: stamp its documents with their segment and move live bytes, or undo the
// compaction bookkeeping of a batch that was dropped.
void shard_store::settle(formed_batch& b, bool ok, std::uint32_t segment, std::uint64_t batch_offset,
                         std::uint64_t batch_bytes) {
    if (ok && segment != 0) {
        segments_.note_appended(segment, batch_offset + batch_bytes, batch_bytes - b.own_dead_bytes);
        for (auto [seg, bytes] : b.superseded) segments_.remove_live_bytes(seg, bytes);
        // tombstones stay counted as live until compaction drops them from the oldest segment
        stamp_written(b, segment, batch_offset);
    }
    for (auto [d, value_at] : b.written) d->release();
    b.written.clear();
    compactor_.copies_settled(b.relocations, !ok && (b.relocations || b.relocations_superseded));
    b.relocations = 0;
}

// The batch's documents are in `segment`: values move out of memory only where readers can find the
// file open, and a segment is opened (an fd) only for such values.
void shard_store::stamp_written(formed_batch& b, std::uint32_t segment, std::uint64_t batch_offset) {
    bool to_file = std::any_of(b.written.begin(), b.written.end(), [](const auto& w) {
        return w.first->value_size() >= file_value_min_bytes && !w.first->in_file();
    });
    bool readable = to_file && segments_.open(segment);
    for (auto [d, value_at] : b.written) {
        d->set_segment(segment);
        if (readable && d->value_size() >= file_value_min_bytes && !d->in_file())
            d->move_value_to_file(batch_offset + value_at);
    }
}

result<shard_capture> shard_store::capture_files() const {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    if (!env_) return std::unexpected(std::string("the store was not recovered: nothing to capture"));
    return capture_shard_files(*env_, directory_, segments_);
}

io_result<void> shard_store::read_value(const document& d, std::string& out) const {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    if (!d.in_file()) {
        out.assign(d.value());
        return {};
    }
    const segment_file* f = segments_.find_open(d.segment());
    if (!f) return std::unexpected(ENOENT);
    out.resize(d.value_size());
    auto n = f->file().read_at(d.file_offset(), std::span<char>(out.data(), out.size()));
    if (!n) return std::unexpected(n.error());
    if (*n != out.size()) return std::unexpected(EIO);
    return {};
}

std::size_t shard_store::compact_step() {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    if (compactor_.idle() || !log_ || !env_ || log_->failed() || relocations_.size() >= max_pending_relocations)
        return 0;
    return compactor_.step(*log_, *current(), retention_.persisted_floor(), in_flight_, relocations_);
}

void shard_store::expire_changes(std::chrono::steady_clock::time_point now) {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    retention_.pass_time(now, current()->high_version_);
    // the tombstone tree and the floor change only between batches: the batch in flight was formed
    // from the current snapshot and will replace it
    if (in_flight_) {
        refresh_due_ = true;
        return;
    }
    refresh_changes();
}

// Removes the tombstones past their retention and publishes the result with the floor; then
// persists the floor.
void shard_store::refresh_changes() {
    PERCORE_DEBUG_ASSERT(!in_flight_);
    refresh_due_ = false;
    const snapshot* old = current();
    doc_tree tombs(pool_, old->tombstones_);
    bool removed = retention_.expire_tombstones(tombs);
    if (removed || retention_.floor() != old->feed_floor_) {
        formed_batch b = same_as_current();
        doc_tree::release(pool_, b.tombstones);
        b.tombstones = tombs.publish();
        publish(b);
    }
    if (env_) retention_.persist_floor(*env_, directory_);
}

std::size_t shard_store::reclaim() {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    std::size_t freed = 0;
    while (!retired_.empty() && epochs_.passed(retired_.front().stamp)) {
        drop(retired_.front().snap);
        retired_.pop_front();
        ++freed;
    }
    if (freed && recent_.kept()) {
        // the lowest window floor of a live snapshot: floors only rise, and snapshots published
        // before the window began carry none (UINT64_MAX)
        // (live, oldest first: the retired, the shown one, the held ones; the last held is current_)
        std::uint64_t floor = current_.load(std::memory_order_relaxed)->recent_floor_;
        const snapshot* shown = visible_.load(std::memory_order_relaxed);
        if (!held_.empty() && shown->recent_floor_ != UINT64_MAX) floor = shown->recent_floor_;
        else
            for (const snapshot* h : held_)
                if (h->recent_floor_ != UINT64_MAX) {
                    floor = h->recent_floor_;
                    break;
                }
        for (const retired& r : retired_)
            if (r.snap->recent_floor_ != UINT64_MAX) {
                floor = r.snap->recent_floor_;
                break;
            }
        recent_.reclaim(floor);
    }
    return freed;
}

}  // namespace percore::store
