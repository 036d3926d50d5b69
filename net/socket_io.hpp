// socket_io: one non-blocking recv()/sendmsg() on a connected TCP socket, as a transport reports
// it (io_result): EINTR retried, EAGAIN as would_block, a peer's FIN as eof, anything else failed.
//
// Contract
// - recv_some(): REQUIRES !into.empty(). `drained` is set when the socket has nothing more to read
//   now (a short read, EOF, would_block): edge-triggered readers wait for the next edge then.
// - send_some(): MSG_NOSIGNAL (no SIGPIPE); would_block when nothing could be taken.
// Used by client_socket; socket_transport has the same loops inline (a candidate to share these).
#pragma once

#include <sys/uio.h>

#include <span>

#include "net/transport.hpp"

namespace percore::net {

io_result recv_some(int fd, std::span<char> into, bool& drained);
io_result send_some(int fd, std::span<const iovec> pieces);

}  // namespace percore::net
