// tls_results: what a TLS write or flush (crypto/tls.hpp) means as a transport's io_result — one
// reading for the server's connections (socket_transport.hpp) and the client's (tls_client_socket.hpp).
//
// - write: ok takes every byte given (ok with none taken is a failure); want_write/want_read may
//   have taken some (ok with them) or none (would_block), and leave bytes buffered in the library:
//   `unflushed` until a flush empties it; anything else fails.
// - flush: ok empties the buffer; want_* waits for the next edge; anything else fails.
// Any thread that owns the connection; no state beyond `unflushed`.
#pragma once

#include "crypto/tls.hpp"
#include "net/transport.hpp"

namespace percore::net {

inline io_result tls_written(crypto::tls_io r, bool& unflushed) {
    if (r.status == crypto::tls_status::ok) {
        unflushed = false;
        return r.bytes ? io_result::ok(r.bytes) : io_result::failed();
    }
    if (r.status == crypto::tls_status::want_write || r.status == crypto::tls_status::want_read) {
        unflushed = true;  // the next edge (either way) brings the next flush
        return r.bytes ? io_result::ok(r.bytes) : io_result::would_block();
    }
    return io_result::failed();
}

inline io_result tls_flushed(crypto::tls_status st, bool& unflushed) {
    if (st == crypto::tls_status::ok) {
        unflushed = false;
        return io_result::ok(0);
    }
    if (st == crypto::tls_status::want_write || st == crypto::tls_status::want_read) return io_result::would_block();
    return io_result::failed();
}

}  // namespace percore::net
