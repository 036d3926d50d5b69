#include "store/shard_log.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>

#include "store/log_format.hpp"
#include "store/newest_segment.hpp"

namespace percore::store {

namespace {

constexpr std::size_t zeros_bytes = std::size_t{256} << 10;

std::span<const char> zeros(std::uint64_t at_most) {
    static const std::vector<char> bytes(zeros_bytes, '\0');
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(at_most, bytes.size()));
    return std::span<const char>(bytes.data(), n);
}

}  // namespace

std::string segment_file_name(std::uint64_t segment_id) {
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.seg", static_cast<unsigned long long>(segment_id));
    return name;
}

shard_log::shard_log(env& e, log_options options, std::uint64_t next_segment_id,
                     std::vector<std::uint64_t> existing_segments, std::function<void()> on_finished)
    : env_(e),
      options_(std::move(options)),
      on_finished_(std::move(on_finished)),
      segment_id_(0),
      next_segment_id_(next_segment_id),
      segments_(std::move(existing_segments)),
      thread_([this] { run(); }) {
    PERCORE_REQUIRES(options_.commit_mark_idle >= std::chrono::milliseconds(0) &&
                     options_.commit_mark_idle <= std::chrono::hours(1));
}

void shard_log::retire(std::uint64_t segment) {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    PERCORE_REQUIRES(!busy_);
    std::lock_guard lock(mutex_);
    std::erase(segments_, segment);
}

void shard_log::request_roll() {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    std::lock_guard lock(mutex_);
    roll_requested_ = true;
}

shard_log::~shard_log() {
    {
        std::lock_guard lock(mutex_);
        state_.store(state::stopping, std::memory_order_release);
    }
    wake_.notify_one();
    thread_.join();
    write_commit_mark();   // a clean stop leaves its last batch marked
    // a clean stop leaves no zero tail for recovery to cut
    if (file_ && !failed() && file_->size() > end_ && file_->truncate(end_) && options_.sync) (void)file_->sync();
}

void shard_log::append(std::string batch) {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    PERCORE_REQUIRES(!busy_);
    {
        std::lock_guard lock(mutex_);
        batch_ = std::move(batch);
        busy_ = true;
        state_.store(state::queued, std::memory_order_release);
    }
    wake_.notify_one();
}

std::string shard_log::take_spent_buffer() {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    PERCORE_REQUIRES(!busy_);
    if (batch_.capacity() > max_returned_buffer_bytes) return std::string();
    batch_.clear();
    return std::move(batch_);
}

std::optional<append_result> shard_log::poll() {
    PERCORE_DEBUG_ASSERT(owner_.on_owner());
    if (!busy_ || state_.load(std::memory_order_acquire) != state::done) return std::nullopt;
    append_result r = result_;
    busy_ = false;
    batch_.clear();
    state_.store(state::idle, std::memory_order_release);
    return r;
}

void shard_log::run() {
    for (;;) {
        std::unique_lock lock(mutex_);
        wait_for_work(lock);
        if (state_.load(std::memory_order_acquire) == state::stopping) return;
        lock.unlock();
        result_ = write(batch_);
        auto queued = state::queued;
        if (!state_.compare_exchange_strong(queued, state::done, std::memory_order_acq_rel)) return;  // stopping
        if (on_finished_) on_finished_();
        extend_zeroed_window();
    }
}

// Until a batch is queued or the log stops; after commit_mark_idle with nothing queued behind an
// unmarked batch, writes the mark (unlocked: append() may queue meanwhile) and waits on.
void shard_log::wait_for_work(std::unique_lock<std::mutex>& lock) {
    auto work = [this] {
        auto s = state_.load(std::memory_order_acquire);
        return s == state::queued || s == state::stopping;
    };
    while (!work()) {
        if (!unmarked_ || options_.commit_mark_idle.count() == 0) {
            wake_.wait(lock, work);
            return;
        }
        if (wake_.wait_for(lock, options_.commit_mark_idle, work)) return;
        lock.unlock();
        write_commit_mark();
        lock.lock();
    }
}

// After the last synced batch of the segment: a mark naming its own place, synced. Log thread (or
// the destructor, once it has stopped).
void shard_log::write_commit_mark() {
    if (!unmarked_ || !file_ || failed()) return;
    unmarked_ = false;
    std::string mark;
    encode_commit_mark(mark, segment_id_.load(std::memory_order_relaxed), end_);
    if (auto w = file_->write_at(end_, std::span<const char>(mark.data(), mark.size())); !w) {
        // nothing acknowledged depends on it: cleared, so the next batch may go to the same offset
        if (!clear_failed_write(end_, mark.size())) failed_.store(true, std::memory_order_release);
        return;
    }
    end_ += mark.size();
    zeroed_end_ = std::max(zeroed_end_, end_);
    if (auto s = file_->sync(); !s) failed_.store(true, std::memory_order_release);
}

// Seals the current segment: recovery refuses a segment that ends in zeros when newer ones follow.
io_result<void> shard_log::seal_current_segment() {
    if (file_->size() > end_) {
        if (auto t = file_->truncate(end_); !t) return std::unexpected(t.error());
        if (options_.sync) {
            if (auto s = file_->sync(); !s) {
                failed_.store(true, std::memory_order_release);
                return std::unexpected(s.error());
            }
        }
    }
    zeroed_end_ = end_;
    zeroing_ = false;
    return {};
}

io_result<void> shard_log::open_next_segment() {
    if (file_)
        if (auto sealed = seal_current_segment(); !sealed) return sealed;
    std::uint64_t id = next_segment_id_;
    // a document keeps its segment in 31 bits (limits.hpp): past them the log is refused, not wrapped
    if (id > max_segment_id) return std::unexpected(EFBIG);
    std::string path = options_.directory + "/" + segment_file_name(id);
    auto f = env_.open_writable(path);
    if (!f) return std::unexpected(f.error());
    char header[segment_header_bytes];
    encode_segment_header(header, options_.shard, id);
    std::string first(header, sizeof header);
    {
        std::lock_guard lock(mutex_);
        encode_record(first, record_kind::segment_list, version_floor_.load(std::memory_order_relaxed), {}, {},
                      encode_segment_list(segments_));
    }
    // A failed attempt may have left part of a header behind: start the file over, and remove it
    // again if this attempt fails too, so a segment never begins with anything but its header.
    // The removal is made durable before anything else is written: the next batch may go to the
    // current (older) segment, and a power cut that undid the removal would bring this file back
    // after it — a newer segment with a valid header behind an older one whose torn last batch
    // then reads as records missing (recovery refused to start; crash test, seeds 4728, 10941 and
    // 15252 of 16,000). If the removal cannot be made durable, the log stops: no batch may follow.
    auto fail = [&](int error) -> io_result<void> {
        f->reset();
        if (!env_.remove(path) || (options_.sync && !env_.sync_directory(options_.directory)))
            failed_.store(true, std::memory_order_release);
        return std::unexpected(error);  // the error that failed the creation
    };
    if (auto r = (*f)->truncate(0); !r) return fail(r.error());
    if (auto r = (*f)->append(std::span<const char>(first.data(), first.size())); !r) return fail(r.error());
    if (options_.sync) {
        // a failed sync is not retried as if it had worked, here either (fsyncgate)
        if (auto r = (*f)->sync(); !r) {
            failed_.store(true, std::memory_order_release);
            return fail(r.error());
        }
        if (auto r = env_.sync_directory(options_.directory); !r) {
            failed_.store(true, std::memory_order_release);
            return fail(r.error());
        }
    }
    // Durable in its directory: from now on recovery may require it (newest_segment.hpp). A failure
    // to name it fails nothing: the file then names an older segment (or, its rename done but not
    // synced, this one, which is durable already), so it never names a segment that is gone; the
    // check is only weaker until the next segment's. Failing the creation instead would leave this
    // segment behind an older one that may take more batches (found by the crash test, seed 2880).
    (void)write_newest_segment(env_, options_.directory, id, options_.sync);
    file_ = std::move(*f);
    batches_in_segment_ = 0;
    unmarked_ = false;   // the sealed segment is followed by this one: damage at its end is refused anyway
    end_ = first.size();
    zeroed_end_ = end_;
    zeroing_ = options_.sync && options_.zeroed_window_bytes > 0;
    ++next_segment_id_;
    {
        std::lock_guard lock(mutex_);
        segments_.push_back(id);
        roll_requested_ = false;
    }
    segment_id_.store(id, std::memory_order_release);
    return {};
}

append_result shard_log::write(const std::string& batch) {
    auto start = std::chrono::steady_clock::now();
    append_result r;
    if (failed()) {
        r.error = EIO;
        return r;
    }
    bool roll;
    {
        std::lock_guard lock(mutex_);
        roll = roll_requested_;
    }
    if (!file_ || roll || (batches_in_segment_ > 0 && end_ + batch.size() > options_.segment_target_bytes)) {
        if (auto opened = open_next_segment(); !opened) {
            r.error = opened.error();
            return r;
        }
    }
    r.segment_id = segment_id_.load(std::memory_order_relaxed);
    r.offset = end_;
    r.bytes = batch.size();
    if (auto w = file_->write_at(end_, std::span<const char>(batch.data(), batch.size())); !w) {
        r.error = w.error();
        if (!clear_failed_write(end_, batch.size())) failed_.store(true, std::memory_order_release);
        return r;
    }
    end_ += batch.size();
    zeroed_end_ = std::max(zeroed_end_, end_);
    ++batches_in_segment_;
    if (options_.sync) {
        if (auto s = file_->sync(); !s) {
            r.error = s.error();
            failed_.store(true, std::memory_order_release);
            return r;
        }
        unmarked_ = true;
    }
    r.duration_ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    return r;
}

// Leaves no byte of a failed write behind, durably: the next batch goes to the same offset and may be
// shorter, and a stale record after it would read as damage, or bring back a write that was answered
// as failed.
bool shard_log::clear_failed_write(std::uint64_t offset, std::uint64_t length) {  // true: cleared, durably
    const std::uint64_t keep = std::max(zeroed_end_, offset);
    if (file_->size() > keep && !file_->truncate(keep)) return false;
    const std::uint64_t end = std::min(offset + length, zeroed_end_);
    for (std::uint64_t at = offset; at < end;) {
        auto z = zeros(end - at);
        if (!file_->write_at(at, z)) return false;
        at += z.size();
    }
    return !options_.sync || file_->sync().has_value();
}

void shard_log::extend_zeroed_window() {
    if (!zeroing_ || failed() || state_.load(std::memory_order_acquire) == state::stopping) return;
    {
        std::lock_guard lock(mutex_);
        if (roll_requested_) return;
    }
    const std::uint64_t window = options_.zeroed_window_bytes;
    if (zeroed_end_ - end_ >= window) return;
    const std::uint64_t target = std::min(zeroed_end_ + window, options_.segment_target_bytes);
    if (target <= zeroed_end_) return;
    if (auto z = file_->zero_fill(target); !z) {
        // no batch failed: this segment grows with each batch from here, and the next one tries again
        zeroing_ = false;
        if (file_->size() > zeroed_end_) (void)file_->truncate(zeroed_end_);
        return;
    }
    if (auto s = file_->sync(); !s) {
        failed_.store(true, std::memory_order_release);
        return;
    }
    zeroed_end_ = target;
}

}  // namespace percore::store
