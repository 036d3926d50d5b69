// tls: HTTPS for the server's connection loop, as owning C++ handles over the crypto module's table
// (crypto/module_abi.h holds the policy: TLS 1.2/1.3, ALPN http/1.1, shared rotating ticket keys).
//
// Contract
// - What: owning handles over the module's percore_tls_server and percore_tls_conn. Who owns what:
//   a tls_server owns its module server, a tls_connection its module connection (both move-only);
//   the caller owns the socket; the module (crypto_api) outlives them all (it is never unloaded).
// - Errors: create(), reload(), accept() and make_tls_server() answer a result (crypto/result.hpp):
//   errc::unusable_file (certificate or key), errc::out_of_memory, or the loader's errors; the
//   message names the file. Connection operations answer a tls_status instead (below): that is
//   flow control, not failure.
// - tls_server: the certificate, key and policy of one --tls-listen; made once (make_tls_server()
//   loads the module on first use: its error is the line to print before exiting 1), shared by
//   every shard thread. reload() (SIGHUP) swaps certificate and key for connections made after it;
//   connections made before keep theirs; on an error nothing changes. accept() and reload() may be
//   called from any threads at once. Every tls_connection must be gone before its tls_server.
// - tls_connection: one accepted socket (non-blocking, owned by the caller, closed after the
//   connection object is destroyed). One thread at a time: the shard that owns the socket.
//   Every operation answers a tls_status (module_abi.h): ok, want_read / want_write (wait for that
//   readiness and call the same operation again), closed (the peer closed), error (last_error()
//   says why; destroy it and close the socket).
// - Reading: read() returns at most one record (16 KiB) per call, so a short read does not mean the
//   socket is drained. With epoll's edge triggering, read until want_read; pending() != 0 means
//   OpenSSL still holds bytes that a read returns without the socket.
// - Writing: write() takes bytes over (tls_io::bytes); taken bytes will be sent whatever the status.
//   After want_write the caller keeps the untaken rest and calls write() again when writable (with
//   the rest, or flush() when nothing is left) until ok. Gathered pieces (iovec, as output_buffer
//   builds them for sendmsg) are packed into records of up to 16 KiB. No SIGPIPE.
// - shutdown(): flushes, then sends close_notify (ok when sent; the peer's is not awaited).
//
// REQUIRES (checked with PERCORE_REQUIRES: a breach aborts naming the line, in release builds too):
// - every tls_connection operation: the connection holds a handle (operator bool): not
//   default-constructed, not moved from;
// - every tls_server operation: the server was not moved from;
// - accept(fd): fd >= 0.
// Paths are operator input, not preconditions: an empty or bad one is an errc::unusable_file error.
//
// Wiring sketch (one shard, Asio reactor style: async_wait for readiness, then call again):
//     auto server = make_tls_server(cert, key);        // at start: on error print it, exit 1
//     tls_connection tls = *server->accept(socket.native_handle());  // after accept, non-blocking
//     switch (tls.handshake()) { want_read: async_wait(wait_read) ... ok: start reading }
//     tls_io in = tls.read(buffer);                    // ok: parse in.bytes; want_read: wait; ...
//     tls_io out = tls.write(std::span<const iovec>(pieces));  // drop out.bytes from the output
//                                                      // buffer; want_write: wait, write the rest
//     SIGHUP thread: server->reload(cert, key)         // log the error; the old pair stays
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "crypto/loader.hpp"
#include "crypto/module_handle.hpp"
#include "crypto/result.hpp"

namespace percore::crypto {

enum class tls_status : std::uint8_t {
    ok = PERCORE_TLS_OK,
    want_read = PERCORE_TLS_WANT_READ,
    want_write = PERCORE_TLS_WANT_WRITE,
    closed = PERCORE_TLS_CLOSED,
    error = PERCORE_TLS_ERROR,
};

std::string_view to_string(tls_status status);

struct tls_io {
    tls_status status = tls_status::ok;
    std::size_t bytes = 0;  // read: bytes read; write: bytes taken
};

struct tls_info {
    bool handshake_done = false;
    bool resumed = false;
    std::string_view protocol;  // "TLSv1.3", "TLSv1.2"
    std::string_view cipher;
    std::string alpn;           // "http/1.1" or empty
    bool has_peer_certificate = false;
    std::array<std::uint8_t, 32> peer_certificate_sha256{};
};

class tls_connection : public module_handle<percore_tls_conn, &crypto_api::tls_conn_free> {
public:
    tls_connection() = default;
    // Takes ownership of `conn` (made by the module: a server side, or a test client).
    tls_connection(const crypto_api& api, percore_tls_conn* conn) : module_handle(api, conn) {}

    [[nodiscard]] tls_status handshake();
    [[nodiscard]] tls_io read(std::span<char> into);
    [[nodiscard]] tls_io write(std::span<const char> bytes);
    [[nodiscard]] tls_io write(std::span<const iovec> pieces);
    [[nodiscard]] tls_status flush();  // sends what earlier writes took
    tls_status shutdown();  // best effort: callers that close anyway may ignore the status
    std::size_t pending() const;
    std::string_view last_error() const;
    tls_info info() const;

    const crypto_api* api() const { return api_; }
};

class tls_server : public module_handle<percore_tls_server, &crypto_api::tls_server_free> {
public:
    static result<tls_server> create(const crypto_api& api, const std::string& cert_path,
                                     const std::string& key_path);

    // Any thread, concurrently with accept() on others; on an error nothing changes.
    result<void> reload(const std::string& cert_path, const std::string& key_path);
    // The server side of a TLS connection over `fd`; an error (errc::out_of_memory) only when out of
    // memory. Any thread.
    result<tls_connection> accept(int fd);

    const crypto_api& api() const { return *api_; }

private:
    tls_server(const crypto_api& api, percore_tls_server* server) : module_handle(api, server) {}
};

// load_crypto_module() and tls_server::create() in one step: the error is one line for the operator.
result<tls_server> make_tls_server(const std::string& cert_path, const std::string& key_path);

}  // namespace percore::crypto
