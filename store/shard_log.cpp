#include "store/shard_log.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "store/log_format.hpp"

namespace percore::store {

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
      thread_([this] { run(); }) {}

void shard_log::retire(std::uint64_t segment) {
    std::lock_guard lock(mutex_);
    std::erase(segments_, segment);
    roll_requested_ = true;
}

shard_log::~shard_log() {
    {
        std::lock_guard lock(mutex_);
        state_.store(state::stopping, std::memory_order_release);
    }
    wake_.notify_one();
    thread_.join();
}

void shard_log::append(std::string batch) {
    {
        std::lock_guard lock(mutex_);
        batch_ = std::move(batch);
        busy_ = true;
        state_.store(state::queued, std::memory_order_release);
    }
    wake_.notify_one();
}

std::optional<append_result> shard_log::poll() {
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
        wake_.wait(lock, [this] {
            auto s = state_.load(std::memory_order_acquire);
            return s == state::queued || s == state::stopping;
        });
        if (state_.load(std::memory_order_acquire) == state::stopping) return;
        lock.unlock();
        result_ = write(batch_);
        state_.store(state::done, std::memory_order_release);
        if (on_finished_) on_finished_();
    }
}

int shard_log::open_next_segment() {
    std::uint64_t id = next_segment_id_;
    std::string path = options_.directory + "/" + segment_file_name(id);
    auto f = env_.open_writable(path);
    if (!f) return f.error();
    char header[segment_header_bytes];
    encode_segment_header(header, options_.shard, id);
    std::string first(header, sizeof header);
    {
        std::lock_guard lock(mutex_);
        std::string ids;
        for (std::uint64_t s : segments_)
            for (int b = 0; b < 8; ++b) ids.push_back(static_cast<char>(s >> (8 * b)));
        encode_record(first, record_kind::segment_list, 0, {}, {}, ids);
    }
    // A failed attempt may have left part of a header behind: start the file over, and remove it
    // again if this attempt fails too, so a segment never begins with anything but its header.
    auto fail = [&](int error) {
        f->reset();
        env_.remove(path);
        return error;
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
    file_ = std::move(*f);
    batches_in_segment_ = 0;
    ++next_segment_id_;
    {
        std::lock_guard lock(mutex_);
        segments_.push_back(id);
        roll_requested_ = false;
    }
    segment_id_.store(id, std::memory_order_release);
    return 0;
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
    if (!file_ || roll || (batches_in_segment_ > 0 && file_->size() + batch.size() > options_.segment_target_bytes)) {
        if (int e = open_next_segment(); e != 0) {
            r.error = e;
            return r;
        }
    }
    r.segment_id = segment_id_.load(std::memory_order_relaxed);
    r.offset = file_->size();
    r.bytes = batch.size();
    if (auto w = file_->append(std::span<const char>(batch.data(), batch.size())); !w) {
        r.error = w.error();
        // leave no partial batch behind: later batches must follow the last good record
        if (auto t = file_->truncate(r.offset); !t) failed_.store(true, std::memory_order_release);
        return r;
    }
    ++batches_in_segment_;
    if (options_.sync) {
        if (auto s = file_->sync(); !s) {
            r.error = s.error();
            failed_.store(true, std::memory_order_release);
            return r;
        }
    }
    r.duration_ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    return r;
}

}  // namespace percore::store
