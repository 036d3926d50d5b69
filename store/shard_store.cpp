#include "store/shard_store.hpp"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>

#include "store/doc_tree.hpp"

namespace percore::store {

shard_store::shard_store(reader_epochs& epochs, std::uint64_t first_version)
    : epochs_(epochs), next_version_(first_version) {
    current_.store(new snapshot(), std::memory_order_seq_cst);
}

shard_store::~shard_store() {
    log_.reset();  // waits for the append in flight
    if (in_flight_) {
        settle(flight_, false, 0, 0, 0);
        doc_tree::release(pool_, flight_.root);
    }
    for (auto& op : pending_)
        if (op.doc) op.doc->release();
    for (auto& r : retired_) drop(r.snap);
    drop(current_.load(std::memory_order_relaxed));
    assert(pool_.live() == 0);
}

void shard_store::drop(const snapshot* snap) {
    doc_tree::release(pool_, snap->root_);
    delete snap;
}

void shard_store::submit(write_op op) {
    assert((op.kind == write_kind::put) == (op.doc != nullptr));
    pending_.push_back(std::move(op));
}

shard_store::formed_batch shard_store::apply_pending(std::vector<write_result>& results, std::string* records,
                                                    batch_stats& stats) {
    const snapshot* old = current_.load(std::memory_order_relaxed);
    doc_tree work(pool_, old->root_);
    formed_batch b;
    b.document_count = old->document_count_;
    b.value_bytes = old->value_bytes_;
    std::size_t taken = 0;

    for (auto& op : pending_) {
        if (records && taken > 0 && records->size() >= max_batch_bytes) break;
        ++taken;
        if (op.relocation) {
            std::string_view key = op.doc ? op.doc->key() : std::string_view(op.key);
            const document* existing = work.find(key);
            if (op.doc && existing && existing->version() == op.version) {
                std::uint64_t at = records ? records->size() : 0;
                if (records) encode_record(*records, record_kind::put, op.version, key, op.doc->content_type(), op.doc->value());
                account_superseded(b, existing);
                op.doc->retain();
                b.written.push_back({op.doc, at + record_header_bytes + key.size() + op.doc->content_type().size()});
                work.put(op.doc);
                b.changed = true;
                ++b.relocations;
            } else if (!op.doc && !existing) {
                // (a tombstone copy)
                if (records) encode_record(*records, record_kind::tombstone, op.version, key, {}, {});
                b.changed = true;
                ++b.relocations;
            } else {
                // superseded by a write of this batch: if the batch fails, the copy was needed
                if (op.doc) op.doc->release();
                --relocations_outstanding_;
                b.relocations_superseded = true;
            }
            op.doc = nullptr;
            continue;
        }
        ++stats.writes;
        write_result result;
        result.tag = op.tag;
        std::string_view key = op.kind == write_kind::put ? op.doc->key() : std::string_view(op.key);
        const document* existing = work.find(key);
        std::uint64_t existing_version = existing ? existing->version() : 0;

        if (!op.pre.holds(existing != nullptr, existing_version)) {
            result.outcome = write_outcome::precondition_failed;
            result.version = existing_version;
            result.current_exists = existing != nullptr;
            if (op.doc) op.doc->release();
        } else if (op.kind == write_kind::put) {
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
            result.version = next_version_++;
            op.doc->set_version(result.version);
            std::uint64_t at = records ? records->size() : 0;
            if (records)
                encode_record(*records, record_kind::put, result.version, op.doc->key(), op.doc->content_type(),
                              op.doc->value());
            if (existing) account_superseded(b, existing);
            op.doc->retain();
            b.written.push_back({op.doc, at + record_header_bytes + op.doc->key().size() + op.doc->content_type().size()});
            work.put(op.doc);
            b.changed = true;
        } else if (existing) {
            --b.document_count;
            b.value_bytes -= existing->value_size();
            result.version = next_version_++;
            if (records) encode_record(*records, record_kind::tombstone, result.version, key, {}, {});
            account_superseded(b, existing);
            work.erase(key)->release();
            result.outcome = write_outcome::deleted;
            b.changed = true;
        } else {
            result.outcome = write_outcome::not_found;
        }
        op.doc = nullptr;
        results.push_back(result);
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(taken));
    if (b.changed) b.root = work.publish();
    return b;
}

void shard_store::publish(const formed_batch& b) {
    const snapshot* old = current_.load(std::memory_order_relaxed);
    auto* next = new snapshot();
    next->root_ = b.root;
    next->document_count_ = b.document_count;
    next->value_bytes_ = b.value_bytes;
    next->sequence_ = ++sequence_;
    next->segments_ = table_;
    current_.store(next, std::memory_order_seq_cst);
    retired_.push_back(retired{old, {}});
    epochs_.stamp(retired_.back().stamp);
}

batch_stats shard_store::flush(std::vector<write_result>& done) {
    batch_stats stats;
    if (in_flight_) {
        auto r = log_->poll();
        if (!r) return stats;
        in_flight_ = false;
        last_sync_ns_ = r->duration_ns;
        settle(flight_, r->error == 0, static_cast<std::uint32_t>(r->segment_id), r->offset, r->bytes);
        delete_retired(*r);
        if (r->error == 0) {
            if (flight_.changed) publish(flight_);
            done.insert(done.end(), flight_results_.begin(), flight_results_.end());
            finish_compaction();
        } else {
            doc_tree::release(pool_, flight_.root);
            // Every answer of the batch was computed against the state its own writes left, which
            // never became durable: none of them stands (a 412 or 404 included).
            for (write_result res : flight_results_) {
                // (the version stays: after a failed sync the write may still be on disk with it)
                res.outcome = r->error == ENOSPC ? write_outcome::no_space : write_outcome::unavailable;
                done.push_back(res);
            }
        }
        flight_ = {};
        flight_results_.clear();
    }
    if (pending_.empty()) {
        if (retiring_ != 0 && log_ && !log_->failed()) {
            // nothing else will make the log start the segment that leaves the victim out
            flight_ = {};
            in_flight_ = true;
            assert(!log_->busy());
            log_->append(std::string());
        }
        return stats;
    }

    if (!log_) {
        formed_batch b = apply_pending(done, nullptr, stats);
        settle(b, true, 0, 0, 0);
        if (b.changed) publish(b);
        return stats;
    }
    if (log_->failed()) {
        for (auto& op : pending_) {
            if (op.doc) op.doc->release();
            if (!op.relocation) done.push_back(write_result{op.tag, write_outcome::unavailable, 0, false});
        }
        pending_.clear();
        return stats;
    }
    records_.clear();
    formed_batch b = apply_pending(flight_results_, &records_, stats);
    if (!b.changed) {
        // nothing to write: these answers depend only on published (durable) state
        done.insert(done.end(), flight_results_.begin(), flight_results_.end());
        flight_results_.clear();
        settle(b, true, 0, 0, 0);
        finish_compaction();
        return stats;
    }
    flight_ = b;
    in_flight_ = true;
    log_->note_versions_below(next_version_);
    assert(!log_->busy());
    log_->append(std::move(records_));
    records_ = std::string();
    return stats;
}

std::expected<recovery_stats, std::string> shard_store::recover(env& e, const std::string& directory) {
    const snapshot* old = current_.load(std::memory_order_relaxed);
    doc_tree work(pool_, old->root_);
    formed_batch b;
    b.document_count = old->document_count_;
    b.value_bytes = old->value_bytes_;
    env_ = &e;
    directory_ = directory;
    auto stats = recover_segments(e, directory, [&](const record_view& rec, std::uint64_t segment_id, std::uint64_t offset) {
        auto segment = static_cast<std::uint32_t>(segment_id);
        const document* existing = work.find(rec.key);
        if (existing) {
            b.value_bytes -= existing->value_size();
            --b.document_count;
            segments_[existing->segment()].live_bytes -=
                record_bytes(existing->key().size(), existing->content_type().size(), existing->value_size());
        }
        segments_[segment].live_bytes += record_bytes(rec.key.size(), rec.content_type.size(), rec.value.size());
        if (rec.kind == record_kind::put) {
            document* doc = rec.value.size() >= file_value_min_bytes
                                ? file_document(rec.key, rec.content_type, rec.value.size(), segment, offset + rec.value_offset)
                                : copy_document(rec.key, rec.content_type, rec.value);
            doc->set_version(rec.version);
            doc->set_segment(segment);
            work.put(doc);
            ++b.document_count;
            b.value_bytes += rec.value.size();
        } else if (existing) {
            work.erase(rec.key)->release();
        }
        b.changed = true;
    }, [&](std::uint64_t segment_id, std::uint64_t valid_bytes) {
        segments_[static_cast<std::uint32_t>(segment_id)].bytes = valid_bytes;
    });
    if (!stats) return stats;
    std::erase_if(segments_, [&](const auto& entry) {
        return std::find(stats->segment_ids.begin(), stats->segment_ids.end(), entry.first) == stats->segment_ids.end();
    });
    if (stats->max_version >= next_version_) next_version_ = stats->max_version + 1;
    for (std::uint64_t id : stats->segment_ids)
        if (!open_segment(static_cast<std::uint32_t>(id)))
            return std::unexpected("cannot open " + directory + "/" + segment_file_name(id) + " to read values from it");
    if (b.changed) {
        b.root = work.publish();
        publish(b);
    }
    return stats;
}

std::uint64_t document_record_bytes(const document* d) {
    return record_bytes(d->key().size(), d->content_type().size(), d->value_size());
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
        segment_usage& u = segments_[segment];
        u.bytes += batch_bytes;
        u.live_bytes += batch_bytes - b.own_dead_bytes;
        for (auto [seg, bytes] : b.superseded) segments_[seg].live_bytes -= bytes;
        // tombstones stay counted as live until compaction drops them from the oldest segment
        // values move out of memory only where readers can find the file open
        bool readable = open_segment(segment);
        for (auto [d, value_at] : b.written) {
            d->set_segment(segment);
            if (readable && d->value_size() >= file_value_min_bytes && !d->in_file())
                d->move_value_to_file(batch_offset + value_at);
        }
    }
    for (auto [d, value_at] : b.written) d->release();
    b.written.clear();
    relocations_outstanding_ -= b.relocations;
    if (!ok && (b.relocations || b.relocations_superseded)) relocation_failed_ = true;
    b.relocations = 0;
}

// Keeps a read handle on every segment that holds values read from the log; readers find them in
// the snapshot's table, which is replaced (never changed) when a segment comes or goes.
bool shard_store::open_segment(std::uint32_t id) {
    if (!env_) return false;
    if (table_ && table_->find(id)) return true;
    auto file = env_->open_readable(directory_ + "/" + segment_file_name(id));
    if (!file) return false;  // its values then stay in memory
    auto next = std::make_shared<segment_table>();
    if (table_)
        for (const segment_file* f : table_->files) {
            f->retain();
            next->files.push_back(f);
        }
    next->files.push_back(new segment_file(id, std::move(*file)));
    table_ = std::move(next);
    return true;
}

void shard_store::close_segment(std::uint32_t id) {
    if (!table_ || !table_->find(id)) return;
    auto next = std::make_shared<segment_table>();
    for (const segment_file* f : table_->files) {
        if (f->id() == id) continue;
        f->retain();
        next->files.push_back(f);
    }
    table_ = std::move(next);
    // the current snapshot still names the old table until the next publication; that is fine
}

io_result<void> shard_store::read_value(const document& d, std::string& out) const {
    if (!d.in_file()) {
        out.assign(d.value());
        return {};
    }
    const segment_file* f = table_ ? table_->find(d.segment()) : nullptr;
    if (!f) return std::unexpected(ENOENT);
    out.resize(d.value_size());
    auto n = f->file().read_at(d.file_offset(), std::span<char>(out.data(), out.size()));
    if (!n) return std::unexpected(n.error());
    if (*n != out.size()) return std::unexpected(EIO);
    return {};
}

std::size_t shard_store::compact_step() {
    if (!log_ || !env_ || log_->failed() || pending_.size() >= max_pending_relocations) return 0;
    if (compacting_ == 0) {
        if (draining_ != 0) return 0;
        std::uint32_t active = static_cast<std::uint32_t>(log_->current_segment_id());
        std::uint32_t best = 0;
        std::uint64_t best_dead = 0;
        for (const auto& [id, u] : segments_) {
            if (id == active || u.bytes <= segment_header_bytes) continue;
            std::uint64_t dead = u.bytes - std::min(u.bytes, u.live_bytes + segment_header_bytes);
            if (dead * 2 >= u.bytes && dead > best_dead) {
                best = id;
                best_dead = dead;
            }
        }
        if (best == 0) return 0;
        auto reader = segment_reader::open(*env_, directory_ + "/" + segment_file_name(best));
        if (!reader) return 0;
        compact_reader_ = std::make_unique<segment_reader>(std::move(*reader));
        compacting_ = best;
        relocation_failed_ = false;
    }
    bool oldest = segments_.begin()->first == compacting_;
    const snapshot* snap = current();
    std::size_t queued = 0;
    std::uint64_t start = compact_reader_->valid_bytes();
    record_view rec;
    std::uint64_t offset;
    while (compact_reader_->valid_bytes() - start < compaction_read_bytes_per_step && compact_reader_->next(rec, offset)) {
        if (rec.kind == record_kind::segment_list) continue;
        write_op op;
        op.relocation = true;
        op.version = rec.version;
        if (rec.kind == record_kind::put) {
            const document* cur = snap->find(rec.key);
            if (!cur || cur->version() != rec.version || cur->segment() != compacting_) continue;
            op.doc = copy_document(rec.key, rec.content_type, rec.value);
            op.doc->set_version(rec.version);
        } else {
            // A tombstone hides older puts of its key; only the oldest segment has none older.
            if (oldest || snap->find(rec.key)) continue;
            op.key = std::string(rec.key);
        }
        pending_.push_back(std::move(op));
        ++relocations_outstanding_;
        ++queued;
    }
    if (compact_reader_->end() != segment_reader::end_state::none || compact_reader_->error() != 0) {
        bool complete = compact_reader_->end() == segment_reader::end_state::clean;
        compact_reader_.reset();
        if (complete) draining_ = compacting_;
        compacting_ = 0;
        finish_compaction();
    }
    return queued;
}

// Deletes the drained segment once every copy of its records is durable.
void shard_store::finish_compaction() {
    if (draining_ == 0 || relocations_outstanding_ != 0 || in_flight_) return;
    std::uint32_t victim = draining_;
    draining_ = 0;
    if (relocation_failed_) {
        relocation_failed_ = false;
        return;  // some copies never became durable: keep the segment, try again later
    }
    // The next segment's list must leave the victim out before the file goes, or recovery would
    // report it missing. (Values live in memory, so no snapshot holds the file itself.)
    log_->retire(victim);
    retiring_ = victim;
    retire_after_segment_ = log_->current_segment_id();
}

void shard_store::delete_retired(const append_result& r) {
    if (retiring_ == 0 || r.error != 0 || r.segment_id <= retire_after_segment_) return;
    if (env_->remove(directory_ + "/" + segment_file_name(retiring_))) {
        env_->sync_directory(directory_);
        segments_.erase(retiring_);
        close_segment(retiring_);
        ++segments_deleted_;
    }
    retiring_ = 0;
}

std::size_t shard_store::reclaim() {
    std::size_t freed = 0;
    while (!retired_.empty() && epochs_.passed(retired_.front().stamp)) {
        drop(retired_.front().snap);
        retired_.pop_front();
        ++freed;
    }
    return freed;
}

}  // namespace percore::store
