// tls_client_socket: the client_transport for HTTPS receivers (SPEC §9 deliveries): a client_socket
// (its non-blocking TCP connect on the shard's poller) with a TLS session over the connected socket.
//
// Contract
// - What: after the TCP connect, a crypto::tls_connection for the descriptor from the tls_client,
//   for `host` (the certificate chain verified against the client's CAs, its name against host;
//   host is sent as SNI when it is a DNS name). The handshake runs inside the connecting phase:
//   open_progress() stays connecting while it wants the socket, is open when it is done, and
//   tls_failed when it failed (or the session could not be made: out of memory); tls_error() then
//   says why (crypto/tls_client.hpp: "certificate verify failed: hostname mismatch (wanted …)").
//   A failed TCP connect is connect_failed as for client_socket.
// - Records as tls_socket_transport (net/socket_transport.cpp): read() returns at most one record;
//   want_read/want_write make the socket not readable until the edge it waits for;
//   max_tls_reads_per_turn records in one turn, then the socket yields (readable() stays true and a
//   posted on_ready() brings the connection back). write() takes whole records' worth; bytes taken
//   but not yet sent make pending_output() true until flush() answers ok. write_file() fails.
//   shutdown_write() sends close_notify (best effort) before the TCP shutdown.
// - Who owns what: the socket owns its descriptor and its tls_connection (destroyed before the
//   descriptor is closed: at close(), the next open() or destruction). The tls_client is the
//   caller's and must outlive the socket, or is shared with the socket (the constructor taking a
//   shared_ptr: a cache may then drop its own reference while the socket lives). tls_error() is kept from the failure until the next open().
// - Thread: the loop's thread only, as client_socket.
//
// REQUIRES (PERCORE_REQUIRES): host is what tls_client::connect takes: not empty, no NUL byte, at
// most crypto::tls_client_longest_host bytes (checked at construction).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "crypto/tls.hpp"
#include "crypto/tls_client.hpp"
#include "net/client_socket.hpp"

namespace percore::net {

class tls_client_socket final : public client_socket {
public:
    tls_client_socket(runtime::loop& loop, runtime::poller& poller, const socket_address& peer,
                      const crypto::tls_client& tls, std::string host);
    // The same, keeping `tls` alive as long as the socket. REQUIRES: tls is not null.
    tls_client_socket(runtime::loop& loop, runtime::poller& poller, const socket_address& peer,
                      std::shared_ptr<const crypto::tls_client> tls, std::string host);

    void open() override;
    // Why the last open() ended tls_failed; empty otherwise.
    std::string_view tls_error() const { return tls_error_; }
    std::string_view open_failure() const override { return tls_error(); }

    io_result read(std::span<char> into) override;
    io_result write(std::span<const iovec> pieces) override;
    io_result write_file(int fd, std::uint64_t offset, std::size_t bytes) override;
    bool pending_output() const override { return unflushed_; }
    io_result flush() override;
    void shutdown_write() override;
    void close() override;

private:
    void connected() override;
    void readiness(std::uint32_t events) override;
    void handshake();
    void tls_failed(std::string_view why);
    void want(crypto::tls_status st);
    io_result written(crypto::tls_io r);
    io_result yield();

    std::shared_ptr<const crypto::tls_client> shared_;  // null when the caller keeps the client alive
    const crypto::tls_client& client_;
    std::string host_;
    crypto::tls_connection tls_;
    std::string tls_error_;
    bool handshaking_ = false;
    bool unflushed_ = false;
    bool read_needs_writable_ = false;   // the library waits for the socket to be writable to read
    int reads_this_turn_ = 0;
};

}  // namespace percore::net
