// transport: one connection's byte stream as the connection state machine sees it — plain TCP,
// TLS over TCP, or a test's fake (tests/net/fake_transport.hpp).
//
// Readiness is edge-triggered, as the seeds' loop and the kernel's EPOLLET are: the connection
// reads while readable() and it wants input; a read that comes back short (plain: fewer bytes than
// asked; TLS: the library wants the socket) or would block makes the transport not readable, and
// the transport itself then waits for the socket. When it can make progress again — readable, or
// writable after a write would block — it calls its events' on_ready(), later, inside a loop
// round, never from within read()/write(). Readability is remembered while the connection does not
// want input (an answer pending), so no edge is lost. One on_ready() may mean readable, writable
// or both; the connection retries whatever it was blocked on, so every readiness order gives the
// same result.
//
// Contract
// - One transport serves one connection at a time, on one shard's thread.
// - read(): REQUIRES readable(). ok with bytes > 0 (readable() turns false on a short read). eof: the peer closed its sending side
//   (TLS: close_notify or a clean TCP close). failed: the connection is unusable (reset, a bad
//   record); the connection closes.
// - write()/write_file(): ok with the bytes taken (> 0); would_block when none could be taken.
//   TLS takes whole records' worth and may keep bytes it could not send yet: pending_output() is
//   then true, and flush() pushes them (ok when nothing is left).
// - close(): shuts the stream; the transport is free for reuse by its owner. REQUIRES: open.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace percore::net {

enum class io_status : std::uint8_t { ok, would_block, eof, failed };

struct [[nodiscard]] io_result {
    io_status status = io_status::failed;
    std::size_t bytes = 0;

    static io_result ok(std::size_t n) { return {io_status::ok, n}; }
    static io_result would_block() { return {io_status::would_block, 0}; }
    static io_result eof() { return {io_status::eof, 0}; }
    static io_result failed() { return {io_status::failed, 0}; }
};

class transport_events {
public:
    virtual void on_ready() = 0;
    // The class whose fair turns the transport's readiness waits in (runtime::poller; 0: default).
    virtual std::uint32_t turn_class() const { return 0; }

protected:
    ~transport_events() = default;
};

class transport {
public:
    virtual ~transport() = default;

    // Who on_ready() goes to; set when a connection takes the transport.
    void bind_events(transport_events* events) { events_ = events; }

    virtual bool readable() const = 0;
    virtual io_result read(std::span<char> into) = 0;
    virtual io_result write(std::span<const iovec> pieces) = 0;
    // write(), when more follows at once — a file's bytes, or the FIN of a close or shutdown: the
    // transport may hold back a last partial segment to send it with them (plain: MSG_MORE, as
    // nginx's TCP_CORK does; one packet fewer a closed connection). Default: write().
    virtual io_result write_more(std::span<const iovec> pieces) { return write(pieces); }
    // `bytes` of file `fd` from `offset` (plain: sendfile; TLS: read into records).
    virtual io_result write_file(int fd, std::uint64_t offset, std::size_t bytes) = 0;
    virtual bool pending_output() const { return false; }
    virtual io_result flush() { return io_result::ok(0); }

    // No more bytes will be sent (TLS: close_notify first); reading goes on.
    virtual void shutdown_write() = 0;
    // The last answer has been sent and the connection closes at once (TLS: close_notify; plain:
    // nothing, the close sends FIN).
    virtual void end_stream() {}
    // Small answers on a connection that stays open must not wait for Nagle.
    virtual void set_low_latency() {}
    virtual void close() = 0;

protected:
    transport_events* events_ = nullptr;
};

}  // namespace percore::net
