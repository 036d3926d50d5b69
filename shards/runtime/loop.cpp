#include "shards/runtime/loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <system_error>

#include "shards/runtime/check.hpp"
#include "shards/runtime/limits.hpp"

namespace percore::runtime {

loop::loop(unsigned shard_id)
    : shard_(shard_id),
      io_(1),
      epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (epoll_fd_ < 0 || wake_fd_ < 0) {
        int err = errno;
        if (epoll_fd_ >= 0) ::close(epoll_fd_);
        if (wake_fd_ >= 0) ::close(wake_fd_);
        throw std::system_error(err, std::generic_category(), "loop: epoll_create1/eventfd");
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.ptr = nullptr;   // the loop's own entry: no watcher
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
        int err = errno;
        ::close(epoll_fd_);
        ::close(wake_fd_);
        throw std::system_error(err, std::generic_category(), "loop: epoll_ctl(eventfd)");
    }
}

// The descriptors close after the owner's members (declared after the loop) are gone: a log
// thread that calls wake() after its last append must never write to a closed or reused
// descriptor.
loop::~loop() {
    ::close(epoll_fd_);
    ::close(wake_fd_);
}

void loop::enter_round() {
    if (in_round_) return;
    in_round_ = true;
    clock_.set(clock_type::now());
    if (owner_) owner_->round_began();
}

void loop::end_round() {
    if (!in_round_) return;
    in_round_ = false;
    if (owner_) owner_->round_ended();
}

void loop::wake() {
    std::uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof one);
    (void)n;  // EAGAIN only when the counter is saturated: the loop is awake then anyway
}

std::size_t loop::run_posted() {
    std::size_t n = io_.poll();
    if (io_.stopped()) io_.restart();
    return n;
}

// A sleep shorter than 2 ms goes to epoll_pwait2, bounded to the microsecond (a batch linger is
// ~0.1-0.25 ms; epoll_wait counts whole milliseconds); where the kernel (or qemu-user) lacks it,
// epoll_wait rounds up to 1 ms. Longer sleeps (the tick) round up to the millisecond.
std::size_t loop::wait_events(std::span<epoll_event> out, std::chrono::nanoseconds timeout) {
    const auto size = static_cast<int>(out.size());
    int n;
    if (timeout.count() <= 0) {
        n = ::epoll_wait(epoll_fd_, out.data(), size, 0);
    } else if (timeout < std::chrono::milliseconds(2)) {
        const timespec limit{0, static_cast<long>(timeout.count())};
        n = ::epoll_pwait2(epoll_fd_, out.data(), size, &limit, nullptr);
        if (n < 0 && errno == ENOSYS) n = ::epoll_wait(epoll_fd_, out.data(), size, 1);
    } else {
        n = ::epoll_wait(epoll_fd_, out.data(), size,
                         static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(timeout).count()));
    }
    if (n <= 0) return 0;   // nothing, or EINTR (the next round asks again)
    std::size_t kept = 0;
    for (int i = 0; i < n; ++i) {
        if (out[i].data.ptr == nullptr) {
            std::uint64_t value;
            ssize_t r = ::read(wake_fd_, &value, sizeof value);   // resets the counter
            (void)r;
            continue;
        }
        out[kept++] = out[i];
    }
    return kept;
}

// The tick runs inside the round that finds it due; the next is tick_interval after this one.
bool loop::tick_if_due() {
    if (clock_.now() < next_tick_) return false;
    next_tick_ = clock_.now() + tick_interval;
    owner_->tick();
    return true;
}

// Until the tick or the owner's deadline, whichever comes first.
std::chrono::nanoseconds loop::time_to_sleep() {
    const auto until = std::min(next_tick_, owner_->wake_by());
    const auto left = until - clock_type::now();
    return left.count() > 0 ? std::chrono::duration_cast<std::chrono::nanoseconds>(left) : std::chrono::nanoseconds(0);
}

void loop::run() {
    PERCORE_REQUIRES(owner_ != nullptr);
    PERCORE_REQUIRES(this_shard() == shard_);
    auto guard = boost::asio::make_work_guard(io_);
    enter_round();
    next_tick_ = clock_.now() + tick_interval;
    while (!owner_->finished()) {
        end_round();
        enter_round();
        std::size_t work = tick_if_due() ? 1 : 0;
        work += io_.poll();
        if (source_) work += source_->poll();
        work += owner_->step();
        // A round of work goes to sleep() too, which returns at once while anything is left;
        // otherwise its epoll_wait returns at once with what is ready and stands for the next
        // round's harvest. Sleeping only after a round that did nothing cost a harvest that found
        // nothing before every sleep: 3 epoll_wait a one-request connection, now 2.3 (nginx 1.3).
        // Not while messages flow between shards (exchanged_messages()).
        if (owner_->finished()) break;
        if (work == 0 || !owner_->exchanged_messages()) sleep();
    }
    end_round();
}

// Outside a round. What the wait returned is served by the next round.
void loop::sleep() {
    end_round();
    sleeping_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (owner_->has_work() || (source_ && source_->has_work()) ||
        posts_pending_.load(std::memory_order_relaxed) != 0) {
        sleeping_.store(false, std::memory_order_relaxed);
        return;
    }
    const auto timeout = time_to_sleep();
    if (source_) {
        source_->wait(timeout);
    } else {
        epoll_event events[8];
        (void)wait_events(events, timeout);   // no watchers without a source: only the wake
    }
    sleeping_.store(false, std::memory_order_relaxed);
}

}  // namespace percore::runtime
