#include "net/tls_client_socket.hpp"
#include "net/tls_results.hpp"

#include <sys/epoll.h>

#include <utility>

#include "net/limits.hpp"
#include "shards/runtime/check.hpp"

namespace percore::net {

namespace {

bool valid_host(std::string_view host) {
    return !host.empty() && host.size() <= crypto::tls_client_longest_host &&
           host.find('\0') == std::string_view::npos;
}

}  // namespace

tls_client_socket::tls_client_socket(runtime::loop& loop, runtime::poller& poller, const socket_address& peer,
                                     const crypto::tls_client& tls, std::string host)
    : client_socket(loop, poller, peer), client_(tls), host_(std::move(host)) {
    PERCORE_REQUIRES(valid_host(host_));
}

tls_client_socket::tls_client_socket(runtime::loop& loop, runtime::poller& poller, const socket_address& peer,
                                     std::shared_ptr<const crypto::tls_client> tls, std::string host)
    : client_socket(loop, poller, peer), shared_((PERCORE_REQUIRES(tls != nullptr), std::move(tls))),
      client_(*shared_), host_(std::move(host)) {
    PERCORE_REQUIRES(valid_host(host_));
}

void tls_client_socket::open() {
    tls_ = crypto::tls_connection();
    tls_error_.clear();
    handshaking_ = unflushed_ = read_needs_writable_ = false;
    reads_this_turn_ = 0;
    client_socket::open();
}

// The TCP connect succeeded: the session begins; readiness() (called next, for the same edge)
// sends the ClientHello.
void tls_client_socket::connected() {
    auto made = client_.connect(fd(), host_);
    if (!made) return tls_failed(made.error().message());
    tls_ = std::move(*made);
    handshaking_ = true;
}

void tls_client_socket::tls_failed(std::string_view why) {
    handshaking_ = false;
    tls_error_ = why;
    state_ = open_state::tls_failed;
}

// Any edge may be the one the handshake waited for: it runs again (OpenSSL answers want_* again
// when it was not). The connection hears only of the handshake's end.
void tls_client_socket::handshake() {
    const crypto::tls_status st = tls_.handshake();
    if (st == crypto::tls_status::want_read || st == crypto::tls_status::want_write) return;
    if (st == crypto::tls_status::ok) {
        handshaking_ = false;
        state_ = open_state::open;
        readable_ = true;   // records that came with the handshake's last flight raise no new edge
    } else {
        tls_failed(tls_.last_error());
    }
    ready();
}

void tls_client_socket::readiness(std::uint32_t events) {
    if (handshaking_) return handshake();
    if (state_ != open_state::open) return ready();   // connect_failed or tls_failed: say so
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) readable_ = true;
    if (read_needs_writable_ && (events & EPOLLOUT)) {
        read_needs_writable_ = false;
        readable_ = true;
    }
    ready();
}

// The library waits for the socket: to read (no whole record yet) or to write.
void tls_client_socket::want(crypto::tls_status st) {
    readable_ = false;
    read_needs_writable_ = st == crypto::tls_status::want_write;
}

// Enough records for one turn: the connection stops at would_block, readable() stays true, and a
// posted turn brings it back after the other connections had theirs.
io_result tls_client_socket::yield() {
    reads_this_turn_ = 0;
    post_ready();
    return io_result::would_block();
}

io_result tls_client_socket::read(std::span<char> into) {
    PERCORE_DEBUG_ASSERT(fd() >= 0 && !into.empty());
    if (handshaking_ || !tls_) return io_result::would_block();
    if (++reads_this_turn_ > max_tls_reads_per_turn) return yield();
    const crypto::tls_io r = tls_.read(into);
    switch (r.status) {
    case crypto::tls_status::ok:
        return io_result::ok(r.bytes);
    case crypto::tls_status::want_read:
    case crypto::tls_status::want_write:
        reads_this_turn_ = 0;
        want(r.status);
        return io_result::would_block();
    case crypto::tls_status::closed:
        readable_ = false;
        return io_result::eof();
    case crypto::tls_status::error:
        break;
    }
    readable_ = false;
    return io_result::failed();
}

io_result tls_client_socket::written(crypto::tls_io r) { return tls_written(r, unflushed_); }

io_result tls_client_socket::write(std::span<const iovec> pieces) {
    if (handshaking_) return io_result::would_block();   // nothing is written before the handshake
    if (!tls_) return io_result::failed();
    return written(tls_.write(pieces));
}

io_result tls_client_socket::write_file(int, std::uint64_t, std::size_t) { return io_result::failed(); }

io_result tls_client_socket::flush() {
    if (!tls_) return io_result::failed();
    return tls_flushed(tls_.flush(), unflushed_);
}

void tls_client_socket::shutdown_write() {
    if (tls_ && !handshaking_) {
        const crypto::tls_status st = tls_.shutdown();   // close_notify, best effort
        (void)st;
    }
    client_socket::shutdown_write();
}

void tls_client_socket::close() {
    tls_ = crypto::tls_connection();   // before the descriptor it works on is closed
    handshaking_ = unflushed_ = read_needs_writable_ = false;
    client_socket::close();
}

}  // namespace percore::net
