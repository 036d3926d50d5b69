// percore-ceiling: the least an HTTP/1.1 server can do per request on this kernel, as the upper
// bound the benchmarks (perf/) compare real servers with.
//
// usage: percore-ceiling [--listen HOST:PORT] [--size BYTES]    (default 127.0.0.1:0 and 64)
//
// Contract
// - Once listening it prints exactly one line, `listening on HOST:PORT` (the real port when 0 was
//   asked), to stdout and flushes it. SIGTERM or SIGINT (signalfd): every socket is closed, exit 0.
// - One thread, one epoll set, edge-triggered. The listening socket (backlog
//   listen_backlog_connections) is drained with accept4 until EAGAIN; accepted sockets get
//   TCP_NODELAY and are registered once for EPOLLIN | EPOLLOUT (no epoll_ctl per send).
// - A fixed answer, built once at start: every GET gets
//     `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: N\r\n\r\n`
//   and N bytes of 'x' (N = --size); a HEAD gets the same head without the body. The target,
//   Host and every other header are ignored. A request head ends at its first "\r\n\r\n".
// - Each connection has a fixed input buffer (input_buffer_bytes) and output buffer
//   (output_buffer_min_bytes, or one whole answer when that is larger), made with its connection
//   object; closed connections' objects are reused. Nothing is allocated per request.
// - A readable socket is read until a short read or EAGAIN. Every complete head in the bytes read
//   is answered into the output buffer and all those answers leave in one send() (further sends
//   only when they do not fit the output buffer, or the kernel takes part of them: the rest waits
//   for EPOLLOUT, and nothing more is read or answered until it is sent).
// - `Connection: close` (header name and value case-insensitive, `close` as one token of the
//   value) is answered with `Connection: close` added to the head, then the connection is closed;
//   bytes after that request are dropped.
// - Not supported: request bodies (neither Content-Length nor chunked: bytes after a head are read
//   as the next request), methods other than GET and HEAD (answered 501 with `Connection: close`,
//   then closed), HTTP/1.0 defaults (a connection stays open unless asked to close), any answer
//   but the fixed one. A head that does not fit the input buffer closes the connection unanswered.
#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <expected>
#include <memory>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <string_view>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace percore::ceiling {
namespace {

inline constexpr std::size_t input_buffer_bytes = 16 * 1024;        // also the longest head
inline constexpr std::size_t output_buffer_min_bytes = 64 * 1024;
inline constexpr std::uint64_t default_body_bytes = 64;
inline constexpr std::uint64_t max_body_bytes = 1u << 20;           // the answer is copied per request
inline constexpr int listen_backlog_connections = 4096;
inline constexpr int max_events_per_wait = 256;

// epoll data of the two non-connection descriptors; a connection's is its address.
inline constexpr std::uint64_t listener_token = 1;
inline constexpr std::uint64_t signal_token = 2;

constexpr std::string_view usage =
    "usage: percore-ceiling [--listen HOST:PORT] [--size BYTES]\n"
    "  --listen HOST:PORT  IPv4 address (or localhost) and port; default 127.0.0.1:0 (any port)\n"
    "  --size BYTES        body bytes of every answer to a GET; default 64, at most 1048576\n";

struct options {
    sockaddr_in address{};
    std::uint64_t body_bytes = default_body_bytes;
};

std::expected<options, std::string> parse_options(int argc, char** argv) {
    options o;
    o.address.sin_family = AF_INET;
    o.address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 1; i < argc; ++i) {
        std::string_view name = argv[i];
        if (name != "--listen" && name != "--size") return std::unexpected("unknown option " + std::string(name));
        if (i + 1 >= argc) return std::unexpected(std::string(name) + " needs a value");
        std::string_view value = argv[++i];
        if (name == "--size") {
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), o.body_bytes);
            if (ec != std::errc{} || end != value.data() + value.size() || o.body_bytes > max_body_bytes)
                return std::unexpected("--size takes 0.." + std::to_string(max_body_bytes) + ", not " +
                                       std::string(value));
            continue;
        }
        auto colon = value.rfind(':');
        if (colon == std::string_view::npos) return std::unexpected("--listen takes HOST:PORT");
        std::string host(value.substr(0, colon));
        std::string_view port_text = value.substr(colon + 1);
        std::uint16_t port = 0;
        auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
        if (port_text.empty() || ec != std::errc{} || end != port_text.data() + port_text.size())
            return std::unexpected("--listen: bad port " + std::string(port_text));
        if (host == "localhost") host = "127.0.0.1";
        if (::inet_pton(AF_INET, host.c_str(), &o.address.sin_addr) != 1)
            return std::unexpected("--listen: not an IPv4 address: " + host);
        o.address.sin_port = htons(port);
    }
    return o;
}

// The answers, built once. A HEAD's answer is the first head_bytes of the GET's.
struct answers {
    std::string keep_alive;
    std::string close;                  // the same with `Connection: close`
    std::size_t keep_alive_head_bytes = 0;
    std::size_t close_head_bytes = 0;
    static constexpr std::string_view not_implemented =
        "HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

    explicit answers(std::uint64_t body_bytes) {
        std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
                           std::to_string(body_bytes) + "\r\n";
        std::string body(body_bytes, 'x');
        keep_alive = head + "\r\n";
        keep_alive_head_bytes = keep_alive.size();
        keep_alive += body;
        close = head + "Connection: close\r\n\r\n";
        close_head_bytes = close.size();
        close += body;
    }
    std::size_t max_bytes() const { return std::max(close.size(), not_implemented.size()); }
};

char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c; }

bool equals_ignoring_case(std::string_view a, std::string_view lower) {
    if (a.size() != lower.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (ascii_lower(a[i]) != lower[i]) return false;
    return true;
}

// Whether a header value (a comma-separated token list) holds the token `close`.
bool has_close_token(std::string_view value) {
    while (!value.empty()) {
        auto comma = value.find(',');
        std::string_view token = value.substr(0, comma);
        auto first = token.find_first_not_of(" \t");
        auto last = token.find_last_not_of(" \t");
        if (first != std::string_view::npos && equals_ignoring_case(token.substr(first, last - first + 1), "close"))
            return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

// Whether a request head (request line, header lines, final empty line) asks to close.
bool asks_to_close(std::string_view head) {
    constexpr std::string_view name = "connection:";
    auto line_start = head.find("\r\n");
    while (line_start != std::string_view::npos) {
        line_start += 2;
        auto line_end = head.find("\r\n", line_start);
        if (line_end == std::string_view::npos) break;
        std::string_view line = head.substr(line_start, line_end - line_start);
        if (line.size() > name.size() && ascii_lower(line[0]) == 'c' &&
            equals_ignoring_case(line.substr(0, name.size()), name) && has_close_token(line.substr(name.size())))
            return true;
        line_start = line_end;
    }
    return false;
}

struct connection {
    explicit connection(std::size_t output_bytes)
        : out(std::make_unique_for_overwrite<char[]>(output_bytes)) {}

    void reset(int socket) {
        fd = socket;
        input_drained = true;
        close_when_sent = false;
        in_begin = in_end = in_scanned = 0;
        out_begin = out_end = 0;
    }

    int fd = -1;
    bool input_drained = true;       // the last read was short or EAGAIN: wait for EPOLLIN
    bool close_when_sent = false;
    std::size_t in_begin = 0;        // unanswered bytes are [in_begin, in_end)
    std::size_t in_end = 0;
    std::size_t in_scanned = 0;      // no head ends before it (in_begin <= in_scanned <= in_end)
    std::size_t out_begin = 0;       // unsent bytes are [out_begin, out_end)
    std::size_t out_end = 0;
    std::unique_ptr<char[]> out;
    char in[input_buffer_bytes];
};

class server {
public:
    server(const options& opts, const answers& fixed)
        : opts_(opts), answers_(fixed), output_bytes_(std::max(output_buffer_min_bytes, fixed.max_bytes())) {}

    ~server() {
        for (auto& c : all_)
            if (c->fd >= 0) ::close(c->fd);
        for (int fd : {listen_fd_, signal_fd_, epoll_fd_})
            if (fd >= 0) ::close(fd);
    }
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    // Listens, and prepares epoll and the signalfd (SIGTERM and SIGINT must be blocked already).
    std::expected<sockaddr_in, std::string> open(const sigset_t& stop_signals) {
        epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (epoll_fd_ < 0) return std::unexpected(error("epoll_create1"));
        signal_fd_ = ::signalfd(-1, &stop_signals, SFD_NONBLOCK | SFD_CLOEXEC);
        if (signal_fd_ < 0) return std::unexpected(error("signalfd"));
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (listen_fd_ < 0) return std::unexpected(error("socket"));
        int one = 1;
        ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&opts_.address), sizeof opts_.address) < 0)
            return std::unexpected(error("bind"));
        if (::listen(listen_fd_, listen_backlog_connections) < 0) return std::unexpected(error("listen"));
        sockaddr_in bound{};
        socklen_t length = sizeof bound;
        if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length) < 0)
            return std::unexpected(error("getsockname"));
        if (!watch(listen_fd_, EPOLLIN | EPOLLET, listener_token)) return std::unexpected(error("epoll_ctl"));
        if (!watch(signal_fd_, EPOLLIN, signal_token)) return std::unexpected(error("epoll_ctl"));
        return bound;
    }

    // Serves until SIGTERM or SIGINT (true), or until epoll_wait fails (false).
    bool run() {
        epoll_event events[max_events_per_wait];
        for (;;) {
            int n = ::epoll_wait(epoll_fd_, events, max_events_per_wait, -1);
            if (n < 0) {
                if (errno == EINTR) continue;
                std::perror("percore-ceiling: epoll_wait");
                return false;
            }
            for (int i = 0; i < n; ++i) {
                std::uint64_t token = events[i].data.u64;
                if (token == listener_token)
                    accept_all();
                else if (token == signal_token)
                    return true;
                else
                    on_event(*reinterpret_cast<connection*>(token), events[i].events);
            }
        }
    }

private:
    static std::string error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

    bool watch(int fd, std::uint32_t events, std::uint64_t token) {
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = token;
        return ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0;
    }

    void accept_all() {
        for (;;) {
            int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) return;
                // EMFILE, ENFILE, ENOBUFS, ENOMEM: the rest wait in the backlog for the next edge
                if (!accept_failure_reported_) std::perror("percore-ceiling: accept4");
                accept_failure_reported_ = true;
                return;
            }
            int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            connection* c;
            if (idle_.empty()) {
                all_.push_back(std::make_unique<connection>(output_bytes_));
                c = all_.back().get();
            } else {
                c = idle_.back();
                idle_.pop_back();
            }
            c->reset(fd);
            if (!watch(fd, EPOLLIN | EPOLLOUT | EPOLLET, reinterpret_cast<std::uint64_t>(c))) close_connection(*c);
        }
    }

    // Each connection is closed only while its own event is handled, so a reused object never
    // meets an event of its previous socket later in the same batch.
    void close_connection(connection& c) {
        ::close(c.fd);
        c.fd = -1;
        idle_.push_back(&c);
    }

    void on_event(connection& c, std::uint32_t events) {
        if (events & (EPOLLERR | EPOLLHUP)) return close_connection(c);
        if (events & EPOLLIN) c.input_drained = false;
        drive(c);
    }

    // Sends what is waiting, answers what was read, reads more; until the socket has nothing more
    // to read or cannot take more answers.
    void drive(connection& c) {
        for (;;) {
            if (c.out_end > c.out_begin) {
                if (!send_output(c)) return close_connection(c);
                if (c.out_end > c.out_begin) return;       // the kernel is full: EPOLLOUT resumes
            }
            if (c.close_when_sent) return close_connection(c);
            if (answer_heads(c)) continue;
            if (c.input_drained) return;
            if (c.in_begin > 0) {                          // move a partial head to the front
                std::memmove(c.in, c.in + c.in_begin, c.in_end - c.in_begin);
                c.in_end -= c.in_begin;
                c.in_scanned -= c.in_begin;
                c.in_begin = 0;
            }
            std::size_t room = input_buffer_bytes - c.in_end;
            if (room == 0) return close_connection(c);    // a head longer than the input buffer
            ssize_t n = ::recv(c.fd, c.in + c.in_end, room, 0);
            if (n > 0) {
                c.in_end += static_cast<std::size_t>(n);
                if (static_cast<std::size_t>(n) < room) c.input_drained = true;
                continue;
            }
            if (n == 0) return close_connection(c);       // the client is done
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c.input_drained = true;
                return;
            }
            if (errno != EINTR) return close_connection(c);
        }
    }

    // Appends an answer for each complete head read (the output buffer is empty on entry) while
    // one more answer fits. Returns whether it appended any.
    bool answer_heads(connection& c) {
        bool answered = false;
        while (output_bytes_ - c.out_end >= answers_.max_bytes()) {
            std::size_t from = std::max(c.in_begin, c.in_scanned);
            const void* found = ::memmem(c.in + from, c.in_end - from, "\r\n\r\n", 4);
            if (found == nullptr) {
                c.in_scanned = std::max(c.in_begin, c.in_end >= 3 ? c.in_end - 3 : 0);
                if (c.in_begin == c.in_end) c.in_begin = c.in_end = c.in_scanned = 0;
                return answered;
            }
            std::size_t head_end = static_cast<std::size_t>(static_cast<const char*>(found) - c.in) + 4;
            std::string_view head(c.in + c.in_begin, head_end - c.in_begin);
            c.in_begin = c.in_scanned = head_end;
            answered = true;

            bool get = head.starts_with("GET ");
            if (!get && !head.starts_with("HEAD ")) {
                append(c, answers::not_implemented);
                c.close_when_sent = true;
            } else if (asks_to_close(head)) {
                append(c, std::string_view(answers_.close).substr(0, get ? answers_.close.size()
                                                                         : answers_.close_head_bytes));
                c.close_when_sent = true;
            } else {
                append(c, std::string_view(answers_.keep_alive).substr(0, get ? answers_.keep_alive.size()
                                                                              : answers_.keep_alive_head_bytes));
            }
            if (c.close_when_sent) {                       // later requests are dropped
                c.in_begin = c.in_end = c.in_scanned = 0;
                return true;
            }
        }
        return answered;
    }

    static void append(connection& c, std::string_view bytes) {
        std::memcpy(c.out.get() + c.out_end, bytes.data(), bytes.size());
        c.out_end += bytes.size();
    }

    // Sends until the output is empty (true) or the kernel takes no more (true, bytes left), or
    // the connection failed (false).
    static bool send_output(connection& c) {
        while (c.out_end > c.out_begin) {
            ssize_t n = ::send(c.fd, c.out.get() + c.out_begin, c.out_end - c.out_begin, MSG_NOSIGNAL);
            if (n >= 0) {
                c.out_begin += static_cast<std::size_t>(n);
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
            if (errno != EINTR) return false;
        }
        c.out_begin = c.out_end = 0;
        return true;
    }

    const options& opts_;
    const answers& answers_;
    const std::size_t output_bytes_;
    int epoll_fd_ = -1;
    int signal_fd_ = -1;
    int listen_fd_ = -1;
    bool accept_failure_reported_ = false;
    std::vector<std::unique_ptr<connection>> all_;  // every connection object made, open or idle
    std::vector<connection*> idle_;                 // closed ones, for reuse
};

}  // namespace
}  // namespace percore::ceiling

int main(int argc, char** argv) {
    using namespace percore::ceiling;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(usage.data(), stdout);
            return 0;
        }
    }
    auto parsed = parse_options(argc, argv);
    if (!parsed) {
        std::fprintf(stderr, "percore-ceiling: %s\n%s", parsed.error().c_str(), usage.data());
        return 2;
    }
    ::signal(SIGPIPE, SIG_IGN);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    if (::sigprocmask(SIG_BLOCK, &stop_signals, nullptr) < 0) {
        std::perror("percore-ceiling: sigprocmask");
        return 1;
    }

    answers fixed(parsed->body_bytes);
    server s(*parsed, fixed);
    auto bound = s.open(stop_signals);
    if (!bound) {
        std::fprintf(stderr, "percore-ceiling: %s\n", bound.error().c_str());
        return 1;
    }
    char host[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &bound->sin_addr, host, sizeof host);
    std::printf("listening on %s:%u\n", host, static_cast<unsigned>(ntohs(bound->sin_port)));
    std::fflush(stdout);
    return s.run() ? 0 : 1;
}
