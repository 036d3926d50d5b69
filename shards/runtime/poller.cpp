#include "shards/runtime/poller.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "shards/runtime/check.hpp"
#include "shards/runtime/loop.hpp"

namespace percore::runtime {

poller::poller(loop& l) : loop_(l), epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)), descriptor_(l.io()) {
    if (epoll_fd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
    descriptor_.assign(epoll_fd_);   // closed by descriptor_'s destructor
    l.add_source(*this);
}

poller::~poller() = default;

bool poller::watch(int fd, poll_watcher& w) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = &w;
    return ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0;
}

std::size_t poller::poll() {
    PERCORE_DEBUG_ASSERT(loop_.in_round());
    epoll_event events[max_events];
    int n = ::epoll_wait(epoll_fd_, events, max_events, 0);
    for (int i = 0; i < n; ++i) static_cast<poll_watcher*>(events[i].data.ptr)->on_events(events[i].events);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
}

// Asio re-evaluates the descriptor's readiness when the wait is queued (epoll_ctl MOD), so events
// that are already waiting in the set end the sleep at once: no wake-up is lost.
void poller::arm() {
    if (armed_) return;
    armed_ = true;
    descriptor_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                           loop_.bind([this](const boost::system::error_code& ec) {
                               armed_ = false;
                               if (ec) return;
                               poll();
                           }));
}

}  // namespace percore::runtime
