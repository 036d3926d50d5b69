#include "net/listener.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <system_error>

#include "crypto/tls.hpp"
#include "shards/runtime/check.hpp"

namespace percore::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

listener::listener(runtime::loop& loop, runtime::poller& poller, connection_pool& pool, crypto::tls_server* tls)
    : loop_(loop), pool_(pool), tls_(tls), poller_(poller) {
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (tls_) tls_scratch_ = std::make_unique_for_overwrite<char[]>(tls_file_chunk_bytes);
}

listener::~listener() {
    close();
    for (auto& t : transports_)
        if (t->is_open()) t->close();
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
}

// Throws std::system_error naming the call that failed (the socket is closed again then).
void listener::listen(const tcp::endpoint& endpoint) {
    PERCORE_REQUIRES(fd_ < 0);
    int fd = ::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
    auto fail = [fd](const char* what) {
        int err = errno;
        ::close(fd);
        throw std::system_error(err, std::generic_category(), what);
    };
    int one = 1;
    if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) fail("SO_REUSEADDR");
    if (::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) fail("SO_REUSEPORT");
    if (::bind(fd, endpoint.data(), static_cast<socklen_t>(endpoint.size())) != 0) fail("bind");
    if (::listen(fd, SOMAXCONN) != 0) fail("listen");
    fd_ = fd;
}

std::uint16_t listener::local_port() const {
    tcp::endpoint local;
    socklen_t size = static_cast<socklen_t>(local.capacity());
    if (fd_ < 0 || ::getsockname(fd_, local.data(), &size) != 0) return 0;
    local.resize(size);
    return local.port();
}

// The socket joins the shard's epoll set once, level-triggered; every round that finds a
// connection waiting gives it a turn (on_events).
void listener::start() {
    PERCORE_REQUIRES(fd_ >= 0);
    if (!poller_.watch(fd_, *this, runtime::poller::trigger::level))
        throw std::system_error(errno, std::generic_category(), "epoll_ctl(listener)");
}

void listener::on_events(std::uint32_t) { accept_one(); }

void listener::retry_if_stalled() {
    if (reserve_fd_ < 0) reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // lost to another shard
    if (stalled_ && fd_ >= 0 && poller_.report(fd_, *this, true)) stalled_ = false;
}

void listener::close() {
    if (fd_ < 0) return;
    ::close(fd_);   // leaves the epoll set with it
    fd_ = -1;
}

socket_transport& listener::free_transport() {
    if (!free_.empty()) {
        socket_transport* t = free_.back();
        free_.pop_back();
        return *t;
    }
    if (tls_)
        transports_.push_back(
            std::make_unique<tls_socket_transport>(loop_, poller_, *this, pool_.stats(), *tls_, tls_scratch_.get()));
    else
        transports_.push_back(std::make_unique<socket_transport>(loop_, poller_, *this, pool_.stats()));
    return *transports_.back();
}

void listener::recycle(socket_transport& t) { free_.push_back(&t); }

// One accept4 a turn. A failure that the next round cannot cure by itself (out of descriptors
// with no reserve, out of memory) stalls the listener, so a level-triggered backlog does not spin.
void listener::accept_one() {
    if (fd_ < 0 || stalled_) return;
    int fd = accept_fd();
    if (fd >= 0) {
        if (!serve(fd)) {
            if (!tls_) refuse(fd);
            else bump(pool_.stats().refused);
            ::close(fd);
        }
        return;
    }
    int err = -fd;
    if (err == EAGAIN || err == EWOULDBLOCK || err == EBADF || err == EINVAL) return;
    if (err == ECONNABORTED || err == EINTR || err == EPROTO) return;   // the next round takes the next one
    if ((err == EMFILE || err == ENFILE) && refuse_past_descriptor_limit()) return;
    stall();
}

void listener::stall() {
    stalled_ = true;
    if (!poller_.report(fd_, *this, false)) stalled_ = false;   // still reported: the next round retries
}

int listener::accept_fd() {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    return fd >= 0 ? fd : -errno;
}

// Gives an accepted descriptor to a connection; false when it must be refused (the pool is full or
// stopping) — the caller still owns `fd` then. Out of memory inside OpenSSL closes it quietly.
bool listener::serve(int fd) {
    if (pool_.full()) return false;
    socket_transport& t = free_transport();
    if (!t.opened(fd)) {   // the epoll set is full (out of kernel memory): nothing to answer with
        free_.push_back(&t);
        return true;
    }
    bump(pool_.stats().accepted);
    if (tls_ && !static_cast<tls_socket_transport&>(t).begin_tls()) {
        t.close();
        return true;
    }
    connection* c = pool_.open(t);
    PERCORE_ASSERT(c != nullptr);   // full() was false, and nothing ran in between
    return true;
}

// Out of file descriptors: frees the reserve to accept one waiting connection and refuse it.
// False when there was nothing to accept or the reserve could not help.
bool listener::refuse_past_descriptor_limit() {
    if (reserve_fd_ < 0) reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (reserve_fd_ < 0) return false;
    ::close(reserve_fd_);
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
        if (tls_) bump(pool_.stats().refused);
        else refuse(fd);
        ::close(fd);
    }
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // may fail: retried next time
    return fd >= 0;
}

// Answers 503 and shuts the write side; the caller closes the descriptor.
void listener::refuse(int fd) {
    static constexpr std::string_view answer =
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
        "Content-Length: 32\r\n\r\n{\"error\":\"too many connections\"}";
    bump(pool_.stats().refused);
    ssize_t n = ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    ::shutdown(fd, SHUT_WR);
}

}  // namespace percore::net
