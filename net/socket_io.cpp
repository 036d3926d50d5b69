#include "net/socket_io.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace percore::net {

io_result recv_some(int fd, std::span<char> into, bool& drained) {
    for (;;) {
        const ssize_t n = ::recv(fd, into.data(), into.size(), 0);
        if (n > 0) {
            drained = static_cast<std::size_t>(n) < into.size();
            return io_result::ok(static_cast<std::size_t>(n));
        }
        if (n < 0 && errno == EINTR) continue;
        drained = true;
        if (n == 0) return io_result::eof();
        if (errno == EAGAIN || errno == EWOULDBLOCK) return io_result::would_block();
        return io_result::failed();
    }
}

io_result send_some(int fd, std::span<const iovec> pieces) {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(pieces.data());
    msg.msg_iovlen = pieces.size();
    for (;;) {
        const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n > 0) return io_result::ok(static_cast<std::size_t>(n));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return io_result::would_block();
        return io_result::failed();
    }
}

}  // namespace percore::net
