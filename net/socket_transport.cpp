#include "net/socket_transport.hpp"
#include "net/tls_results.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "net/connection_stats.hpp"
#include "net/limits.hpp"
#include "shards/runtime/check.hpp"

namespace percore::net {

socket_transport::socket_transport(runtime::loop& loop, runtime::poller& poller, transport_recycler& owner,
                                   connection_stats& stats)
    : loop_(loop), poller_(poller), owner_(owner), stats_(stats) {}

socket_transport::~socket_transport() {
    if (fd_ >= 0) ::close(fd_);
}

bool socket_transport::opened(int fd) {
    PERCORE_REQUIRES(fd_ < 0 && fd >= 0);
    ++generation_;
    fd_ = fd;
    readable_ = false;
    low_latency_ = false;
    if (!poller_.watch(fd, *this)) {
        ::close(fd);
        fd_ = -1;
        return false;
    }
    return true;   // a request already there is reported by the first epoll_wait
}

void socket_transport::on_events(std::uint32_t events) {
    if (fd_ < 0) return;   // closed earlier in this batch of events
    readiness(events);
}

void socket_transport::readiness(std::uint32_t events) {
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) readable_ = true;
    ready();
}

void socket_transport::ready() {
    if (events_) events_->on_ready();
}

io_result socket_transport::read(std::span<char> into) {
    PERCORE_DEBUG_ASSERT(fd_ >= 0 && !into.empty());
    for (;;) {
        ssize_t n = ::recv(fd(), into.data(), into.size(), 0);
        if (n > 0) {
            bump(stats_.bytes_in, static_cast<std::uint64_t>(n));
            if (static_cast<std::size_t>(n) < into.size()) readable_ = false;   // drained: the next bytes bring an edge
            return io_result::ok(static_cast<std::size_t>(n));
        }
        if (n == 0) {
            readable_ = false;
            return io_result::eof();
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            readable_ = false;
            return io_result::would_block();
        }
        return io_result::failed();
    }
}

// One piece (every small answer: its body is copied behind its head) goes with send(), which
// skips sendmsg's copy-in of the msghdr and the iovec import (docs/perf/README.md, "one set").
io_result socket_transport::send_pieces(std::span<const iovec> pieces, int flags) {
    PERCORE_DEBUG_ASSERT(fd_ >= 0 && !pieces.empty());
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(pieces.data());
    msg.msg_iovlen = pieces.size();
    flags |= MSG_NOSIGNAL;
    for (;;) {
        ssize_t n = pieces.size() == 1 ? ::send(fd(), pieces[0].iov_base, pieces[0].iov_len, flags)
                                       : ::sendmsg(fd(), &msg, flags);
        if (n > 0) {
            bump(stats_.bytes_out, static_cast<std::uint64_t>(n));
            return io_result::ok(static_cast<std::size_t>(n));
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return io_result::would_block();   // EPOLLOUT edge follows
        return io_result::failed();
    }
}

io_result socket_transport::write_file(int file, std::uint64_t offset, std::size_t bytes) {
    for (;;) {
        auto off = static_cast<off_t>(offset);
        ssize_t n = ::sendfile(fd(), file, &off, std::min(bytes, max_sendfile_bytes));
        if (n > 0) {
            bump(stats_.bytes_out, static_cast<std::uint64_t>(n));
            return io_result::ok(static_cast<std::size_t>(n));
        }
        if (n == 0) return io_result::failed();  // the file is shorter than promised
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return io_result::would_block();
        return io_result::failed();
    }
}

void socket_transport::shutdown_write() { ::shutdown(fd(), SHUT_WR); }

// Set once per connection, before its first write, and only for connections that stay open:
// Nagle can only hold back a later small answer, and a connection closed after one answer is
// flushed by the close, so one-request connections save the setsockopt.
void socket_transport::set_low_latency() {
    if (low_latency_) return;
    low_latency_ = true;
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void socket_transport::close() {
    PERCORE_REQUIRES(fd_ >= 0);
    closing();
    readable_ = false;
    ++generation_;   // a posted turn still queued for this connection is ignored
    ::close(fd_);    // also leaves the epoll set
    fd_ = -1;
    events_ = nullptr;
    owner_.recycle(*this);
}

// ---------------------------------------------------------------------------------------------

tls_socket_transport::tls_socket_transport(runtime::loop& loop, runtime::poller& poller, transport_recycler& owner,
                                           connection_stats& stats, crypto::tls_server& server, char* file_scratch)
    : socket_transport(loop, poller, owner, stats), server_(server), file_scratch_(file_scratch) {}

bool tls_socket_transport::begin_tls() {
    PERCORE_REQUIRES(fd_ >= 0);
    auto t = server_.accept(fd());
    if (!t) return false;
    tls_ = std::move(*t);
    handshaking_ = true;
    unflushed_ = failed_ = read_needs_writable_ = peeked_ = false;
    reads_this_turn_ = 0;
    readable_ = true;   // the handshake starts by reading
    return true;
}

// The library waits for the socket: to read (no record yet) or to write (a handshake flight):
// reading makes no progress before that readiness.
void tls_socket_transport::want(crypto::tls_status st) {
    readable_ = false;
    read_needs_writable_ = st == crypto::tls_status::want_write;
}

void tls_socket_transport::readiness(std::uint32_t events) {
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) readable_ = true;
    if (read_needs_writable_ && (events & EPOLLOUT)) {
        read_needs_writable_ = false;
        readable_ = true;
    }
    ready();
}

bool tls_socket_transport::handshake() {
    crypto::tls_status st = tls_.handshake();
    if (st == crypto::tls_status::ok) {
        handshaking_ = false;
        return true;
    }
    if (st == crypto::tls_status::want_read || st == crypto::tls_status::want_write) {
        want(st);
        return false;
    }
    bump(stats_.tls_handshake_failures);
    failed_ = true;   // plaintext, garbage or a refused protocol: nothing to answer in TLS
    return false;
}

// A TLS connection begins with a handshake record (first byte 0x16); a request line begins with
// a method's capital letter. A plaintext request gets a plaintext 400 saying so (SPEC §4, as
// nginx does), then the connection closes. The request's bytes are read first, so that the close
// is a FIN the client reads after the answer, not a reset that destroys it.
tls_socket_transport::first_byte tls_socket_transport::answered_plaintext() {
    char first;
    ssize_t n = ::recv(fd(), &first, 1, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return first_byte::not_yet;
    if (n != 1 || first < 'A' || first > 'Z') return first_byte::tls;
    char drain[4096];
    while (::recv(fd(), drain, sizeof drain, MSG_DONTWAIT) > 0) {
    }
    static constexpr std::string_view answer =
        "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: application/json\r\n"
        "Content-Length: 55\r\n\r\n{\"error\":\"a plain HTTP request sent to the HTTPS port\"}";
    static_assert(answer.size() - answer.find("\r\n\r\n") - 4 == 55);
    ssize_t w = ::send(fd(), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    ::shutdown(fd(), SHUT_WR);
    bump(stats_.tls_handshake_failures);
    return first_byte::plaintext;
}

io_result tls_socket_transport::read(std::span<char> into) {
    if (handshaking_ && !peeked_) {
        switch (answered_plaintext()) {
        case first_byte::not_yet:
            readable_ = false;   // the next edge brings the first byte
            return io_result::would_block();
        case first_byte::plaintext:
            return io_result::failed();
        case first_byte::tls:
            peeked_ = true;
            break;
        }
    }
    if (handshaking_ && !handshake()) return failed_ ? io_result::failed() : io_result::would_block();
    if (++reads_this_turn_ > max_tls_reads_per_turn) {
        // yield: other connections get their turn; a posted on_ready brings this one back
        reads_this_turn_ = 0;
        readable_ = false;
        loop_.post([this, g = generation_] {
            if (g != generation_ || fd_ < 0) return;
            readable_ = true;
            ready();
        });
        return io_result::would_block();
    }
    crypto::tls_io r = tls_.read(into);
    switch (r.status) {
    case crypto::tls_status::ok:
        bump(stats_.bytes_in, r.bytes);
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
    return io_result::failed();
}

io_result tls_socket_transport::written(crypto::tls_io r) {
    if (r.bytes > 0) bump(stats_.bytes_out, r.bytes);
    return tls_written(r, unflushed_);
}

io_result tls_socket_transport::write(std::span<const iovec> pieces) {
    if (handshaking_) return io_result::would_block();   // nothing is written before the handshake
    return written(tls_.write(pieces));
}

// File bytes are read (pread) into the listener's scratch buffer first: no kTLS here.
io_result tls_socket_transport::write_file(int file, std::uint64_t offset, std::size_t bytes) {
    if (handshaking_) return io_result::would_block();
    std::size_t want_bytes = std::min(bytes, tls_file_chunk_bytes);
    ssize_t got = ::pread(file, file_scratch_, want_bytes, static_cast<off_t>(offset));
    if (got <= 0) return io_result::failed();   // the file is shorter than promised
    return written(tls_.write(std::span<const char>(file_scratch_, static_cast<std::size_t>(got))));
}

io_result tls_socket_transport::flush() { return tls_flushed(tls_.flush(), unflushed_); }

void tls_socket_transport::shutdown_write() {
    if (!handshaking_) {
        crypto::tls_status st = tls_.shutdown();   // close_notify, best effort: the answer was sent
        (void)st;
    }
    socket_transport::shutdown_write();
}

void tls_socket_transport::end_stream() {
    if (handshaking_) return;
    crypto::tls_status st = tls_.shutdown();   // close_notify after the last answer
    (void)st;
}

void tls_socket_transport::closing() {
    tls_ = crypto::tls_connection();
    handshaking_ = unflushed_ = false;
}

}  // namespace percore::net
