// listener: one shard's listening socket (HTTP or HTTPS) — accepting one connection a turn,
// keeping a descriptor in reserve, and refusing what cannot be served.
//
// Contract
// - Bound on the main thread before the shard runs (listen() throws std::system_error), then
//   used on the shard's thread only, inside rounds.
// - Every shard binds its own socket to the same address (SO_REUSEPORT): the kernel spreads the
//   connections over the shards.
// - The listening socket is in the shard's epoll set level-triggered (runtime::poller): each turn
//   accepts one connection (nginx's default), and the socket is reported again in the next round
//   while its backlog holds more. Draining the backlog to EAGAIN instead (edge-triggered) cost a
//   failed accept4 for every connection when clients connect one at a time (docs/perf).
// - Accepted sockets become transports (plain or TLS) kept for reuse, handed to the pool.
// - Past max_connections (or while stopping) an HTTP client gets a 503 and a shut write side; an
//   HTTPS client is closed (a plaintext answer would be garbage to it, and a handshake is what an
//   overloaded server should not spend on).
// - Out of file descriptors (EMFILE), a connection can be neither served nor refused; so one
//   descriptor is kept in reserve, given up to accept and refuse such a connection (503), and
//   taken back. When even that fails, the listener is stalled: the socket stops being reported
//   (the shard would spin on a backlog it cannot take) and retry_if_stalled() (every tick)
//   resumes it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <boost/asio/ip/tcp.hpp>   // the endpoint type only: the socket is a plain descriptor

#include "net/connection_pool.hpp"
#include "net/socket_transport.hpp"
#include "shards/runtime/loop.hpp"

namespace percore::crypto {
class tls_server;
}

namespace percore::net {

class listener final : public transport_recycler, public runtime::poll_watcher {
public:
    // With `tls`, connections speak HTTPS (the server is shared by every shard and outlives this).
    listener(runtime::loop& loop, runtime::poller& poller, connection_pool& pool, crypto::tls_server* tls = nullptr);
    ~listener();
    listener(const listener&) = delete;
    listener& operator=(const listener&) = delete;

    void listen(const boost::asio::ip::tcp::endpoint& endpoint);
    std::uint16_t local_port() const;
    bool is_listening() const { return fd_ >= 0; }

    // Starts accepting. REQUIRES: listening; on the shard's thread.
    void start();
    void retry_if_stalled();
    void close();

    void recycle(socket_transport& t) override;
    void on_events(std::uint32_t events) override;

private:
    void accept_one();
    void stall();
    int accept_fd();   // -errno when none
    bool serve(int fd);
    bool refuse_past_descriptor_limit();
    void refuse(int fd);
    socket_transport& free_transport();

    runtime::loop& loop_;
    connection_pool& pool_;
    crypto::tls_server* tls_;
    int fd_ = -1;                                           // the listening socket
    std::vector<std::unique_ptr<socket_transport>> transports_;
    std::vector<socket_transport*> free_;
    runtime::poller& poller_;                               // watches the connection sockets
    std::unique_ptr<char[]> tls_scratch_;                   // file bytes on their way into TLS records
    int reserve_fd_ = -1;
    bool stalled_ = false;   // out of descriptors or memory: not reported until the tick retries
};

}  // namespace percore::net
