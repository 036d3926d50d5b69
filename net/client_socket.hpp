// client_socket: the real client_transport — a non-blocking TCP connect to a receiver's address,
// watched by the shard's own epoll set (runtime::poller) like an accepted socket_transport.
//
// Contract
// - On the loop's thread only. open() makes a socket (IPv4 or IPv6 after the address), sets
//   TCP_NODELAY (a request is one write and its answer is awaited: Nagle could only delay it) and
//   connect()s without blocking; the connect's end is the socket's first EPOLLOUT (or EPOLLERR)
//   edge, whose SO_ERROR says open or connect_failed (open_error(): the errno). A failure before
//   the socket is watched (EMFILE, ENETUNREACH at once) is reported the same way, through a posted
//   on_ready(). Readiness reaches on_ready() inside a round, in the poller's fair turns.
// - Reads stop on a short read (edge-triggered, as socket_transport); writes are sendmsg() with
//   MSG_NOSIGNAL. write_file() is not used by the client and fails.
// - post_ready() posts to the loop; a posted turn for a connection closed (or a socket destroyed)
//   meanwhile is dropped. close() closes the descriptor (which leaves the epoll set); the socket
//   may be open()ed again for the next connection to the same address.
// - Plain TCP here. A subclass layers a protocol over the connected socket (net/tls_client_socket.hpp:
//   HTTPS receivers, SPEC §9): connected() runs once per open(), when the TCP connect succeeded
//   (plain: the state becomes open; a subclass may stay connecting, e.g. for a handshake, and set
//   state_ itself), and readiness() gets every later edge (plain: readable on input, then on_ready()).
#pragma once

#include <cstdint>
#include <memory>

#include "net/client_connection.hpp"
#include "net/resolve.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

namespace percore::net {

class client_socket : public client_transport, public runtime::poll_watcher {
public:
    client_socket(runtime::loop& loop, runtime::poller& poller, const socket_address& peer);
    ~client_socket() override;

    void open() override;
    open_state open_progress() override { return state_; }
    int open_error() const override { return error_; }
    bool is_open() const override { return open_; }
    void post_ready() override;

    bool readable() const override { return readable_; }
    io_result read(std::span<char> into) override;
    io_result write(std::span<const iovec> pieces) override;
    io_result write_file(int fd, std::uint64_t offset, std::size_t bytes) override;
    void shutdown_write() override;
    void close() override;

    void on_events(std::uint32_t events) override;

protected:
    int fd() const { return fd_; }
    void ready();
    // The TCP connect succeeded (once per open()). Plain: open.
    virtual void connected() { state_ = open_state::open; }
    // Every edge after the connect's end (and the one that ended it). Plain: readable on input.
    virtual void readiness(std::uint32_t events);

    open_state state_ = open_state::connecting;
    bool readable_ = false;

private:
    void failed_now(int error);
    void connect_ended();

    runtime::loop& loop_;
    runtime::poller& poller_;
    socket_address peer_;
    int fd_ = -1;
    int error_ = 0;
    bool open_ = false;
    bool tcp_connected_ = false;                           // connected() ran for this open()
    std::uint32_t generation_ = 0;                         // one per open(): stale posted turns
    std::shared_ptr<client_socket*> alive_;                // posted turns hold it weakly
};

}  // namespace percore::net
