#include "shards/runtime/loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "shards/runtime/check.hpp"
#include "shards/runtime/limits.hpp"

namespace percore::runtime {

loop::loop(unsigned shard_id)
    : shard_(shard_id),
      io_(1),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      wake_descriptor_(io_),
      tick_(io_) {
    if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    wake_descriptor_.assign(wake_fd_);  // closed by wake_descriptor_'s destructor
}

// The eventfd is closed by wake_descriptor_'s destructor, which runs after the owner's members
// (declared after the loop) are gone: a log thread that calls wake() after its last append must
// never write to a closed or reused descriptor.
loop::~loop() = default;

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

void loop::arm_wake() {
    wake_descriptor_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                                bind([this](const boost::system::error_code& ec) {
                                    if (ec) return;
                                    std::uint64_t value;
                                    while (::read(wake_fd_, &value, sizeof value) > 0) {
                                    }
                                    arm_wake();
                                }));
}

void loop::arm_tick() {
    tick_.expires_after(tick_interval);
    tick_.async_wait(bind([this](const boost::system::error_code& ec) {
        if (ec) return;
        owner_->tick();
        arm_tick();
    }));
}

void loop::run() {
    PERCORE_REQUIRES(owner_ != nullptr);
    PERCORE_REQUIRES(this_shard() == shard_);
    auto guard = boost::asio::make_work_guard(io_);
    arm_wake();
    arm_tick();
    while (!owner_->finished()) {
        end_round();
        enter_round();
        std::size_t work = io_.poll();
        if (source_) work += source_->poll();
        work += owner_->step();
        if (work == 0 && !owner_->finished()) sleep();
    }
    tick_.cancel();
    end_round();
}

void loop::sleep() {
    end_round();
    sleeping_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (owner_->has_work() || (source_ && source_->has_work())) {
        sleeping_.store(false, std::memory_order_relaxed);
        return;
    }
    if (source_) source_->arm();
    io_.run_one();  // the handler that wakes the loop enters the next round itself (bind)
    sleeping_.store(false, std::memory_order_relaxed);
}

}  // namespace percore::runtime
