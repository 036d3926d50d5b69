#include "http_client_connection.hpp"

#include "base64.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace percore::load {

std::int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

namespace {

std::uint64_t next_random(std::uint64_t& s) {   // xorshift64*
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
}

char* put(char* p, std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    return p + s.size();
}

char* put_number(char* p, std::uint64_t n) {
    return std::to_chars(p, p + max_key_digits, n).ptr;
}

// The JSON bodies of --style etcd, around the base64 key and value.
constexpr std::string_view etcd_key_open = "{\"key\":\"";
constexpr std::string_view etcd_value_open = "\",\"value\":\"";
constexpr std::string_view etcd_close = "\"}";

}  // namespace

std::size_t request_bytes_bound(const options& o) {
    std::size_t key_text = o.app.size() + 2 + max_key_digits;   // APP/kKEY
    std::size_t key_bytes = key_text, body_bytes = o.size;
    if (o.style == request_style::etcd) {
        key_bytes = base64_length(key_text);
        body_bytes = base64_length(o.size);
    }
    return max_request_head_bytes + o.host.size() + o.header_block.size() + o.path.size() + key_bytes + body_bytes;
}

http_client_connection::http_client_connection(worker_context& ctx, std::uint64_t seed,
                                               std::int64_t interval_ns, std::int64_t first_due_ns)
    : ctx_(ctx), rng_(seed * 0x9E3779B97F4A7C15ull + 1), interval_ns_(interval_ns),
      next_due_ns_(first_due_ns) {
    ring_.resize(ctx.opts.pipeline);
    out_.resize(request_bytes_bound(ctx.opts) * ctx.opts.pipeline);
    in_.resize(max_response_head_bytes + read_chunk_bytes);
}

http_client_connection::~http_client_connection() {
    if (fd_ >= 0) ::close(fd_);
}

std::int64_t http_client_connection::next_wakeup() const {
    if (state_ == state::disconnected && retry_at_ns_ > 0) return retry_at_ns_;
    if (interval_ns_ > 0 && pending_count_ < ring_.size()) return next_due_ns_;
    return INT64_MAX;
}

bool http_client_connection::want_send(std::int64_t now, bool stopping) const {
    if (stopping || pending_count_ >= ring_.size() || close_after_answer_) return false;
    if (ctx_.opts.mode == connection_mode::close && sent_on_socket_ > 0) return false;
    if (interval_ns_ > 0 && next_due_ns_ > now) return false;
    if (ctx_.plan.prepare && ctx_.plan.next_key->load(std::memory_order_relaxed) >= ctx_.opts.keys)
        return false;
    return true;
}

void http_client_connection::pump(std::int64_t now, bool stopping) {
    if (state_ == state::connecting) return;
    if (!want_send(now, stopping)) return;
    if (state_ == state::disconnected) {
        if (retry_at_ns_ > now) return;
        start_connect(now);
        return;   // sends once connected
    }
    while (want_send(now, stopping) && queue_request(now)) {}
    flush();
}

void http_client_connection::start_connect(std::int64_t now) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        ++ctx_.counters.connect_errors;
        retry_at_ns_ = now + connect_retry_ns;
        return;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&ctx_.opts.address), sizeof ctx_.opts.address);
    if (rc != 0 && errno != EINPROGRESS) {
        ++ctx_.counters.connect_errors;
        ::close(fd_);
        fd_ = -1;
        retry_at_ns_ = now + connect_retry_ns;
        return;
    }
    ++ctx_.counters.connects;
    state_ = state::connecting;
    retry_at_ns_ = 0;
    sent_on_socket_ = 0;
    close_after_answer_ = false;
    in_begin_ = in_end_ = 0;
    out_begin_ = out_end_ = 0;
    in_body_ = false;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.ptr = this;
    want_out_ = true;
    ::epoll_ctl(ctx_.epoll_fd, EPOLL_CTL_ADD, fd_, &ev);
}

bool http_client_connection::queue_request(std::int64_t now) {
    const options& o = ctx_.opts;
    std::uint64_t key;
    kind what;
    if (ctx_.plan.prepare) {
        key = ctx_.plan.next_key->fetch_add(1, std::memory_order_relaxed);
        if (key >= o.keys) return false;
        what = kind::put;
    } else {
        key = next_random(rng_) % o.keys;
        what = (next_random(rng_) % 100) < o.get_percent ? kind::get : kind::put;
    }
    std::int64_t intended = now;
    if (interval_ns_ > 0) {
        intended = next_due_ns_;
        next_due_ns_ += interval_ns_;
    }

    std::size_t need = request_bytes_bound(o);
    if (out_.size() - out_end_ < need) {   // compact what is still unsent
        std::memmove(out_.data(), out_.data() + out_begin_, out_end_ - out_begin_);
        out_end_ -= out_begin_;
        out_begin_ = 0;
    }
    char* p = out_.data() + out_end_;
    if (!o.path.empty()) p = write_path(p);
    else if (o.style == request_style::etcd) p = write_etcd(p, what, key);
    else p = write_percore(p, what, key);
    out_end_ = static_cast<std::size_t>(p - out_.data());

    ring_[(pending_head_ + pending_count_) % ring_.size()] = {key, intended, what};
    ++pending_count_;
    ++sent_on_socket_;
    ++ctx_.counters.sent;
    return true;
}

char* http_client_connection::write_percore(char* p, kind what, std::uint64_t key) const {
    const options& o = ctx_.opts;
    p = put(p, what == kind::get ? "GET /" : "PUT /");
    p = put(p, o.app);
    p = put(p, "/k");
    p = put_number(p, key);
    p = put(p, " HTTP/1.1\r\nHost: ");
    p = put(p, o.host);
    p = put(p, "\r\n");
    if (o.mode == connection_mode::close) p = put(p, "Connection: close\r\n");
    p = put(p, o.header_block);
    if (what == kind::put) {
        p = put(p, "Content-Type: application/octet-stream\r\nContent-Length: ");
        p = put_number(p, o.size);
        p = put(p, "\r\n");
        if (o.if_match) {
            std::string_view etag = ctx_.etags.get(key);
            if (!etag.empty()) {
                p = put(p, "If-Match: ");
                p = put(p, etag);
                p = put(p, "\r\n");
            }
        }
        p = put(p, "\r\n");
        p = put(p, ctx_.body);
    } else {
        p = put(p, "\r\n");
    }
    return p;
}

char* http_client_connection::write_etcd(char* p, kind what, std::uint64_t key) const {
    const options& o = ctx_.opts;
    char key_text[max_app_bytes + 2 + max_key_digits];   // APP/kKEY, then base64 into the request
    char* k = put(key_text, o.app);
    k = put(k, "/k");
    k = put_number(k, key);
    std::string_view key_view(key_text, static_cast<std::size_t>(k - key_text));
    std::size_t length = etcd_key_open.size() + base64_length(key_view.size()) + etcd_close.size();
    if (what == kind::put) length += etcd_value_open.size() + ctx_.body_base64.size();
    p = put(p, what == kind::put ? "POST /v3/kv/put" : "POST /v3/kv/range");
    p = put(p, " HTTP/1.1\r\nHost: ");
    p = put(p, o.host);
    p = put(p, "\r\n");
    if (o.mode == connection_mode::close) p = put(p, "Connection: close\r\n");
    p = put(p, o.header_block);
    p = put(p, "Content-Type: application/json\r\nContent-Length: ");
    p = put_number(p, length);
    p = put(p, "\r\n\r\n");
    p = put(p, etcd_key_open);
    p = base64_encode(key_view, p);
    if (what == kind::put) {
        p = put(p, etcd_value_open);
        p = put(p, ctx_.body_base64);
    }
    return put(p, etcd_close);
}

char* http_client_connection::write_path(char* p) const {
    const options& o = ctx_.opts;
    p = put(p, "GET ");
    p = put(p, o.path);
    p = put(p, " HTTP/1.1\r\nHost: ");
    p = put(p, o.host);
    p = put(p, "\r\n");
    if (o.mode == connection_mode::close) p = put(p, "Connection: close\r\n");
    p = put(p, o.header_block);
    return put(p, "\r\n");
}

void http_client_connection::update_interest() {
    bool want = state_ == state::connecting || out_begin_ < out_end_;
    if (want == want_out_ || fd_ < 0) return;
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.ptr = this;
    ::epoll_ctl(ctx_.epoll_fd, EPOLL_CTL_MOD, fd_, &ev);
    want_out_ = want;
}

void http_client_connection::flush() {
    while (out_begin_ < out_end_) {
        ssize_t n = ::send(fd_, out_.data() + out_begin_, out_end_ - out_begin_, MSG_NOSIGNAL);
        if (n > 0) {
            out_begin_ += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        close_socket(true);
        return;
    }
    if (out_begin_ == out_end_) out_begin_ = out_end_ = 0;
    update_interest();
}

void http_client_connection::on_event(std::uint32_t events, bool stopping) {
    if (fd_ < 0) return;
    if (state_ == state::connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            ++ctx_.counters.connect_errors;
            --ctx_.counters.connects;
            std::int64_t now = now_ns();
            close_socket(false);
            retry_at_ns_ = now + connect_retry_ns;
            return;
        }
        if (!(events & (EPOLLOUT | EPOLLIN))) return;
        state_ = state::open;
        update_interest();
        pump(now_ns(), stopping);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable();
    if (fd_ >= 0 && (events & EPOLLOUT)) flush();
    if (state_ != state::connecting) pump(now_ns(), stopping);
}

void http_client_connection::on_readable() {
    for (;;) {
        if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
        if (in_.size() - in_end_ < read_chunk_bytes / 2 && in_begin_ > 0) {
            std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
            in_end_ -= in_begin_;
            in_begin_ = 0;
        }
        std::size_t room = in_.size() - in_end_;
        ssize_t n = ::recv(fd_, in_.data() + in_end_, room, 0);
        if (n > 0) {
            in_end_ += static_cast<std::size_t>(n);
            process_input();
            if (fd_ < 0) return;
            if (static_cast<std::size_t>(n) < room) return;   // drained
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        // EOF or error
        if (in_body_ || in_begin_ < in_end_) {
            ctx_.counters.note_wrong("connection closed inside an answer", answer_status_);
            if (pending_count_ > 0) {
                ++ctx_.counters.answered;
                pending_head_ = (pending_head_ + 1) % ring_.size();
                --pending_count_;
            }
        }
        close_socket(pending_count_ > 0);
        return;
    }
}

void http_client_connection::process_input() {
    while (fd_ >= 0) {
        if (in_body_) {
            std::uint64_t take = std::min<std::uint64_t>(body_left_, in_end_ - in_begin_);
            in_begin_ += take;
            body_left_ -= take;
            if (body_left_ > 0) return;
            in_body_ = false;
            complete_answer();
            continue;
        }
        if (in_begin_ == in_end_) return;
        response_head head;
        std::string_view bytes(in_.data() + in_begin_, in_end_ - in_begin_);
        head_result r = parse_response_head(bytes, head);
        if (r == head_result::need_more) {
            if (bytes.size() > max_response_head_bytes) {
                ctx_.counters.note_wrong("answer head too large", 0);
                close_socket(true);
            }
            return;
        }
        if (r == head_result::malformed || pending_count_ == 0) {
            ctx_.counters.note_wrong(pending_count_ == 0 ? "answer without a request" : "malformed answer", head.status);
            if (pending_count_ > 0) {
                ++ctx_.counters.answered;
                pending_head_ = (pending_head_ + 1) % ring_.size();
                --pending_count_;
            }
            close_socket(true);
            return;
        }
        in_begin_ += head.head_bytes;
        if (head.status < 200) continue;   // interim answer: the final one follows
        if (!answer_head(head)) {
            complete_answer();
            close_socket(true);
            return;
        }
        in_body_ = true;
        body_left_ = head.content_length;
        if (head.close) close_after_answer_ = true;
    }
}

// What each request expects:
//   --style percore, no --path:
//     GET  -> 200 with Content-Length == --size; 404 too when --prepare was not given.
//     PUT  -> 201 or 204 (204 without a body); 412 when --if-match (counted as precondition_failed).
//   --path: GET PATH -> 200 with a Content-Length body of any length.
//   --style etcd: put and range alike -> 200 with a Content-Length body of any length.
// Anything else, a chunked or unframed answer, is wrong.
bool http_client_connection::answer_head(const response_head& head) {
    const pending& req = ring_[pending_head_];
    const options& o = ctx_.opts;
    answer_status_ = head.status;
    answer_wrong_ = false;
    ctx_.counters.status_class[std::min(head.status / 100, 5)]++;
    if (head.chunked || (!head.has_content_length && head.status != 204 && head.status != 304)) {
        ctx_.counters.note_wrong("answer without Content-Length", head.status);
        answer_wrong_ = true;
        return false;
    }
    const char* why = nullptr;
    if (!o.path.empty()) {
        if (head.status != 200) why = "unexpected status for GET --path";
    } else if (o.style == request_style::etcd) {
        if (head.status != 200)   // (a 200 without Content-Length was refused above)
            why = req.what == kind::get ? "unexpected status for etcd range" : "unexpected status for etcd put";
    } else if (req.what == kind::get) {
        if (head.status == 200) {
            if (head.content_length != o.size) why = "GET body length differs from --size";
            ctx_.etags.store(req.key, head.etag);
        } else if (!(head.status == 404 && !o.prepare)) {
            why = "unexpected status for GET";
        }
    } else {
        if (head.status == 201 || head.status == 204) {
            if (head.status == 204 && head.content_length != 0) why = "204 with a body";
            ctx_.etags.store(req.key, head.etag);
        } else if (head.status == 412 && o.if_match && !ctx_.plan.prepare) {
            ++ctx_.counters.precondition_failed;
            ctx_.etags.store(req.key, head.etag);
        } else {
            why = "unexpected status for PUT";
        }
    }
    if (why) {
        ctx_.counters.note_wrong(why, head.status);
        answer_wrong_ = true;
    }
    return true;
}

void http_client_connection::complete_answer() {
    const pending& req = ring_[pending_head_];
    std::int64_t now = now_ns();
    ++ctx_.counters.answered;
    ctx_.counters.latency.record(static_cast<std::uint64_t>(std::max<std::int64_t>(0, now - req.intended_ns)) / 1000);
    pending_head_ = (pending_head_ + 1) % ring_.size();
    --pending_count_;
    if (close_after_answer_) {
        // The server announced that it closes: requests after this one are lost; with none in
        // flight wait for its FIN (so TIME_WAIT stays on the server side, not on our ports).
        if (pending_count_ > 0) close_socket(true);
    } else if (ctx_.opts.mode == connection_mode::close && pending_count_ == 0) {
        close_socket(false);   // the server kept it open although we asked for close
    }
}

void http_client_connection::close_socket(bool broken) {
    if (fd_ >= 0) {
        ::epoll_ctl(ctx_.epoll_fd, EPOLL_CTL_DEL, fd_, nullptr);
        ::close(fd_);
        fd_ = -1;
    }
    if (broken && pending_count_ > 0) ++ctx_.counters.io_errors;
    ctx_.counters.unanswered += pending_count_;
    pending_count_ = 0;
    pending_head_ = 0;
    in_body_ = false;
    in_begin_ = in_end_ = 0;
    out_begin_ = out_end_ = 0;
    state_ = state::disconnected;
    want_out_ = false;
    close_after_answer_ = false;
    sent_on_socket_ = 0;
}

void http_client_connection::finish() {
    const phase_plan& plan = ctx_.plan;
    if (interval_ns_ > 0 && !plan.prepare && next_due_ns_ < plan.end_ns)
        ctx_.counters.due_unsent += static_cast<std::uint64_t>((plan.end_ns - next_due_ns_ + interval_ns_ - 1) / interval_ns_);
    close_socket(false);
}

}  // namespace percore::load
