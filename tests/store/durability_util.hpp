// Helpers shared by the durability tests (crash, failure, recovery, compaction, resharding):
//
// - crash_env: an env in front of a fault_env that counts the operations that change the disk and
//   cuts the power right before the k-th of them, on whatever thread makes it (the log's thread for
//   appends, syncs and segment creation; the shard's thread for compaction's removals). After the
//   cut every operation through it fails with EIO, as nothing runs after a real power cut, until
//   revive() (the next start). This makes crash points exact and reproducible: the torn tail of a
//   batch whose sync never ran, a segment whose header was written but not synced, a removal whose
//   directory sync never ran...
// - durable_store: a shard_store with its log attached, as a shard runs it, and helpers that drive
//   the log until the writes come back.
// - records_of / record_for / flip_byte: where a segment's records lie, and bit rot at one byte.
#pragma once

#include <doctest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "store/env.hpp"
#include "store/epoch.hpp"
#include "store/log_format.hpp"
#include "store/segment_reader.hpp"
#include "store/shard_log.hpp"
#include "store/shard_store.hpp"
#include "tests/store/fault_env.hpp"

namespace percore::store::test {

using percore::store::testing::fault_env;
using percore::store::testing::fault_op;

// How the power goes out.
struct power_cut_kind {
    bool random = true;                   // fault_env::power_cut(seed)
    std::uint64_t seed = 1;
    std::uint64_t keep_unsynced = 0;      // power_cut_keep(keep_unsynced, keep_directory_changes)
    bool keep_directory_changes = false;
};

class crash_env final : public env {
public:
    explicit crash_env(fault_env& inner) : inner_(inner) {}

    // The power goes out right before the `after`-th disk-changing operation from now (1: the next).
    void arm(std::uint64_t after, power_cut_kind kind) {
        std::lock_guard lock(mutex_);
        trigger_ = ops_ + after;
        kind_ = kind;
    }
    void disarm() {
        std::lock_guard lock(mutex_);
        trigger_ = 0;
    }
    // The power goes out now (from the test's thread, between the store's steps).
    void crash_now(power_cut_kind kind) {
        std::lock_guard lock(mutex_);
        if (dead_) return;
        cut_locked(kind, "between steps");
    }
    bool crashed() const { return dead_.load(std::memory_order_acquire); }
    // The next start: operations work again; nothing is armed.
    void revive() {
        std::lock_guard lock(mutex_);
        dead_.store(false, std::memory_order_release);
        trigger_ = 0;
    }
    std::uint64_t ops() const {
        std::lock_guard lock(mutex_);
        return ops_;
    }
    // What the power cut interrupted, for messages.
    std::string crash_point() const {
        std::lock_guard lock(mutex_);
        return crash_point_;
    }
    fault_env& inner() { return inner_; }

    io_result<std::unique_ptr<readable_file>> open_readable(const std::string& path) override {
        if (crashed()) return std::unexpected(EIO);
        auto f = inner_.open_readable(path);
        if (!f) return std::unexpected(f.error());
        return std::make_unique<readable>(*this, std::move(*f));
    }
    io_result<std::unique_ptr<writable_file>> open_writable(const std::string& path) override {
        if (hit("open_writable " + path)) return std::unexpected(EIO);
        auto f = inner_.open_writable(path);
        if (!f) return std::unexpected(f.error());
        return std::make_unique<writable>(*this, std::move(*f), path);
    }
    io_result<std::vector<std::string>> list(const std::string& directory) override {
        if (crashed()) return std::unexpected(EIO);
        return inner_.list(directory);
    }
    io_result<void> create_directory(const std::string& path) override {
        if (hit("create_directory " + path)) return std::unexpected(EIO);
        return inner_.create_directory(path);
    }
    io_result<void> remove(const std::string& path) override {
        if (hit("remove " + path)) return std::unexpected(EIO);
        return inner_.remove(path);
    }
    io_result<void> rename(const std::string& from, const std::string& to) override {
        if (hit("rename " + from + " " + to)) return std::unexpected(EIO);
        return inner_.rename(from, to);
    }
    io_result<void> sync_directory(const std::string& path) override {
        if (hit("sync_directory " + path)) return std::unexpected(EIO);
        return inner_.sync_directory(path);
    }
    bool exists(const std::string& path) override { return inner_.exists(path); }

private:
    class readable final : public readable_file {
    public:
        readable(crash_env& e, std::unique_ptr<readable_file> f) : env_(e), file_(std::move(f)) {}
        io_result<std::size_t> read_at(std::uint64_t offset, std::span<char> out) override {
            if (env_.crashed()) return std::unexpected(EIO);
            return file_->read_at(offset, out);
        }
        io_result<std::uint64_t> size() override {
            if (env_.crashed()) return std::unexpected(EIO);
            return file_->size();
        }

    private:
        crash_env& env_;
        std::unique_ptr<readable_file> file_;
    };
    // Writable files forward every operation, counting the ones that change the disk. Versions of
    // writable_file that can also overwrite in place (write_at, zero_fill) get those forwarded too.
    template <class W>
    class basic_writable : public W {
    public:
        basic_writable(crash_env& e, std::unique_ptr<W> f, std::string path)
            : env_(e), file_(std::move(f)), path_(std::move(path)) {}
        io_result<void> append(std::span<const char> data) override {
            if (env_.hit("append " + std::to_string(data.size()) + " bytes to " + path_)) return std::unexpected(EIO);
            return file_->append(data);
        }
        io_result<void> sync() override {
            if (env_.hit("sync " + path_)) return std::unexpected(EIO);
            return file_->sync();
        }
        io_result<void> truncate(std::uint64_t size) override {
            if (env_.hit("truncate " + path_)) return std::unexpected(EIO);
            return file_->truncate(size);
        }
        std::uint64_t size() const override { return file_->size(); }

    protected:
        crash_env& env_;
        std::unique_ptr<W> file_;
        std::string path_;
    };
    template <class W, bool overwrites = requires(W& w) {
        w.write_at(std::uint64_t{}, std::span<const char>{});
        w.zero_fill(std::uint64_t{});
    }>
    class writable_of final : public basic_writable<W> {
    public:
        using basic_writable<W>::basic_writable;
    };
    template <class W>
    class writable_of<W, true> final : public basic_writable<W> {
    public:
        using basic_writable<W>::basic_writable;
        io_result<void> write_at(std::uint64_t offset, std::span<const char> data) override {
            if (this->env_.hit("write " + std::to_string(data.size()) + " bytes at " + std::to_string(offset) + " of " +
                               this->path_))
                return std::unexpected(EIO);
            return this->file_->write_at(offset, data);
        }
        io_result<void> zero_fill(std::uint64_t size) override {
            if (this->env_.hit("zero-fill " + this->path_ + " to " + std::to_string(size))) return std::unexpected(EIO);
            return this->file_->zero_fill(size);
        }
    };
    using writable = writable_of<writable_file>;

    // Counts a disk-changing operation; true when it must fail because the power is (now) out.
    bool hit(const std::string& what) {
        std::lock_guard lock(mutex_);
        if (dead_) return true;
        ++ops_;
        if (trigger_ != 0 && ops_ >= trigger_) {
            cut_locked(kind_, "before " + what);
            return true;
        }
        return false;
    }
    void cut_locked(const power_cut_kind& kind, std::string what) {
        if (kind.random)
            inner_.power_cut(kind.seed);
        else
            inner_.power_cut_keep(kind.keep_unsynced, kind.keep_directory_changes);
        crash_point_ = std::move(what);
        trigger_ = 0;
        dead_.store(true, std::memory_order_release);
    }

    fault_env& inner_;
    mutable std::mutex mutex_;
    std::uint64_t ops_ = 0;
    std::uint64_t trigger_ = 0;
    power_cut_kind kind_;
    std::atomic<bool> dead_{false};
    std::string crash_point_;
};

// One shard's store with its log, as a shard runs it.
struct durable_store {
    reader_epochs epochs{1};
    std::unique_ptr<shard_store> store;
    std::optional<recovery_stats> stats;
    std::string error;  // of recover(), when it failed

    shard_store* operator->() { return store.get(); }
    shard_store& operator*() { return *store; }
};

struct store_options {
    std::uint32_t shard = 0;
    bool sync = true;
    std::uint64_t segment_target_bytes = 64ull << 20;
    std::uint64_t first_version = 1;
    // 0 in the seeded crash tests: an idle timer's marks would make their steps differ from run to run
    std::chrono::milliseconds commit_mark_idle{default_commit_mark_idle_ms};
    std::chrono::seconds changes_retention{default_changes_retention_seconds};
};

// The log for a recovered store (whichever constructor this version of shard_log has).
template <class Stats>
std::unique_ptr<shard_log> make_log(env& e, log_options o, const Stats& stats) {
    if constexpr (requires { stats.segment_ids; })
        return std::make_unique<shard_log>(e, std::move(o), stats.next_segment_id, stats.segment_ids,
                                           std::function<void()>{});
    else
        return std::make_unique<shard_log>(e, std::move(o), stats.next_segment_id, std::function<void()>{});
}

// Recovers the store in `directory` and attaches its log; on a failed recovery, `error` is set and
// no log is attached.
inline std::unique_ptr<durable_store> open_store(env& e, const std::string& directory, store_options o = {}) {
    auto s = std::make_unique<durable_store>();
    s->store = std::make_unique<shard_store>(s->epochs, o.first_version, o.changes_retention);
    auto r = s->store->recover(e, directory);
    if (!r) {
        s->error = r.error();
        return s;
    }
    s->stats = *r;
    log_options lo{directory, o.shard, o.sync, o.segment_target_bytes};
    lo.commit_mark_idle = o.commit_mark_idle;
    s->store->attach_log(make_log(e, std::move(lo), *r));
    return s;
}

// Waits until the batch in flight (if any) has finished in the log, without taking its result.
inline void wait_for_log(shard_store& s) {
    auto start = std::chrono::steady_clock::now();
    while (s.in_flight() && !s.ready()) {
        std::this_thread::yield();
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) {
            FAIL("the log never finished its append");
            return;
        }
    }
}

// Flushes until nothing is pending or in flight; returns every result, in order.
inline std::vector<write_result> drain(shard_store& s) {
    std::vector<write_result> done;
    for (;;) {
        wait_for_log(s);
        s.advance_batches(done);
        if (!s.in_flight() && !s.has_pending()) break;
    }
    s.reclaim();
    return done;
}

// Submits `ops` and drains: one result per op.
inline std::vector<write_result> write_all(shard_store& s, std::vector<write_op> ops) {
    std::size_t n = ops.size();
    for (auto& op : ops) s.submit(std::move(op));
    auto done = drain(s);
    REQUIRE(done.size() == n);
    return done;
}

inline write_result write_one(shard_store& s, write_op op) {
    std::vector<write_op> ops;
    ops.push_back(std::move(op));
    return write_all(s, std::move(ops)).front();
}

// Runs compaction to completion: compact_step() and flushes until neither has anything to do.
inline void compact_fully(shard_store& s, int max_rounds = 10000) {
    for (int i = 0; i < max_rounds; ++i) {
        std::uint64_t deleted = s.segments_deleted();
        std::size_t queued = s.compact_step();
        drain(s);
        if (queued == 0 && s.segments_deleted() == deleted && s.compact_step() == 0) {
            drain(s);
            if (s.segments_deleted() == deleted) return;
        }
    }
}

// The bytes of a document's value, wherever they live: in memory, or (for a store that keeps large
// values only in the log) in a segment that the snapshot holds open.
template <class Snapshot, class Document>
std::string value_bytes_of(const Snapshot& snap, const Document& d) {
    if constexpr (requires { d.in_file(); d.file_offset(); d.value_size(); snap.segment(std::uint64_t{}); }) {
        if (d.in_file()) {
            const auto* f = snap.segment(d.segment());
            if (!f) return "<segment " + std::to_string(d.segment()) + " is not open>";
            std::string out(d.value_size(), '\0');
            auto n = f->file().read_at(d.file_offset(), std::span<char>(out.data(), out.size()));
            if (!n) return "<the value cannot be read: errno " + std::to_string(n.error()) + ">";
            if (*n != out.size())
                return "<only " + std::to_string(*n) + " of the value's bytes at " + std::to_string(d.file_offset()) +
                       " in segment " + std::to_string(d.segment()) + ">";
            return out;
        }
    }
    return std::string(d.value());
}

template <class Document>
std::size_t value_size_of(const Document& d) {
    if constexpr (requires { d.value_size(); })
        return d.value_size();
    else
        return d.value().size();
}

// The value of `key` in the store's current snapshot, or "<missing>".
inline std::string current_value(shard_store& s, std::string_view key) {
    const snapshot* snap = s.current();
    const document* d = snap->find(key);
    return d ? value_bytes_of(*snap, *d) : std::string("<missing>");
}

inline bool is_change(write_outcome o) {
    return o == write_outcome::created || o == write_outcome::replaced || o == write_outcome::deleted;
}

inline const char* outcome_name(write_outcome o) {
    switch (o) {
    case write_outcome::created: return "created";
    case write_outcome::replaced: return "replaced";
    case write_outcome::deleted: return "deleted";
    case write_outcome::not_found: return "not_found";
    case write_outcome::precondition_failed: return "precondition_failed";
    case write_outcome::no_space: return "no_space";
    case write_outcome::unavailable: return "unavailable";
    case write_outcome::quota_exceeded: return "quota_exceeded";
    }
    return "?";
}

// Every segment file (name) in a directory of a fault_env, sorted.
inline std::vector<std::string> segment_files(fault_env& e, const std::string& directory) {
    std::vector<std::string> out;
    for (const std::string& path : e.files())
        if (path.starts_with(directory + "/") && path.ends_with(".seg") &&
            path.find('/', directory.size() + 1) == std::string::npos)
            out.push_back(path);
    return out;
}

inline std::uint64_t segment_bytes(fault_env& e, const std::string& directory) {
    std::uint64_t total = 0;
    for (const std::string& path : segment_files(e, directory)) total += e.contents(path)->size();
    return total;
}

inline std::string segment_path(const std::string& directory, std::uint64_t id) {
    return directory + "/" + segment_file_name(id);
}

// A put (or copy) or tombstone record of a segment, where it lies (records_of).
struct record_at {
    record_kind kind;
    std::string key;
    std::uint64_t offset;  // of the record's first byte
    std::uint64_t end;     // one past its last byte
};

// The put (copy) and tombstone records of a segment, in order (other kinds of records are skipped).
inline std::vector<record_at> records_of(env& e, const std::string& path) {
    auto reader = segment_reader::open(e, path);
    REQUIRE(reader.has_value());
    std::vector<record_at> out;
    record_view r;
    std::uint64_t offset = 0;
    while (reader->next(r, offset)) {
        if (r.holds_document() || r.kind == record_kind::tombstone)
            out.push_back({r.kind, std::string(r.key), offset, reader->valid_bytes()});
    }
    REQUIRE(reader->end() == segment_reader::end_state::clean);
    return out;
}

inline const record_at& record_for(const std::vector<record_at>& records, const std::string& key) {
    for (const auto& r : records)
        if (r.key == key) return r;
    FAIL("no record for " << key);
    return records.front();
}

inline void flip_byte(fault_env& fe, const std::string& path, std::uint64_t offset) {
    std::string byte(1, static_cast<char>((*fe.contents(path))[offset] ^ 0x5a));
    fe.overwrite(path, offset, byte);
}

}  // namespace percore::store::test
