// shard_log's zeroed window (store/shard_log.hpp "Zeroed window"): batches written over synced zeros
// at the segment's logical end, sealed segments cut at their last record, failed writes and zero
// fills, and power cuts at every step, checked through segment_reader and recover_segments.
#include <doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/env.hpp"
#include "store/log_format.hpp"
#include "store/recovery.hpp"
#include "store/segment_reader.hpp"
#include "store/shard_log.hpp"
#include "tests/store/fault_env.hpp"

using namespace percore::store;
using percore::store::testing::fault_env;
using percore::store::testing::fault_op;

namespace {

const std::string dir = "/log";

void make_dir(fault_env& e) {
    REQUIRE(e.create_directory(dir).has_value());
    REQUIRE(e.sync_directory("/").has_value());
}

log_options options(std::uint64_t target, std::uint64_t window, bool sync = true, const std::string& d = dir) {
    log_options o;
    o.directory = d;
    o.sync = sync;
    o.segment_target_bytes = target;
    o.zeroed_window_bytes = window;
    o.commit_mark_idle = std::chrono::milliseconds(0);   // the power-cut walks count steps: no timer
    return o;
}

std::string seg(std::uint64_t id, const std::string& d = dir) { return d + "/" + segment_file_name(id); }

// `count` put records with versions first, first + 1, ...
std::string batch_of(std::uint64_t first, int count, std::size_t value_bytes = 100) {
    std::string out;
    for (int i = 0; i < count; ++i) {
        const std::uint64_t v = first + static_cast<std::uint64_t>(i);
        encode_record(out, record_kind::put, v, "key" + std::to_string(v), "text/plain",
                      std::string(value_bytes, static_cast<char>('a' + v % 26)));
    }
    return out;
}

append_result append_wait(shard_log& log, std::string batch) {
    log.append(std::move(batch));
    const auto start = std::chrono::steady_clock::now();
    while (!log.finished()) {
        std::this_thread::yield();
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) FAIL("the log never finished");
    }
    return log.poll().value();
}

// Waits until the log thread has finished the zeroing it started after the last batch.
void settle(shard_log& log) { REQUIRE(append_wait(log, std::string()).error == 0); }

struct scanned {
    std::vector<std::uint64_t> versions;  // of the put records
    segment_reader::end_state end = segment_reader::end_state::none;
    std::uint64_t valid_bytes = 0;
    std::uint64_t file_bytes = 0;
};

scanned scan(env& e, const std::string& path) {
    auto reader = segment_reader::open(e, path);
    REQUIRE(reader.has_value());
    scanned out;
    record_view r;
    std::uint64_t offset = 0;
    while (reader->next(r, offset))
        if (r.kind == record_kind::put) out.versions.push_back(r.version);
    REQUIRE(reader->error() == 0);
    out.end = reader->end();
    out.valid_bytes = reader->valid_bytes();
    out.file_bytes = reader->file_bytes();
    return out;
}

bool all_zeros(const std::string& bytes, std::uint64_t from) {
    return from <= bytes.size() && std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.end(),
                                                [](char c) { return c == '\0'; });
}

std::vector<std::uint64_t> range(std::uint64_t first, std::uint64_t count) {
    std::vector<std::uint64_t> out;
    for (std::uint64_t i = 0; i < count; ++i) out.push_back(first + i);
    return out;
}

// The versions of every put record recovery replays, in log order.
std::expected<std::vector<std::uint64_t>, std::string> recovered_versions(env& e, recovery_stats* stats = nullptr,
                                                                         const std::string& d = dir) {
    std::vector<std::uint64_t> versions;
    auto r = recover_segments(e, d, [&](const record_view& rec, auto&&...) {
        if (rec.kind == record_kind::put) versions.push_back(rec.version);
    });
    if (!r) return std::unexpected(r.error());
    if (stats) *stats = *r;
    return versions;
}

// An env in front of a fault_env that hands every operation that changes the disk, named ("append",
// "write_at", "zero_fill", "sync", "truncate", "open_writable", "sync_directory", ...), to a hook
// first: a non-zero errno from it fails the operation without running it.
class hooked_env final : public env {
public:
    using hook = std::function<int(const std::string& op)>;
    hooked_env(fault_env& inner, hook h) : inner_(inner), hook_(std::move(h)) {}

    io_result<std::unique_ptr<readable_file>> open_readable(const std::string& path) override {
        return inner_.open_readable(path);
    }
    io_result<std::unique_ptr<writable_file>> open_writable(const std::string& path) override {
        if (int e = call("open_writable")) return std::unexpected(e);
        auto f = inner_.open_writable(path);
        if (!f) return std::unexpected(f.error());
        return std::make_unique<writable>(*this, std::move(*f));
    }
    io_result<std::vector<std::string>> list(const std::string& d) override { return inner_.list(d); }
    io_result<void> create_directory(const std::string& path) override {
        if (int e = call("create_directory")) return std::unexpected(e);
        return inner_.create_directory(path);
    }
    io_result<void> remove(const std::string& path) override {
        if (int e = call("remove")) return std::unexpected(e);
        return inner_.remove(path);
    }
    io_result<void> rename(const std::string& from, const std::string& to) override {
        if (int e = call("rename")) return std::unexpected(e);
        return inner_.rename(from, to);
    }
    io_result<void> sync_directory(const std::string& path) override {
        if (int e = call("sync_directory")) return std::unexpected(e);
        return inner_.sync_directory(path);
    }
    bool exists(const std::string& path) override { return inner_.exists(path); }

private:
    class writable final : public writable_file {
    public:
        writable(hooked_env& e, std::unique_ptr<writable_file> f) : env_(e), file_(std::move(f)) {}
        io_result<void> append(std::span<const char> data) override {
            if (int e = env_.call("append")) return std::unexpected(e);
            return file_->append(data);
        }
        io_result<void> write_at(std::uint64_t offset, std::span<const char> data) override {
            if (int e = env_.call("write_at")) return std::unexpected(e);
            return file_->write_at(offset, data);
        }
        io_result<void> zero_fill(std::uint64_t size) override {
            if (int e = env_.call("zero_fill")) return std::unexpected(e);
            return file_->zero_fill(size);
        }
        io_result<void> sync() override {
            if (int e = env_.call("sync")) return std::unexpected(e);
            return file_->sync();
        }
        io_result<void> truncate(std::uint64_t size) override {
            if (int e = env_.call("truncate")) return std::unexpected(e);
            return file_->truncate(size);
        }
        std::uint64_t size() const override { return file_->size(); }

    private:
        hooked_env& env_;
        std::unique_ptr<writable_file> file_;
    };

    int call(const std::string& op) {
        std::lock_guard lock(mutex_);
        return hook_(op);
    }

    fault_env& inner_;
    hook hook_;
    std::mutex mutex_;
};

}  // namespace

TEST_CASE("batches land at the segment's logical end over a zeroed window and read back in order") {
    fault_env fe(1);
    make_dir(fe);
    shard_log log(fe, options(64 << 10, 4096), 1, {}, {});
    std::uint64_t expected_offset = 0;
    for (int i = 0; i < 5; ++i) {
        const std::string batch = batch_of(1 + 3 * static_cast<std::uint64_t>(i), 3);
        auto r = append_wait(log, batch);
        REQUIRE(r.error == 0);
        CHECK(r.segment_id == 1);
        if (i > 0) CHECK(r.offset == expected_offset);
        expected_offset = r.offset + batch.size();
    }
    settle(log);
    const std::string bytes = fe.contents(seg(1)).value();
    CHECK(bytes.size() >= expected_offset + 4096);
    CHECK(all_zeros(bytes, expected_offset));
    CHECK(fe.durable_contents(seg(1)) == bytes);  // the zeros are synced too
    auto s = scan(fe, seg(1));
    CHECK(s.versions == range(1, 15));
    CHECK(s.valid_bytes == expected_offset);
    CHECK(s.end == segment_reader::end_state::torn_tail);
}

TEST_CASE("a finished batch's buffer comes back empty with its capacity, and one above the bound does not") {
    fault_env fe(11);
    make_dir(fe);
    shard_log log(fe, options(64 << 10, 4096), 1, {}, {});
    std::string batch = batch_of(1, 3);
    batch.reserve(4096);
    const std::string written = batch;
    const append_result first = append_wait(log, std::move(batch));
    REQUIRE(first.error == 0);
    std::string spent = log.take_spent_buffer();
    CHECK(spent.empty());
    CHECK(spent.capacity() >= 4096);
    std::string large = batch_of(4, 1);
    large.reserve(shard_log::max_returned_buffer_bytes + 1);
    REQUIRE(append_wait(log, std::move(large)).error == 0);
    CHECK(log.take_spent_buffer().capacity() <= shard_log::max_returned_buffer_bytes);
    settle(log);
    CHECK(fe.contents(seg(1)).value().compare(first.offset, written.size(), written) == 0);
}

TEST_CASE("the zeroed window grows one window at a time ahead of the batches and never past the segment target") {
    fault_env fe(2);
    make_dir(fe);
    const std::uint64_t target = 8192;
    const std::uint64_t window = 1024;
    shard_log log(fe, options(target, window), 1, {}, {});
    std::uint64_t version = 1;
    std::uint64_t last_size = 0;
    for (int i = 0; i < 100; ++i) {
        auto r = append_wait(log, batch_of(version, 2));
        version += 2;
        REQUIRE(r.error == 0);
        settle(log);
        const std::string bytes = fe.contents(seg(r.segment_id)).value();
        const std::uint64_t end = r.offset + r.bytes;
        INFO("batch ", i, " segment ", r.segment_id, " end ", end, " file ", bytes.size());
        CHECK(all_zeros(bytes, end));
        CHECK(bytes.size() <= std::max(target, end));
        CHECK((bytes.size() - end >= window || bytes.size() == target));
        if (r.segment_id == 1 && last_size != 0) CHECK(bytes.size() - last_size <= window);
        if (r.segment_id == 1) last_size = bytes.size();
    }
    CHECK(log.current_segment_id() > 2);
}

TEST_CASE("sealed segments end exactly after their last record, with the cut synced") {
    fault_env fe(3);
    make_dir(fe);
    shard_log log(fe, options(2048, 512), 1, {}, {});
    for (std::uint64_t v = 1; v <= 60; v += 3) REQUIRE(append_wait(log, batch_of(v, 3)).error == 0);
    const std::uint64_t last = log.current_segment_id();
    REQUIRE(last >= 4);
    std::vector<std::uint64_t> versions;
    for (std::uint64_t id = 1; id < last; ++id) {
        CAPTURE(id);
        auto s = scan(fe, seg(id));
        CHECK(s.end == segment_reader::end_state::clean);
        CHECK(s.file_bytes == s.valid_bytes);
        CHECK(fe.durable_contents(seg(id)) == fe.contents(seg(id)));
        versions.insert(versions.end(), s.versions.begin(), s.versions.end());
    }
    auto s = scan(fe, seg(last));
    versions.insert(versions.end(), s.versions.begin(), s.versions.end());
    CHECK(versions == range(1, 60));
}

// Commit marks (shard_log.hpp "Commit marks"): what lets recovery tell bit rot in the last batch
// from a torn one.
namespace {

log_options marking(std::chrono::milliseconds idle, bool sync = true) {
    log_options o = options(1 << 20, 0, sync);
    o.commit_mark_idle = idle;
    return o;
}

// The commit mark at `offset` of `bytes`, if one is there.
std::optional<commit_mark> mark_at(const std::string& bytes, std::uint64_t offset) {
    if (offset + commit_mark_bytes > bytes.size()) return std::nullopt;
    record_view r;
    std::size_t size = 0;
    if (decode_record(std::string_view(bytes).substr(offset), r, size) != decode_status::ok ||
        r.kind != record_kind::commit_mark)
        return std::nullopt;
    return decode_commit_mark(r.value);
}

}  // namespace

TEST_CASE("a log idle for commit_mark_idle after a batch writes a commit mark naming its segment and offset, and syncs it") {
    fault_env fe(41);
    make_dir(fe);
    shard_log log(fe, marking(std::chrono::milliseconds(5)), 1, {}, {});
    auto r = append_wait(log, batch_of(1, 3));
    REQUIRE(r.error == 0);
    const std::uint64_t end = r.offset + r.bytes;
    const auto start = std::chrono::steady_clock::now();
    while (fe.durable_contents(seg(1))->size() < end + commit_mark_bytes) {
        REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    auto mark = mark_at(*fe.durable_contents(seg(1)), end);
    REQUIRE(mark.has_value());
    CHECK(mark->segment_id == 1);
    CHECK(mark->offset == end);
    // one mark per quiet spell: none more until another batch
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(fe.contents(seg(1))->size() == end + commit_mark_bytes);
    auto next = append_wait(log, batch_of(4, 1));
    REQUIRE(next.error == 0);
    CHECK(next.offset == end + commit_mark_bytes);   // the next batch follows the mark
    CHECK(scan(fe, seg(1)).versions == range(1, 4)); // readers skip marks
}

TEST_CASE("batches that follow each other within commit_mark_idle get no mark between them, and a clean stop marks the last") {
    fault_env fe(42);
    make_dir(fe);
    std::uint64_t end = 0;
    {
        shard_log log(fe, marking(std::chrono::seconds(60)), 1, {}, {});
        for (std::uint64_t v = 1; v <= 9; v += 3) {
            auto r = append_wait(log, batch_of(v, 3));
            REQUIRE(r.error == 0);
            if (end) CHECK(r.offset == end);
            end = r.offset + r.bytes;
        }
        CHECK(fe.contents(seg(1))->size() == end);
    }
    auto mark = mark_at(*fe.durable_contents(seg(1)), end);
    REQUIRE(mark.has_value());
    CHECK(mark->offset == end);
    CHECK(fe.durable_contents(seg(1))->size() == end + commit_mark_bytes);
    recovery_stats stats;
    CHECK(recovered_versions(fe, &stats).value() == range(1, 9));
    CHECK(stats.truncated_bytes == 0);
}

TEST_CASE("a log without sync writes no commit marks, idle or at a stop") {
    fault_env fe(43);
    make_dir(fe);
    std::uint64_t end = 0;
    {
        shard_log log(fe, marking(std::chrono::milliseconds(1), false), 1, {}, {});
        auto r = append_wait(log, batch_of(1, 2));
        REQUIRE(r.error == 0);
        end = r.offset + r.bytes;
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        CHECK(fe.contents(seg(1))->size() == end);
    }
    CHECK(fe.contents(seg(1))->size() == end);
}

TEST_CASE("after a power cut that kept the idle commit mark, a flipped byte in the last batch refuses recovery; one that lost it cuts the batch") {
    for (bool mark_kept : {true, false}) {
        CAPTURE(mark_kept);
        fault_env fe(44);
        make_dir(fe);
        shard_log log(fe, marking(std::chrono::milliseconds(mark_kept ? 2 : 60000)), 1, {}, {});
        REQUIRE(append_wait(log, batch_of(1, 2)).error == 0);
        auto r = append_wait(log, batch_of(3, 2));
        REQUIRE(r.error == 0);
        const std::uint64_t end = r.offset + r.bytes;
        if (mark_kept) {
            const auto start = std::chrono::steady_clock::now();
            while (fe.durable_contents(seg(1))->size() < end + commit_mark_bytes) {
                REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
        fe.power_cut(7);
        std::string image = *fe.contents(seg(1));
        image[end - 3] = static_cast<char>(image[end - 3] ^ 0x20);   // in the last record's value
        fault_env after(45);
        make_dir(after);
        after.write_file(seg(1), image);
        recovery_stats stats;
        auto got = recovered_versions(after, &stats);
        if (mark_kept) {
            REQUIRE_FALSE(got.has_value());
            CHECK(got.error().find("damaged record") != std::string::npos);
        } else {
            REQUIRE(got.has_value());
            CHECK(*got == range(1, 3));   // the damaged record is the only one lost, as if torn
        }
    }
}

TEST_CASE("a clean stop cuts the zero tail and the next start continues in a new segment") {
    fault_env fe(4);
    make_dir(fe);
    {
        shard_log log(fe, options(64 << 10, 4096), 1, {}, {});
        for (std::uint64_t v = 1; v <= 12; v += 4) REQUIRE(append_wait(log, batch_of(v, 4)).error == 0);
        settle(log);
        REQUIRE(fe.contents(seg(1))->size() > scan(fe, seg(1)).valid_bytes);
    }
    auto s = scan(fe, seg(1));
    CHECK(s.end == segment_reader::end_state::clean);
    CHECK(fe.durable_contents(seg(1))->size() == s.valid_bytes);

    recovery_stats stats;
    REQUIRE(recovered_versions(fe, &stats).value() == range(1, 12));
    CHECK(stats.truncated_bytes == 0);
    {
        shard_log log(fe, options(64 << 10, 4096), stats.next_segment_id, stats.segment_ids, {});
        auto r = append_wait(log, batch_of(13, 2));
        REQUIRE(r.error == 0);
        CHECK(r.segment_id == 2);
    }
    CHECK(recovered_versions(fe).value() == range(1, 14));
}

TEST_CASE("after a power cut recovery cuts the zero tail as a torn tail and the log continues in a new segment") {
    for (bool keep_unsynced : {false, true}) {
        CAPTURE(keep_unsynced);
        fault_env fe(5);
        make_dir(fe);
        {
            shard_log log(fe, options(64 << 10, 4096), 1, {}, {});
            for (std::uint64_t v = 1; v <= 12; v += 4) REQUIRE(append_wait(log, batch_of(v, 4)).error == 0);
            settle(log);
            fe.power_cut_keep(keep_unsynced ? UINT64_MAX : 0);
        }
        recovery_stats stats;
        REQUIRE(recovered_versions(fe, &stats).value() == range(1, 12));
        CHECK(stats.truncated_bytes >= 4096);
        CHECK(scan(fe, seg(1)).end == segment_reader::end_state::clean);
        {
            shard_log log(fe, options(64 << 10, 4096), stats.next_segment_id, stats.segment_ids, {});
            auto r = append_wait(log, batch_of(13, 2));
            REQUIRE(r.error == 0);
            CHECK(r.segment_id == 2);
            fe.power_cut(9);
        }
        CHECK(recovered_versions(fe).value() == range(1, 14));
    }
}

TEST_CASE("a batch larger than the zeroed window is written whole and the window follows it") {
    fault_env fe(6);
    make_dir(fe);
    shard_log log(fe, options(1 << 20, 1024), 1, {}, {});
    REQUIRE(append_wait(log, batch_of(1, 1)).error == 0);
    settle(log);
    const std::string big = batch_of(2, 8, 1000);
    REQUIRE(big.size() > 2 * 1024);
    auto r = append_wait(log, big);
    REQUIRE(r.error == 0);
    REQUIRE(append_wait(log, batch_of(10, 1)).error == 0);
    settle(log);
    auto s = scan(fe, seg(1));
    CHECK(s.versions == range(1, 10));
    CHECK(s.file_bytes - s.valid_bytes >= 1024);
    CHECK(all_zeros(fe.contents(seg(1)).value(), s.valid_bytes));
}

TEST_CASE("without sync the log writes no zeroed window") {
    fault_env fe(7);
    make_dir(fe);
    shard_log log(fe, options(64 << 10, 4096, false), 1, {}, {});
    for (std::uint64_t v = 1; v <= 9; v += 3) REQUIRE(append_wait(log, batch_of(v, 3)).error == 0);
    settle(log);
    auto s = scan(fe, seg(1));
    CHECK(s.versions == range(1, 9));
    CHECK(s.end == segment_reader::end_state::clean);
}

TEST_CASE("a failed batch write is reported, its bytes are cleared, and the next batch at the same offset reads back alone") {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        CAPTURE(seed);
        fault_env fe(seed);
        make_dir(fe);
        fe.set_partial_failed_appends(true);
        shard_log log(fe, options(64 << 10, 8192), 1, {}, {});
        REQUIRE(append_wait(log, batch_of(1, 2)).error == 0);
        settle(log);
        const auto size_before = fe.contents(seg(1))->size();
        const int err = seed % 2 ? ENOSPC : EIO;
        fe.fail_next(fault_op::write, err);
        auto failed = append_wait(log, batch_of(3, 6));  // long: the next batch covers only its start
        CHECK(failed.error == err);
        CHECK_FALSE(log.failed());
        CHECK(fe.contents(seg(1))->size() == size_before);
        CHECK(all_zeros(fe.contents(seg(1)).value(), failed.offset));
        auto next = append_wait(log, batch_of(9, 1));
        REQUIRE(next.error == 0);
        CHECK(next.offset == failed.offset);
        auto s = scan(fe, seg(1));
        CHECK(s.versions == std::vector<std::uint64_t>{1, 2, 9});
        CHECK(all_zeros(fe.contents(seg(1)).value(), s.valid_bytes));
        if (seed > 10) fe.power_cut(seed);
        CHECK(recovered_versions(fe).value() == std::vector<std::uint64_t>{1, 2, 9});
    }
}

TEST_CASE("a failed batch write that passed the zeroed end is cut back to it") {
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
        CAPTURE(seed);
        fault_env fe(seed);
        make_dir(fe);
        fe.set_partial_failed_appends(true);
        shard_log log(fe, options(1 << 20, 1024), 1, {}, {});
        REQUIRE(append_wait(log, batch_of(1, 1)).error == 0);
        settle(log);
        const auto size_before = fe.contents(seg(1))->size();
        const std::string big = batch_of(100, 10, 500);
        REQUIRE(big.size() > 2 * 1024);
        fe.fail_next(fault_op::write, EIO);
        CHECK(append_wait(log, big).error == EIO);
        CHECK(fe.contents(seg(1))->size() == size_before);
        CHECK(all_zeros(fe.contents(seg(1)).value(), scan(fe, seg(1)).valid_bytes));
        REQUIRE(append_wait(log, batch_of(2, 1)).error == 0);
        CHECK(scan(fe, seg(1)).versions == std::vector<std::uint64_t>{1, 2});
    }
}

TEST_CASE("a failed clearing of a failed batch write fails the log") {
    fault_env fe(9);
    make_dir(fe);
    shard_log log(fe, options(64 << 10, 4096), 1, {}, {});
    REQUIRE(append_wait(log, batch_of(1, 2)).error == 0);
    settle(log);
    fe.fail_next(fault_op::write, EIO, 2);  // the batch, then the zeros over it
    CHECK(append_wait(log, batch_of(3, 2)).error == EIO);
    CHECK(log.failed());
    CHECK(append_wait(log, batch_of(5, 1)).error == EIO);
    CHECK(recovered_versions(fe).value() == range(1, 2));
}

TEST_CASE("ENOSPC while zero-filling fails no batch: the segment grows with each batch and the next segment zeroes again") {
    fault_env fe(10);
    make_dir(fe);
    fe.set_capacity_bytes(3000);  // room for a few batches, not for a window of zeros
    auto o = options(4096, 4096);
    shard_log log(fe, o, 1, {}, {});
    std::uint64_t version = 1;
    std::vector<std::uint64_t> acknowledged;
    int no_space = 0;
    for (int i = 0; i < 12; ++i) {
        auto r = append_wait(log, batch_of(version, 2));
        if (r.error == 0) {
            acknowledged.push_back(version);
            acknowledged.push_back(version + 1);
            settle(log);
            CHECK(fe.contents(seg(1))->size() == r.offset + r.bytes);  // no window
        } else {
            CHECK(r.error == ENOSPC);
            ++no_space;
        }
        version += 2;
        CHECK_FALSE(log.failed());
    }
    CHECK(acknowledged.size() >= 6);
    CHECK(no_space > 0);
    fe.set_capacity_bytes(UINT64_MAX);
    for (int i = 0; i < 12; ++i, version += 2) {
        auto r = append_wait(log, batch_of(version, 2));
        REQUIRE(r.error == 0);
        acknowledged.push_back(version);
        acknowledged.push_back(version + 1);
    }
    settle(log);
    const std::uint64_t last = log.current_segment_id();
    REQUIRE(last > 1);
    const auto tail = scan(fe, seg(last));
    CHECK(tail.file_bytes > tail.valid_bytes);  // zeroed again
    CHECK(recovered_versions(fe).value() == acknowledged);
}

TEST_CASE("a failed sync of the zeros fails the log like any failed sync") {
    fault_env fe(11);
    make_dir(fe);
    std::string previous;
    bool failed_once = false;
    hooked_env he(fe, [&](const std::string& op) {
        const bool zeros_sync = op == "sync" && previous == "zero_fill" && !failed_once;
        previous = op;
        if (!zeros_sync) return 0;
        failed_once = true;
        return EIO;
    });
    REQUIRE(he.sync_directory("/").has_value());
    shard_log log(he, options(64 << 10, 4096), 1, {}, {});
    CHECK(append_wait(log, batch_of(1, 2)).error == 0);  // answered before the zeros after it
    CHECK(append_wait(log, batch_of(3, 2)).error == EIO);
    CHECK(failed_once);
    CHECK(log.failed());
    CHECK(recovered_versions(fe).value() == range(1, 2));
}

namespace {

struct cut_kind {
    bool random;
    std::uint64_t keep;  // power_cut_keep(keep) when not random
    bool zero_tails;
};

// Runs a short sequence of appends through two segments (creation, the first batch growing the file,
// zero fills, batches inside and past the window, sealing, the clean stop) with the power cut right
// before the disk-changing operation number `step`; then recovers, checks, and restarts twice. False
// when the sequence has fewer operations than `step`.
bool cut_at_step(const cut_kind& kind, std::uint64_t step, std::uint64_t seed) {
    fault_env fe(seed);
    make_dir(fe);
    fe.set_zero_fill_torn_tails(kind.zero_tails);
    std::uint64_t ops = 0;
    std::string cut_before;
    hooked_env he(fe, [&](const std::string& op) {
        if (!cut_before.empty()) return EIO;
        if (++ops < step) return 0;
        cut_before = op;
        if (kind.random)
            fe.power_cut(seed * 1000 + step);
        else
            fe.power_cut_keep(kind.keep);
        return EIO;
    });
    const auto o = options(2400, 700);
    std::vector<std::uint64_t> acknowledged;
    std::uint64_t version = 1;
    {
        shard_log log(he, o, 1, {}, {});
        for (int b = 0; b < 10; ++b) {
            const int count = b == 4 ? 8 : 2;
            auto r = append_wait(log, batch_of(version, count));
            for (int i = 0; i < count; ++i, ++version)
                if (r.error == 0) acknowledged.push_back(version);
        }
    }
    if (cut_before.empty()) return false;
    INFO("power cut before ", cut_before);

    recovery_stats stats;
    auto got = recovered_versions(fe, &stats);
    REQUIRE_MESSAGE(got.has_value(), got.error());
    // in log order, nothing invented, every acknowledged batch there
    CHECK(std::is_sorted(got->begin(), got->end()));
    CHECK(std::adjacent_find(got->begin(), got->end()) == got->end());
    if (!got->empty()) CHECK(got->back() < version);
    for (std::uint64_t v : acknowledged) CHECK(std::binary_search(got->begin(), got->end(), v));

    std::vector<std::uint64_t> expected = *got;
    {
        shard_log log(fe, o, stats.next_segment_id, stats.segment_ids, {});
        for (std::uint64_t v = 1000; v < 1006; v += 2) {
            REQUIRE(append_wait(log, batch_of(v, 2)).error == 0);
            expected.push_back(v);
            expected.push_back(v + 1);
        }
    }
    recovery_stats again;
    auto after = recovered_versions(fe, &again);
    REQUIRE_MESSAGE(after.has_value(), after.error());
    CHECK(*after == expected);
    CHECK(again.truncated_bytes == 0);
    for (std::uint64_t id : again.segment_ids) CHECK(scan(fe, seg(id)).end == segment_reader::end_state::clean);
    return true;
}

}  // namespace

TEST_CASE("a power cut at any step of a short run of appends never makes recovery refuse and never loses a synced batch") {
    const std::vector<cut_kind> kinds = {
        {false, 0, false}, {false, 700, false}, {false, UINT64_MAX, false}, {true, 0, false}, {true, 0, true}};
    std::uint64_t cuts = 0;
    for (const cut_kind& kind : kinds) {
        for (std::uint64_t step = 1;; ++step) {
            bool cut = false;
            for (std::uint64_t seed = 1; seed <= (kind.random ? 4u : 1u); ++seed) {
                CAPTURE(kind.random);
                CAPTURE(kind.keep);
                CAPTURE(kind.zero_tails);
                CAPTURE(step);
                CAPTURE(seed);
                cut = cut_at_step(kind, step, seed);
                cuts += cut;
            }
            if (!cut) break;
        }
    }
    MESSAGE(cuts, " power cuts");
    CHECK(cuts > 100);
}

// KNOWN GAP (recovery / segment_reader, not the log): fault_env keeps a prefix of the pending writes,
// but a disk that loses power while a multi-page overwrite is flushed can keep a later page of it and
// not an earlier one (sector and page writes are not ordered; appending was safe from this on ext4
// because the grown size is journaled only after the data is written). The unacknowledged batch then
// reads as zeros followed by valid records, which recovery calls damage and refuses to start. A fix
// needs the last batch's extent at recovery (a batch header or commit record in the log format).
TEST_CASE("a power cut that keeps a later page of an overwritten batch but not its first still recovers" *
          doctest::may_fail()) {
    constexpr std::uint64_t page = 4096;
    std::string image;
    std::uint64_t batch_offset = 0;
    std::uint64_t batch_end = 0;
    {
        fault_env fe(12);
        make_dir(fe);
        shard_log log(fe, options(1 << 20, 64 << 10), 1, {}, {});
        REQUIRE(append_wait(log, batch_of(1, 2)).error == 0);
        settle(log);
        auto r = append_wait(log, batch_of(3, 40, 200));  // three pages or so
        REQUIRE(r.error == 0);
        settle(log);
        batch_offset = r.offset;
        batch_end = r.offset + r.bytes;
        image = fe.contents(seg(1)).value();
    }
    const std::uint64_t first_page_end = (batch_offset / page + 1) * page;
    REQUIRE(batch_end > first_page_end + page);
    std::fill(image.begin() + static_cast<std::ptrdiff_t>(batch_offset),
              image.begin() + static_cast<std::ptrdiff_t>(first_page_end), '\0');
    fault_env fe(13);
    make_dir(fe);
    fe.write_file(seg(1), image);
    auto got = recovered_versions(fe);
    CHECK_MESSAGE(got.has_value(), (got ? std::string() : got.error()));
    if (got) CHECK(*got == range(1, 2));
}

TEST_CASE("the log on a real file system overwrites zeros ahead of its batches and leaves clean segments at a stop") {
    char name[] = "/tmp/percore-log-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    const std::string d = name;
    std::uint64_t last = 0;
    {
        shard_log log(posix_env(), options(32 << 10, 8 << 10, true, d), 1, {}, {});
        for (std::uint64_t v = 1; v <= 300; v += 10) {
            auto r = append_wait(log, batch_of(v, 10, 200));
            REQUIRE(r.error == 0);
            last = r.segment_id;
        }
        settle(log);
        struct stat st{};
        REQUIRE(::stat(seg(last, d).c_str(), &st) == 0);
        CHECK(static_cast<std::uint64_t>(st.st_size) > scan(posix_env(), seg(last, d)).valid_bytes);
    }
    REQUIRE(last > 1);
    for (std::uint64_t id = 1; id <= last; ++id) {
        auto s = scan(posix_env(), seg(id, d));
        CHECK(s.end == segment_reader::end_state::clean);
    }
    CHECK(recovered_versions(posix_env(), nullptr, d).value() == range(1, 300));
    std::error_code ignored;
    std::filesystem::remove_all(d, ignored);
}

// retire() and request_roll() (store/shard_log.hpp): retiring a compacted segment must not start a
// segment by itself — a roll per retired segment made the log start a segment per batch (the segment
// leak, tests/soak/repro/segment_leak.py); the owner asks for a roll when it needs one.

namespace {

// The ids a segment's list (its first record) names.
std::vector<std::uint64_t> listed_segments(env& e, const std::string& path) {
    auto reader = segment_reader::open(e, path);
    REQUIRE(reader.has_value());
    record_view r;
    std::uint64_t offset = 0;
    REQUIRE(reader->next(r, offset));
    REQUIRE(r.kind == record_kind::segment_list);
    auto ids = decode_segment_list(r.value);
    REQUIRE(ids.has_value());
    return *ids;
}

}  // namespace

TEST_CASE("retiring a segment starts no new one, and the next segment the log starts leaves it out of its list") {
    fault_env fe(40);
    make_dir(fe);
    shard_log log(fe, options(2048, 0), 1, {}, {});
    std::uint64_t v = 1;
    for (; log.current_segment_id() < 3; v += 3) REQUIRE(append_wait(log, batch_of(v, 3)).error == 0);
    log.retire(1);
    auto r = append_wait(log, batch_of(v, 1));
    ++v;
    REQUIRE(r.error == 0);
    CHECK(r.segment_id == 3);  // no roll for the retirement
    for (; log.current_segment_id() == 3; v += 3) REQUIRE(append_wait(log, batch_of(v, 3)).error == 0);
    CHECK(log.current_segment_id() == 4);
    CHECK(listed_segments(fe, seg(3)) == std::vector<std::uint64_t>{1, 2});
    CHECK(listed_segments(fe, seg(4)) == std::vector<std::uint64_t>{2, 3});
}

TEST_CASE("a requested roll starts a new segment at the next append, even with room left, and only one") {
    fault_env fe(41);
    make_dir(fe);
    shard_log log(fe, options(1 << 20, 0), 1, {}, {});
    REQUIRE(append_wait(log, batch_of(1, 2)).error == 0);
    REQUIRE(log.current_segment_id() == 1);
    log.request_roll();
    auto r = append_wait(log, batch_of(3, 2));
    REQUIRE(r.error == 0);
    CHECK(r.segment_id == 2);
    r = append_wait(log, batch_of(5, 2));
    REQUIRE(r.error == 0);
    CHECK(r.segment_id == 2);
    CHECK(listed_segments(fe, seg(2)) == std::vector<std::uint64_t>{1});
    auto got = recovered_versions(fe);
    REQUIRE(got.has_value());
    CHECK(*got == range(1, 6));
}
