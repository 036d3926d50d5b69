// socket_transport: a transport over an accepted TCP socket (plain), and tls_socket_transport,
// the same socket through the crypto module's TLS.
//
// Contract
// - Owned by a listener (net/listener.hpp) that reuses it for connection after connection; on
//   the shard's thread only. The socket is a plain descriptor (accept4, non-blocking) watched by
//   the shard's own epoll set (runtime::poller): added once, edge-triggered, removed by close().
//   Readiness reaches on_ready() inside a round, in the fair order of the connections' turn
//   classes (turn_class(): the connection's).
// - Reads use recv() and stop on a short read; writes use send() (one piece), sendmsg() (more)
//   and sendfile(). No speculative read: after a short read the next recv() waits for the next
//   edge (one failed recv per request saved, docs/perf).
// - TLS: the handshake runs inside read() (and write()); after max_tls_reads_per_turn records in
//   one turn the transport yields (a posted on_ready), so one busy client cannot hold the shard.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>

#include "crypto/tls.hpp"
#include "net/transport.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

namespace percore::net {

struct connection_stats;
class socket_transport;

// Gets a transport back when its connection closed.
class transport_recycler {
public:
    virtual void recycle(socket_transport& t) = 0;

protected:
    ~transport_recycler() = default;
};

class socket_transport : public transport, public runtime::poll_watcher {
public:
    socket_transport(runtime::loop& loop, runtime::poller& poller, transport_recycler& owner, connection_stats& stats);
    ~socket_transport() override;

    // A new connection on the accepted, non-blocking descriptor `fd` (owned from now on); false
    // when it cannot be watched (the descriptor is closed then).
    [[nodiscard]] bool opened(int fd);
    bool is_open() const { return fd_ >= 0; }
    void on_events(std::uint32_t events) override;
    // Its connection's class (that of the connection's last admitted request); 0 between connections.
    std::uint32_t turn_class() const override { return events_ ? events_->turn_class() : 0; }

    bool readable() const override { return readable_; }
    io_result read(std::span<char> into) override;
    io_result write(std::span<const iovec> pieces) override { return send_pieces(pieces, 0); }
    io_result write_more(std::span<const iovec> pieces) override { return send_pieces(pieces, MSG_MORE); }
    io_result write_file(int fd, std::uint64_t offset, std::size_t bytes) override;
    void shutdown_write() override;
    void set_low_latency() override;
    void close() override;

protected:
    int fd() const { return fd_; }
    io_result send_pieces(std::span<const iovec> pieces, int flags);
    void ready();
    virtual void readiness(std::uint32_t events);
    virtual void closing() {}

    runtime::loop& loop_;
    runtime::poller& poller_;
    transport_recycler& owner_;
    connection_stats& stats_;
    int fd_ = -1;
    std::uint32_t generation_ = 0;
    bool readable_ = false;
    bool low_latency_ = false;
};

class tls_socket_transport final : public socket_transport {
public:
    tls_socket_transport(runtime::loop& loop, runtime::poller& poller, transport_recycler& owner,
                         connection_stats& stats, crypto::tls_server& server, char* file_scratch);
    // REQUIRES: opened(); false when OpenSSL had no memory for the session (then close()).
    [[nodiscard]] bool begin_tls();

    io_result read(std::span<char> into) override;
    io_result write(std::span<const iovec> pieces) override;
    // Records, never the plain socket's send (the base class's MSG_MORE write).
    io_result write_more(std::span<const iovec> pieces) override { return write(pieces); }
    io_result write_file(int fd, std::uint64_t offset, std::size_t bytes) override;
    bool pending_output() const override { return unflushed_; }
    io_result flush() override;
    void shutdown_write() override;
    void end_stream() override;

private:
    void readiness(std::uint32_t events) override;
    void closing() override;
    [[nodiscard]] bool handshake();              // false: not done yet (or failed: failed_)
    io_result written(crypto::tls_io r);
    void want(crypto::tls_status st);
    enum class first_byte : std::uint8_t { not_yet, tls, plaintext };
    [[nodiscard]] first_byte answered_plaintext();

    crypto::tls_server& server_;
    char* file_scratch_;                          // tls_file_chunk_bytes, shared by the listener
    crypto::tls_connection tls_;
    bool handshaking_ = false;
    bool peeked_ = false;                 // the first byte was looked at (TLS or plaintext?)
    bool unflushed_ = false;
    bool failed_ = false;
    bool read_needs_writable_ = false;   // the library waits for the socket to be writable to read
    int reads_this_turn_ = 0;
};

}  // namespace percore::net
