// resolver: a receiver's host name to an address for a shard's loop, without blocking the loop
// (SPEC §9: deliveries connect to receivers named by their URL's host).
//
// One thread per process calls getaddrinfo() (AF_UNSPEC, SOCK_STREAM, AI_ADDRCONFIG), which
// blocks for as long as DNS takes; loops hand it names through a bounded queue (a mutex and a
// condition variable: resolutions are rare, a few per receiver connection) and get the answer
// back as a handler posted to their own loop.
//
// Contract
// - resolve(loop, host, port, done): call on `loop`'s thread (inside a round or not). `done`
//   runs later, on `loop`'s thread inside a round (loop::post), never from within resolve(); it
//   gets the first address in getaddrinfo()'s order (RFC 6724, which /etc/gai.conf tunes; with
//   AI_ADDRCONFIG only families this host has addresses of), or an error text. It runs at most
//   once, and not at all if the handle is cancelled (or destroyed) first, or the resolver was
//   stopped before the answer came.
// - Answered at once, without the thread (still through loop::post): numeric hosts
//   (resolve_numeric: "192.0.2.7", "[2001:db8::1]"); a host empty, with a NUL or longer than
//   max_host_bytes ("invalid host name"); a full queue: max_pending_resolutions names accepted and
//   not answered yet ("resolver busy"); a stopped resolver ("resolver stopped").
// - The thread starts on the first name (a server with no named receivers starts none), with
//   the process's CPU set rather than the pinned shard thread's it was started from, named
//   "percore-dns". A slow DNS server delays that name's answer and the names queued behind it,
//   never a loop.
// - Threads: loop::post() is thread-safe (Asio's io_context::post takes the scheduler's lock and
//   interrupts a reactor blocked in epoll_wait, which is how a sleeping loop sleeps: loop.cpp's
//   io_.run_one()), so the resolver thread posts directly and needs no wake(). It posts while
//   holding the resolver's mutex, and cancel() takes that mutex: once cancel() has returned the
//   thread never touches the request's loop again. The callback is touched on the loop's thread
//   only: moved out there to run, or dropped there by cancel() (a queued request always has its
//   handle: destroying the handle takes it out of the queue, so stop() dropping the queue drops
//   no callback).
// - Ownership: the handle and the queue share each request; the handle and the thread share the
//   resolver's state, so a handle may outlive its resolver. REQUIRES: a handle whose answer is
//   still to come is cancelled (or destroyed) before its loop is destroyed, on the loop's thread.
// - stop() (the destructor's; shared()'s runs at process exit): drops the queue, then joins the
//   thread, waiting at most resolver_stop_grace for a lookup in flight; past it the thread is
//   detached (it holds its own reference to the state, posts nothing after stop, and ends with
//   the process or when its lookup returns). Any thread may call stop(), once or more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <string>

#include "net/resolve.hpp"

namespace percore::runtime {
class loop;
}

namespace percore::net {

using resolve_result = std::expected<socket_address, std::string>;
using resolve_callback = std::function<void(resolve_result)>;

namespace detail {
struct resolve_request;
struct resolver_state;
}  // namespace detail

// One resolution's claim on its answer. Move-only; on the requesting loop's thread only.
class resolve_handle {
public:
    resolve_handle() = default;
    ~resolve_handle() { cancel(); }
    resolve_handle(resolve_handle&& other) noexcept = default;
    resolve_handle& operator=(resolve_handle&& other) noexcept;
    resolve_handle(const resolve_handle&) = delete;
    resolve_handle& operator=(const resolve_handle&) = delete;

    // The callback will not run (if it has not); a queued name leaves the queue. Idempotent.
    void cancel();
    // True from resolve() until the callback has run or the handle was cancelled.
    bool pending() const;

private:
    friend class resolver;
    resolve_handle(std::shared_ptr<detail::resolver_state> state, std::shared_ptr<detail::resolve_request> request)
        : state_(std::move(state)), request_(std::move(request)) {}

    std::shared_ptr<detail::resolver_state> state_;
    std::shared_ptr<detail::resolve_request> request_;
};

// The blocking lookup the resolver thread runs for a name (tests replace it).
using lookup_function = std::function<resolve_result(const std::string& host, std::uint16_t port)>;

struct resolver_options {
    std::size_t max_pending = 0;  // 0: max_pending_resolutions
    lookup_function lookup;       // empty: lookup_address
};

class resolver {
public:
    // The process's one, started on first use, stopped by its static destructor at exit.
    static resolver& shared();

    explicit resolver(resolver_options options = {});
    ~resolver();
    resolver(const resolver&) = delete;
    resolver& operator=(const resolver&) = delete;

    // REQUIRES: `done` is callable; on `loop`'s thread (checked where the thread is a shard's).
    [[nodiscard]] resolve_handle resolve(runtime::loop& loop, std::string host, std::uint16_t port, resolve_callback done);
    void stop();

    // Any thread: whether the thread was ever started; names accepted and not answered yet.
    bool thread_started() const;
    std::size_t pending() const;

private:
    std::shared_ptr<detail::resolver_state> state_;
};

// getaddrinfo(host, port) with AF_UNSPEC, SOCK_STREAM, AI_ADDRCONFIG: its first address, or
// "cannot resolve HOST: REASON". Blocks for as long as DNS takes: never on a loop's thread.
resolve_result lookup_address(const std::string& host, std::uint16_t port);

}  // namespace percore::net
