#include "net/client_socket.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "net/socket_io.hpp"
#include "shards/runtime/check.hpp"

namespace percore::net {

client_socket::client_socket(runtime::loop& loop, runtime::poller& poller, const socket_address& peer)
    : loop_(loop), poller_(poller), peer_(peer), alive_(std::make_shared<client_socket*>(this)) {}

client_socket::~client_socket() {
    if (fd_ >= 0) ::close(fd_);
}

void client_socket::open() {
    PERCORE_REQUIRES(!open_);
    open_ = true;
    ++generation_;
    error_ = 0;
    readable_ = false;
    tcp_connected_ = false;
    state_ = open_state::connecting;
    fd_ = ::socket(peer_.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return failed_now(errno);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, peer_.get(), peer_.size) != 0 && errno != EINPROGRESS) return failed_now(errno);
    // Connected at once or not, the first EPOLLOUT edge of the new watch tells.
    if (!poller_.watch(fd_, *this)) failed_now(errno);
}

// A failure known inside open(): reported like any other, from a later turn.
void client_socket::failed_now(int error) {
    error_ = error;
    state_ = open_state::connect_failed;
    post_ready();
}

void client_socket::post_ready() {
    loop_.post([alive = std::weak_ptr<client_socket*>(alive_), g = generation_] {
        const auto self = alive.lock();
        if (!self || (*self)->generation_ != g || !(*self)->open_) return;
        (*self)->ready();
    });
}

void client_socket::ready() {
    if (events_) events_->on_ready();
}

void client_socket::on_events(std::uint32_t events) {
    if (fd_ < 0) return;   // closed earlier in this batch of events
    if (state_ == open_state::connecting && !tcp_connected_ && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
        connect_ended();
    readiness(events);
}

// The connect's first edge: SO_ERROR says failed, a peer name says connected.
void client_socket::connect_ended() {
    int error = 0;
    socklen_t size = sizeof error;
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
    sockaddr_storage peer;
    socklen_t peer_size = sizeof peer;
    if (error != 0) {
        error_ = error;
        state_ = open_state::connect_failed;
    } else if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&peer), &peer_size) == 0) {
        tcp_connected_ = true;
        connected();
    }   // else a stale edge (a turn queued for an earlier descriptor): still connecting
}

void client_socket::readiness(std::uint32_t events) {
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) readable_ = true;
    ready();
}

io_result client_socket::read(std::span<char> into) {
    PERCORE_DEBUG_ASSERT(fd_ >= 0 && !into.empty());
    bool drained = false;
    const io_result r = recv_some(fd_, into, drained);
    if (drained) readable_ = false;
    return r;
}

io_result client_socket::write(std::span<const iovec> pieces) {
    PERCORE_DEBUG_ASSERT(fd_ >= 0);
    return send_some(fd_, pieces);
}

io_result client_socket::write_file(int, std::uint64_t, std::size_t) { return io_result::failed(); }

void client_socket::shutdown_write() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void client_socket::close() {
    PERCORE_REQUIRES(open_);
    if (fd_ >= 0) ::close(fd_);   // also leaves the epoll set
    fd_ = -1;
    open_ = false;
    readable_ = false;
    ++generation_;
    events_ = nullptr;
}

}  // namespace percore::net
