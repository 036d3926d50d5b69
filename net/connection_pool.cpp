#include "net/connection_pool.hpp"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>

#include <boost/asio/ip/tcp.hpp>

#include "net/chunked_decoder.hpp"
#include "crypto/tls.hpp"

namespace percore::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// Bytes the read buffer may grow to: a whole head at its limits, and room to spare.
std::size_t max_read_buffer_bytes(const header_limits& h) {
    return h.max_request_line_bytes + h.max_header_section_bytes + 4096;
}

constexpr std::size_t max_iovecs = 64;
// One sendfile() moves at most this much, so one large answer cannot hold the shard's loop for
// long (a 1 MiB sendfile over loopback takes ~0.5 ms here); measured ~10% fewer CPU seconds per
// 1 MiB GET than whole-value calls (docs/perf/README.md).
constexpr std::size_t max_sendfile_bytes = 256 * 1024;
// TLS: records read per turn before other connections get theirs; file bytes read per TLS write
// (no sendfile through TLS: this machine has no kTLS).
constexpr int max_tls_reads_per_turn = 16;
constexpr std::size_t tls_file_chunk_bytes = 64 * 1024;

// RFC 9112 §3.2: origin-form, absolute-form, or asterisk-form (OPTIONS only). Authority-form is
// for CONNECT, which percore does not serve.
bool valid_target_form(const request_head& h) {
    std::string_view t = h.target;
    if (t.starts_with('/')) return true;
    if (t == "*") return h.verb == method::options;
    return t.starts_with("http://") || t.starts_with("https://");
}

}  // namespace

enum class phase : std::uint8_t {
    head,         // reading and parsing a request head
    body,         // reading a Content-Length body
    chunked,      // reading a chunked body
    pending,      // waiting for the handler's answer
    closing,      // answer queued; close once it is sent
    lingering,    // write side shut; discarding input until EOF or the linger deadline
};

struct connection {
    explicit connection(asio::io_context& io, connection_pool& p, std::uint32_t i) : socket(io), pool(p), index(i) {}
    ~connection() { std::free(in); }   // the input buffer is malloc'd in start() and kept across reuse
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    tcp::socket socket;
    // HTTPS connections (accepted on a TLS listener) read and write through `tls`; plain ones
    // leave it empty.
    crypto::tls_connection tls;
    bool tls_handshaking = false;
    bool tls_unflushed = false;     // the module holds bytes a write took but could not send yet
    bool tls_pumping = false;
    connection_pool& pool;
    std::uint32_t index;
    std::uint32_t generation = 0;
    bool open = false;
    bool read_waiting = false;
    bool write_waiting = false;
    bool peer_closed = false;
    // The client asked to close and sent nothing beyond its request: the answer can be followed
    // by close() at once. Otherwise closing lingers (shutdown, drain until EOF) so that bytes the
    // client still sends cannot turn the close into a reset that destroys the answer.
    bool close_at_once = false;
    // TCP_NODELAY is set before the first write of a connection that stays open: Nagle can only
    // hold back a later small answer, and a connection closed after one answer is flushed by the
    // close, so one-request connections save the setsockopt.
    bool nodelay_set = false;
    phase state = phase::head;

    // input: in[0, in_size) buffered; the current request starts at in_start; in_parse is the
    // first byte not yet consumed (after the head, the body's raw bytes when chunked)
    char* in = nullptr;
    std::size_t in_capacity = 0;
    std::size_t in_size = 0;
    std::size_t in_start = 0;
    std::size_t in_parse = 0;
    request_parser parser;
    request_head head;
    // A request whose body is still arriving keeps its head here: the head's views point into
    // `in`, which may move while a chunked body is read, and its field table is the pool's, which
    // the next head parsed on this shard overwrites. Kept across requests, so at most one
    // allocation per connection that ever waits for a body.
    std::vector<char> kept_head;
    std::vector<header_field> kept_fields;

    // body of the current request
    std::unique_ptr<char[]> body;
    std::uint64_t body_size = 0;      // expected (Content-Length) or decoded so far (chunked)
    std::uint64_t body_filled = 0;
    std::uint64_t body_capacity = 0;  // chunked: allocated
    std::uint64_t body_reserved = 0;  // counted against the pool's body budget
    bool body_in_buffer = false;      // the whole body lies in `in` after the head
    chunked_decoder chunked;

    // the answer being waited for
    method pending_verb = method::other;
    bool pending_head_only = false;
    connection_header pending_connection = connection_header::none;
    bool pending_close = false;
    clock_type::time_point request_started{};

    bool keep_alive = true;
    clock_type::time_point deadline{};
    output_buffer out;

    void start(std::size_t first_buffer_bytes);
    void on_received(std::size_t bytes);
    void on_peer_closed();
    void process_input();
    bool parse_head();
    void begin_body();
    void dispatch();
    void finish_request();
    void answer_error(int status, const char* reason, bool close);
    void flush();
    bool send_plain();
    bool send_tls();
    void tls_pump();
    void tls_wait(tcp::socket::wait_type what);
    bool input_target(char*& dst, std::size_t& want);
    void arm_read();
    void arm_write();
    void close();
    void start_linger();
    bool ensure_input_space();
    void keep_head();
    void compact_input();
    bool reserve_body(std::uint64_t bytes);
    void release_body_budget();
    bool idle() const { return state == phase::head && in_size == in_start && out.empty(); }
    connection_header connection_for(const request_head& h, bool keep) const;
};

// ---------------------------------------------------------------------------------------------

std::unique_ptr<char[]> request::take_body() {
    if (owned_ && *owned_) return std::move(*owned_);
    auto copy = std::make_unique_for_overwrite<char[]>(body_.size() ? body_.size() : 1);
    if (!body_.empty()) std::memcpy(copy.get(), body_.data(), body_.size());
    return copy;
}

connection_pool::connection_pool(asio::io_context& io, request_handler& handler, connection_limits limits)
    : io_(io), handler_(handler), limits_(limits), fields_(limits.head.max_header_fields + 1) {
    format_date_line(0, date_line_);
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

connection_pool::~connection_pool() {
    close_all();
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
}

void connection_pool::set_date(std::int64_t unix_seconds) { format_date_line(unix_seconds, date_line_); }

connection* connection_pool::allocate() {
    connection* c;
    if (!free_.empty()) {
        c = connections_[free_.back()].get();
        free_.pop_back();
    } else {
        connections_.push_back(std::make_unique<connection>(io_, *this, static_cast<std::uint32_t>(connections_.size())));
        c = connections_.back().get();
    }
    ++c->generation;
    ++open_;
    stats_.active.store(open_, std::memory_order_relaxed);
    return c;
}

void connection_pool::release(connection* c) {
    --open_;
    stats_.active.store(open_, std::memory_order_relaxed);
    free_.push_back(c->index);
}

void connection_pool::accept_from(tcp::acceptor& acceptor, crypto::tls_server* tls) {
    assert(listener_count_ < max_listeners);
    acceptor.non_blocking(true);
    listener& l = listeners_[listener_count_++];
    l.acceptor = &acceptor;
    l.tls = tls;
    if (tls && !tls_scratch_) tls_scratch_ = std::make_unique_for_overwrite<char[]>(tls_file_chunk_bytes);
    accept_ready(l);
}

void connection_pool::accept_ready(listener& l) {
    drain_accepts(l);
    if (!l.acceptor->is_open()) return;
    l.acceptor->async_wait(tcp::acceptor::wait_read, [this, &l](const boost::system::error_code& ec) {
        awake();
        if (ec) return;
        accept_ready(l);
    });
}

// Accepts until the backlog is empty. The listening socket is edge-triggered: a connection left
// in the backlog gets no new readiness of its own, so every error that stops the loop early
// either refuses the connection or marks the listener stalled for the tick (sweep) to retry.
// Past max_connections an HTTP client gets a 503; an HTTPS client is closed (a plaintext answer
// would be garbage to it, and a handshake is what an overloaded server should not spend on).
void connection_pool::drain_accepts(listener& l) {
    tcp::acceptor& acceptor = *l.acceptor;
    l.stalled = false;
    for (;;) {
        if (!acceptor.is_open()) return;
        boost::system::error_code ec;
        if (open_ >= limits_.max_connections || shutting_down_) {
            if (!spare_) spare_ = std::make_unique<tcp::socket>(io_);
            acceptor.accept(*spare_, ec);
            if (!ec) {
                if (l.tls) {
                    stats_.refused.fetch_add(1, std::memory_order_relaxed);
                    spare_->close(ec);
                } else {
                    refuse(*spare_);
                }
                continue;
            }
        } else {
            connection* c = allocate();
            acceptor.accept(c->socket, ec);
            if (!ec) {
                stats_.accepted.fetch_add(1, std::memory_order_relaxed);
                if (l.tls) {
                    auto t = l.tls->accept(c->socket.native_handle());
                    if (!t) {   // out of memory inside OpenSSL
                        c->open = true;
                        c->close();
                        continue;
                    }
                    c->tls = std::move(*t);
                    c->tls_handshaking = true;
                }
                c->start(limits_.first_read_buffer_bytes);
                continue;
            }
            --c->generation;  // never handed out
            release(c);
        }
        if (ec == asio::error::would_block || ec == asio::error::try_again) return;
        if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) return;
        if (ec == asio::error::connection_aborted || ec == asio::error::interrupted) continue;
        if ((ec == asio::error::no_descriptors || ec.value() == ENFILE) && refuse_past_descriptor_limit(l))
            continue;
        // out of descriptors with no reserve, or out of memory: try again on the tick
        l.stalled = true;
        return;
    }
}

// Out of file descriptors: frees the reserve to accept one waiting connection and refuse it.
// Returns false when there was nothing to accept or the reserve could not help.
bool connection_pool::refuse_past_descriptor_limit(listener& l) {
    tcp::acceptor& acceptor = *l.acceptor;
    if (reserve_fd_ < 0) reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (reserve_fd_ < 0) return false;
    ::close(reserve_fd_);
    int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
        if (l.tls) stats_.refused.fetch_add(1, std::memory_order_relaxed);
        else refuse(fd);
        ::close(fd);
    }
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // may fail: retried next time
    return fd >= 0;
}

void connection_pool::refuse(tcp::socket& s) {
    refuse(s.native_handle());
    boost::system::error_code ec;
    s.close(ec);
}

// Answers 503 and shuts the write side; the caller closes the descriptor (or the socket).
void connection_pool::refuse(int fd) {
    static constexpr std::string_view answer =
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
        "Content-Length: 32\r\n\r\n{\"error\":\"too many connections\"}";
    stats_.refused.fetch_add(1, std::memory_order_relaxed);
    ssize_t n = ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    ::shutdown(fd, SHUT_WR);
}

void connection_pool::complete(answer_ticket ticket, const simple_answer& answer) {
    if (ticket.index >= connections_.size()) return;
    connection* c = connections_[ticket.index].get();
    if (!c->open || c->generation != ticket.generation || c->state != phase::pending) return;
    response res(c->out, std::string_view(date_line_, date_line_bytes), c->pending_connection, c->pending_head_only);
    if (answer.error) {
        if (answer.has_etag) res.error_with_etag(answer.status, answer.error, answer.etag);
        else res.error(answer.status, answer.error);
    } else {
        res.start(answer.status);
        if (answer.has_etag) res.etag(answer.etag);
        if (answer.status != 204 && answer.status != 304) res.content_length(0);
        res.end_head();
    }
    handler_.answered(c->pending_verb, answer.status,
                      static_cast<std::uint64_t>((now_ - c->request_started).count()));
    c->release_body_budget();
    c->state = c->pending_close ? phase::closing : phase::head;
    c->deadline = now_ + limits_.idle_timeout;
    if (c->state == phase::head) {
        c->process_input();
        if (!c->open) return;
    }
    c->flush();
    if (c->open) c->arm_read();
}

void connection_pool::sweep() {
    if (reserve_fd_ < 0) reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // lost to another shard
    for (std::size_t i = 0; i < listener_count_; ++i)
        if (listeners_[i].stalled) drain_accepts(listeners_[i]);  // its async_wait stays armed
    for (auto& owned : connections_) {
        connection* c = owned.get();
        if (!c->open || c->state == phase::pending) continue;
        if (now_ < c->deadline) continue;
        if (c->state == phase::lingering || !c->out.empty() || c->state == phase::closing) {
            c->close();
        } else if (c->in_size > c->in_start || c->state == phase::body || c->state == phase::chunked) {
            c->answer_error(408, "request timeout", true);
            c->flush();
        } else {
            c->close();
        }
    }
}

void connection_pool::begin_shutdown() {
    shutting_down_ = true;
    for (auto& owned : connections_) {
        connection* c = owned.get();
        if (!c->open) continue;
        c->keep_alive = false;
        if (c->idle()) c->close();
    }
}

void connection_pool::close_all() {
    for (auto& owned : connections_)
        if (owned->open) owned->close();
}

// ---------------------------------------------------------------------------------------------

void connection::start(std::size_t first_buffer_bytes) {
    open = true;
    read_waiting = write_waiting = peer_closed = false;
    state = phase::head;
    in_size = in_start = in_parse = 0;
    keep_alive = true;
    close_at_once = false;
    parser.reset();
    if (!in) {
        in = static_cast<char*>(std::malloc(first_buffer_bytes));
        in_capacity = in ? first_buffer_bytes : 0;
    }
    deadline = pool.now_ + pool.limits_.idle_timeout;
    boost::system::error_code ec;
    socket.non_blocking(true, ec);
    nodelay_set = false;
    arm_read();
}

void connection::close() {
    if (!open) return;
    open = false;
    if (tls) {
        if (!tls_handshaking && close_at_once) tls.shutdown();  // close_notify after the last answer
        tls = crypto::tls_connection();
    }
    tls_handshaking = tls_unflushed = false;
    boost::system::error_code ec;
    socket.close(ec);
    out.clear();
    out.shrink(pool.limits_.keep_output_bytes);
    release_body_budget();
    body.reset();
    body_capacity = 0;
    if (in_capacity > 4 * pool.limits_.first_read_buffer_bytes) {
        std::free(in);
        in = nullptr;
        in_capacity = 0;
    }
    pool.release(this);
}

// Where the next bytes read go: the body buffer for a body read straight into it, else the input
// buffer (grown when needed). False when nothing sane remains (the connection was answered 431).
bool connection::input_target(char*& dst, std::size_t& want) {
    if (state == phase::body && !body_in_buffer) {
        dst = body.get() + body_filled;
        want = body_size - body_filled;
        return true;
    }
    if (state == phase::lingering) in_size = in_start = in_parse = 0;
    if (!ensure_input_space()) {
        // a head this large was refused by the parser already; nothing sane remains
        answer_error(431, "header section too large", true);
        flush();
        return false;
    }
    dst = in + in_size;
    want = in_capacity - in_size;
    return true;
}

// Plain reads go through Asio's speculative receive: it calls recv() at once while the socket
// may hold data and waits for the next epoll edge after EAGAIN. TLS reads go through tls_pump().
void connection::arm_read() {
    if (read_waiting || !open || peer_closed) return;
    if (state == phase::pending || state == phase::closing) return;
    if (tls) {
        if (!tls_pumping) tls_pump();
        return;
    }
    char* dst;
    std::size_t want;
    if (!input_target(dst, want)) return;
    read_waiting = true;
    socket.async_receive(asio::buffer(dst, want), [this, g = generation](const boost::system::error_code& ec, std::size_t n) {
        pool.awake();
        if (g != generation || !open) return;
        read_waiting = false;
        if (ec == asio::error::eof) {
            on_peer_closed();
        } else if (ec) {
            close();
            return;
        } else {
            on_received(n);
        }
        if (!open) return;
        flush();
        arm_read();
    });
}

// Drives a TLS connection's input: the handshake, then records until OpenSSL wants the socket
// (edge-triggered readiness: a record read does not mean the socket is drained). After
// max_tls_reads_per_turn records the rest waits for a posted turn, so one busy client cannot hold
// the shard.
void connection::tls_pump() {
    tls_pumping = true;
    for (int reads = 0; open && !read_waiting && !peer_closed; ++reads) {
        if (state == phase::pending || state == phase::closing) break;
        if (reads == max_tls_reads_per_turn) {
            read_waiting = true;
            asio::post(socket.get_executor(), [this, g = generation] {
                if (g != generation || !open) return;
                read_waiting = false;
                tls_pump();
            });
            break;
        }
        if (tls_handshaking) {
            crypto::tls_status st = tls.handshake();
            if (st == crypto::tls_status::ok) {
                tls_handshaking = false;
                deadline = pool.now_ + pool.limits_.idle_timeout;
                continue;
            }
            if (st == crypto::tls_status::want_read) tls_wait(tcp::socket::wait_read);
            else if (st == crypto::tls_status::want_write) tls_wait(tcp::socket::wait_write);
            else {
                pool.stats_.tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
                close();   // plaintext, garbage or a refused protocol: nothing to answer in TLS
            }
            break;
        }
        char* dst;
        std::size_t want;
        if (!input_target(dst, want)) break;
        crypto::tls_io r = tls.read(std::span<char>(dst, want));
        if (r.status == crypto::tls_status::ok) {
            on_received(r.bytes);
            if (!open) break;
            flush();
            continue;
        }
        if (r.status == crypto::tls_status::want_read) tls_wait(tcp::socket::wait_read);
        else if (r.status == crypto::tls_status::want_write) tls_wait(tcp::socket::wait_write);
        else if (r.status == crypto::tls_status::closed) {
            on_peer_closed();
            if (open) flush();
        } else {
            close();
        }
        break;
    }
    tls_pumping = false;
}

// Waits for the readiness OpenSSL asked for, then pumps input and flushes output again.
void connection::tls_wait(tcp::socket::wait_type what) {
    read_waiting = true;
    socket.async_wait(what, [this, g = generation](const boost::system::error_code& ec) {
        pool.awake();
        if (g != generation || !open) return;
        read_waiting = false;
        if (ec) {
            close();
            return;
        }
        tls_pump();
        if (open) flush();
    });
}

void connection::arm_write() {
    if (write_waiting || !open) return;
    write_waiting = true;
    socket.async_wait(tcp::socket::wait_write, [this, g = generation](const boost::system::error_code& ec) {
        pool.awake();
        if (g != generation || !open) return;
        write_waiting = false;
        if (ec) {
            close();
            return;
        }
        flush();
        arm_read();
    });
}

bool connection::ensure_input_space() {
    if (in_size < in_capacity) return true;
    compact_input();
    if (in_size < in_capacity) return true;
    std::size_t max = max_read_buffer_bytes(pool.limits_.head);
    if (in_capacity >= max) return false;
    std::size_t want = std::min(max, std::max<std::size_t>(in_capacity * 2, 4096));
    auto* p = static_cast<char*>(std::realloc(in, want));
    if (!p) return false;
    in = p;
    in_capacity = want;
    return true;
}

// Moves what the current request still needs to the front of the buffer. During a chunked body
// the head stays where it is (the request's views point into it) and only raw body bytes move.
void connection::compact_input() {
    if (state == phase::chunked) {
        std::size_t head_end = in_start + head.head_bytes;
        if (in_parse > head_end) {
            std::memmove(in + head_end, in + in_parse, in_size - in_parse);
            in_size -= in_parse - head_end;
            in_parse = head_end;
        }
        return;
    }
    if (state != phase::head || in_start == 0) return;
    std::memmove(in, in + in_start, in_size - in_start);
    in_size -= in_start;
    in_parse -= in_start;
    in_start = 0;
}

void connection::on_received(std::size_t n) {
    pool.stats_.bytes_in.fetch_add(n, std::memory_order_relaxed);
    if (state == phase::lingering) return;
    if (state == phase::body && !body_in_buffer) {
        body_filled += n;
        deadline = pool.now_ + pool.limits_.idle_timeout;
    } else {
        // a head must arrive in full within the idle timeout of its first byte; bodies may take
        // longer as long as they keep moving
        if ((in_size == in_start && state == phase::head) || state == phase::chunked)
            deadline = pool.now_ + pool.limits_.idle_timeout;
        in_size += n;
    }
    process_input();
}

void connection::on_peer_closed() {
    peer_closed = true;
    if (state == phase::pending) return;  // answer what was asked, then close
    if (!out.empty()) {
        state = phase::closing;
        return;
    }
    close();
}

void connection::process_input() {
    while (open) {
        switch (state) {
        case phase::head:
            if (in_size == in_start) {
                out.shrink(pool.limits_.keep_output_bytes);
                return;
            }
            if (!parse_head()) return;
            break;
        case phase::body:
            if (body_in_buffer || body_filled == body_size) {
                dispatch();
                break;
            }
            return;
        case phase::chunked: {
            auto sink = [](void* ctx, const char* data, std::size_t size) {
                auto* c = static_cast<connection*>(ctx);
                if (c->body_size + size > c->body_capacity) {
                    std::uint64_t cap = std::max<std::uint64_t>(c->body_capacity * 2, c->body_size + size);
                    cap = std::max<std::uint64_t>(cap, 4096);
                    auto grown = std::make_unique_for_overwrite<char[]>(cap);
                    if (c->body_size) std::memcpy(grown.get(), c->body.get(), c->body_size);
                    c->body = std::move(grown);
                    c->body_capacity = cap;
                }
                std::memcpy(c->body.get() + c->body_size, data, size);
                c->body_size += size;
            };
            std::uint64_t before = body_size;
            auto r = chunked.decode(std::string_view(in + in_parse, in_size - in_parse), sink, this);
            in_parse += r.consumed;
            if (body_size > before && !reserve_body(body_size - before)) {
                answer_error(503, "body budget exhausted", true);
                return;
            }
            if (r.state == chunked_decoder::status::error) {
                answer_error(r.http_status, r.reason, true);
                return;
            }
            if (r.state == chunked_decoder::status::need_more) {
                compact_input();
                return;
            }
            body_filled = body_size;
            dispatch();
            break;
        }
        case phase::pending:
        case phase::closing:
        case phase::lingering:
            return;
        }
    }
}

connection_header connection::connection_for(const request_head& h, bool keep) const {
    if (!keep) return connection_header::close;
    return h.version_minor == 0 ? connection_header::keep_alive : connection_header::none;
}

// Parses the head at in_start; returns false when more input is needed or the connection is done.
bool connection::parse_head() {
    auto& fields = pool.fields_;
    parse_result r = parser.parse(std::string_view(in + in_start, in_size - in_start), head, fields);
    if (r.outcome == parse_outcome::incomplete) {
        if (in_start > 0 && in_size == in_capacity) compact_input();
        return false;
    }
    if (r.outcome == parse_outcome::error) {
        answer_error(r.status, r.reason, true);
        return false;
    }
    request_started = pool.now_;
    bool client_closes = head.version_minor == 0 ? head.connection != connection_option::keep_alive
                                                 : head.connection == connection_option::close;
    close_at_once = client_closes && keep_alive && !pool.shutting_down_;   // confirmed once answered
    keep_alive = keep_alive && !pool.shutting_down_ && !client_closes;
    in_parse = in_start + head.head_bytes;
    if (!valid_target_form(head)) {
        answer_error(400, "malformed request target", true);
        return false;
    }
    if (head.expect_unsupported) {
        answer_error(417, "unsupported expectation", true);
        return false;
    }
    begin_body();
    return open && (state == phase::head || state == phase::body || state == phase::chunked);
}

bool connection::reserve_body(std::uint64_t bytes) {
    auto& in_flight = pool.stats_.body_bytes_in_flight;
    std::uint64_t now_in_flight = in_flight.load(std::memory_order_relaxed);
    if (now_in_flight + bytes > pool.limits_.body_budget_bytes) return false;
    in_flight.store(now_in_flight + bytes, std::memory_order_relaxed);
    body_reserved += bytes;
    return true;
}

void connection::release_body_budget() {
    if (body_reserved == 0) return;
    auto& in_flight = pool.stats_.body_bytes_in_flight;
    in_flight.store(in_flight.load(std::memory_order_relaxed) - body_reserved, std::memory_order_relaxed);
    body_reserved = 0;
}

void connection::keep_head() {
    const char* base = in + in_start;
    const std::size_t n = head.head_bytes;
    kept_head.assign(base, base + n);
    const char* moved = kept_head.data();
    auto rebase = [&](std::string_view v) {
        if (v.empty() || v.data() < base || v.data() >= base + n) return v;
        return std::string_view(moved + (v.data() - base), v.size());
    };
    head.method_text = rebase(head.method_text);
    head.target = rebase(head.target);
    head.host = rebase(head.host);
    kept_fields.assign(head.fields.begin(), head.fields.end());
    for (auto& f : kept_fields) {
        f.name = rebase(f.name);
        f.value = rebase(f.value);
    }
    head.fields = std::span<const header_field>(kept_fields);
}

void connection::begin_body() {
    body.reset();
    body_size = body_filled = body_capacity = 0;
    body_in_buffer = false;
    bool wants_body = head.chunked || (head.has_content_length && head.content_length > 0);
    if (!head.chunked && !head.has_content_length && head.verb == method::put) {
        answer_error(411, "length required", true);
        return;
    }
    if (!wants_body) {
        body_in_buffer = true;
        dispatch();
        return;
    }
    if (head.has_content_length && head.content_length > pool.limits_.max_body_bytes) {
        answer_error(413, "body too large", true);
        return;
    }
    std::size_t buffered = in_size - in_parse;
    bool all_buffered = !head.chunked && buffered >= head.content_length;
    if (head.expect_continue && head.version_minor >= 1 && !all_buffered) {
        out.append(status_line(100));
        out.append("\r\n");
        flush();
        if (!open) return;
    }
    if (head.chunked) {
        chunked_limits limits;
        limits.max_body_bytes = pool.limits_.max_body_bytes;
        chunked = chunked_decoder(limits);
        state = phase::chunked;
        keep_head();
        return;
    }
    if (!reserve_body(head.content_length)) {
        answer_error(503, "body budget exhausted", true);
        return;
    }
    body_size = head.content_length;
    state = phase::body;
    if (all_buffered) {
        body_in_buffer = true;
        return;
    }
    keep_head();
    body = std::make_unique_for_overwrite<char[]>(body_size);
    std::memcpy(body.get(), in + in_parse, buffered);
    body_filled = buffered;
    in_size = in_parse;  // the rest of the body is read straight into `body`
    deadline = pool.now_ + pool.limits_.idle_timeout;
}

void connection::dispatch() {
    std::string_view body_view;
    std::uint64_t body_bytes_in_input = 0;
    if (state == phase::chunked || (state == phase::body && !body_in_buffer)) {
        body_view = std::string_view(body.get(), body_size);
    } else if (state == phase::body) {
        body_view = std::string_view(in + in_parse, body_size);
        body_bytes_in_input = body_size;
    }
    connection_header ch = connection_for(head, keep_alive);
    bool head_only = head.verb == method::head;
    request req(head, body_view, body ? &body : nullptr);
    response res(out, std::string_view(pool.date_line_, date_line_bytes), ch, head_only);
    auto result = pool.handler_.handle(req, res, answer_ticket{index, generation});
    in_parse += body_bytes_in_input;
    in_start = in_parse;
    parser.reset();
    body.reset();
    body_capacity = 0;
    close_at_once = close_at_once && in_parse == in_size;
    if (result == request_handler::result::pending) {
        pending_verb = head.verb;
        pending_head_only = head_only;
        pending_connection = ch;
        pending_close = !keep_alive;
        state = phase::pending;
        return;
    }
    pool.handler_.answered(head.verb, res.status(), static_cast<std::uint64_t>((pool.now_ - request_started).count()));
    release_body_budget();
    state = keep_alive ? phase::head : phase::closing;
    deadline = pool.now_ + pool.limits_.idle_timeout;
}

void connection::answer_error(int status, const char* reason, bool close_after) {
    bool head_only = state != phase::head ? head.verb == method::head : false;
    response res(out, std::string_view(pool.date_line_, date_line_bytes), connection_header::close, head_only);
    res.error(status, reason);
    close_at_once = false;
    pool.handler_.answered(state == phase::head ? method::other : head.verb, status, 0);
    release_body_budget();
    if (close_after) {
        keep_alive = false;
        state = phase::closing;
    }
}

void connection::flush() {
    if (!nodelay_set && keep_alive && open && !out.empty()) {
        boost::system::error_code ec;
        socket.set_option(tcp::no_delay(true), ec);
        nodelay_set = true;
    }
    if (!(tls ? send_tls() : send_plain())) return;
    if (!open) return;
    if (peer_closed && state == phase::head) {
        close();  // nothing more can arrive
        return;
    }
    if (state == phase::closing) {
        if (peer_closed || close_at_once) {
            close();
            return;
        }
        start_linger();
    }
}

// Sends what the output holds; true when all of it left, false when waiting for the socket (or
// closed).
bool connection::send_plain() {
    while (open && !out.empty()) {
        int file;
        std::uint64_t file_offset;
        std::size_t file_bytes;
        ssize_t n;
        if (out.front_file(file, file_offset, file_bytes)) {
            auto off = static_cast<off_t>(file_offset);
            n = ::sendfile(socket.native_handle(), file, &off, std::min(file_bytes, max_sendfile_bytes));
            if (n == 0) {  // the file is shorter than promised: nothing sane can follow
                close();
                return false;
            }
        } else {
            iovec iov[max_iovecs];
            std::size_t count = out.gather(iov, max_iovecs);
            msghdr msg{};
            msg.msg_iov = iov;
            msg.msg_iovlen = count;
            n = ::sendmsg(socket.native_handle(), &msg, MSG_NOSIGNAL);
        }
        if (n > 0) {
            pool.stats_.bytes_out.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
            out.consume(static_cast<std::size_t>(n));
            deadline = pool.now_ + pool.limits_.idle_timeout;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            arm_write();
            return false;
        }
        close();
        return false;
    }
    return open;
}

// The same through TLS: memory pieces are gathered into records; file pieces are read (pread)
// into the pool's scratch buffer first. Bytes the module took leave the output at once; when it
// could not send them all yet, the socket's writability brings the next flush.
bool connection::send_tls() {
    while (open && (!out.empty() || tls_unflushed)) {
        crypto::tls_io r;
        int file;
        std::uint64_t file_offset;
        std::size_t file_bytes;
        if (out.empty()) {
            r.status = tls.flush();
        } else if (out.front_file(file, file_offset, file_bytes)) {
            std::size_t want = std::min(file_bytes, tls_file_chunk_bytes);
            ssize_t got = ::pread(file, pool.tls_scratch_.get(), want, static_cast<off_t>(file_offset));
            if (got <= 0) {  // the file is shorter than promised: nothing sane can follow
                close();
                return false;
            }
            r = tls.write(std::span<const char>(pool.tls_scratch_.get(), static_cast<std::size_t>(got)));
        } else {
            iovec iov[max_iovecs];
            std::size_t count = out.gather(iov, max_iovecs);
            r = tls.write(std::span<const iovec>(iov, count));
        }
        if (r.bytes > 0) {
            pool.stats_.bytes_out.fetch_add(r.bytes, std::memory_order_relaxed);
            out.consume(r.bytes);
            deadline = pool.now_ + pool.limits_.idle_timeout;
        }
        if (r.status == crypto::tls_status::ok) {
            tls_unflushed = false;
            continue;
        }
        if (r.status == crypto::tls_status::want_write || r.status == crypto::tls_status::want_read) {
            tls_unflushed = true;
            arm_write();
            return false;
        }
        close();
        return false;
    }
    return open;
}

// After a closing answer, read and drop what the client still sends so that closing does not
// reset the connection before it has read the answer (RFC 9112 §9.6).
void connection::start_linger() {
    if (tls) tls.shutdown();   // close_notify, best effort: the answer itself has been sent
    ::shutdown(socket.native_handle(), SHUT_WR);
    state = phase::lingering;
    deadline = pool.now_ + pool.limits_.linger_timeout;
    in_size = in_start = in_parse = 0;
    arm_read();
}

}  // namespace percore::net
