#include "net/connection.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "shards/runtime/check.hpp"

namespace percore::net {

namespace {

// RFC 9112 §3.2: origin-form, absolute-form, or asterisk-form (OPTIONS only). Authority-form is
// for CONNECT, which percore does not serve.
bool valid_target_form(const request_head& h) {
    std::string_view t = h.target;
    if (t.starts_with('/')) return true;
    if (t == "*") return h.verb == method::options;
    return t.starts_with("http://") || t.starts_with("https://");
}

// A chunk's size line ("1a2b\r\n") written backwards ending at `end`; returns its first byte.
char* format_chunk_size_line(std::size_t size, char* end) {
    static constexpr char hex[] = "0123456789abcdef";
    *--end = '\n';
    *--end = '\r';
    do {
        *--end = hex[size & 0xf];
        size >>= 4;
    } while (size != 0);
    return end;
}

}  // namespace

connection::connection(connection_shared& shared, std::uint32_t index)
    : pool_(shared), index_(index), parser_(shared.limits().head) {}

// The input buffer is malloc'd by open() and kept across reuse.
connection::~connection() { std::free(in_); }

void connection::open(transport& io) {
    PERCORE_REQUIRES(state_ == connection_state::free);
    ++generation_;
    io_ = &io;
    io.bind_events(this);
    state_ = connection_state::head;
    ending_ = pool_.shutting_down() ? ending::linger_then_close : ending::keep_alive;
    peer_closed_ = false;
    input_paused_ = false;
    handed_request_ = false;
    turn_class_ = 0;
    in_size_ = in_start_ = in_parse_ = 0;
    unsent_answers_ = 0;
    parser_.reset();
    if (!in_) {
        in_ = static_cast<char*>(std::malloc(pool_.limits().first_read_buffer_bytes));
        in_capacity_ = in_ ? pool_.limits().first_read_buffer_bytes : 0;
    }
    touch();
    pump();
}

void connection::close() {
    if (state_ == connection_state::free) return;
    state_ = connection_state::free;
    transport* io = std::exchange(io_, nullptr);
    io->close();
    out_.clear();
    out_.shrink(pool_.limits().keep_output_bytes);
    unsent_answers_ = 0;
    release_body_budget();
    body_.reset();
    body_capacity_ = 0;
    body_place_ = body_place::none;
    if (in_capacity_ > 4 * pool_.limits().first_read_buffer_bytes) {
        std::free(in_);
        in_ = nullptr;
        in_capacity_ = 0;
    }
    if (std::exchange(handed_request_, false)) pool_.handler().closed(ticket());
    pool_.released(index_);
}

void connection::touch() {
    deadline_ = pool_.now() + pool_.limits().idle_timeout;
    idle_grace_given_ = false;
}

// A body's deadline: the idle timeout, and the rate floor's — the body start plus the idle timeout
// (the grace) plus 1/min_rate s per byte received, never more than the idle timeout from now.
void connection::body_progress(std::uint64_t bytes) {
    const auto now = pool_.now();
    const auto idle = pool_.limits().idle_timeout;
    auto credit = std::chrono::nanoseconds(bytes * 1'000'000'000ull / pool_.limits().min_body_bytes_per_second);
    rate_deadline_ = std::min(rate_deadline_ + credit, now + idle);
    deadline_ = std::min(now + idle, rate_deadline_);
}

void connection::begin_body_clock() {
    rate_deadline_ = pool_.now() + pool_.limits().idle_timeout;
    deadline_ = rate_deadline_;
}

void connection::on_ready() { pump(); }

// Sends what waits, resumes requests held back by unsent answers once those drained, then reads
// while the transport has bytes and the connection wants them; every read's answers leave together
// before the next read.
void connection::pump() {
    for (;;) {
        flush();
        if (state_ == connection_state::free) return;
        if (input_paused_ && !output_full()) {
            input_paused_ = false;
            process_input();
            continue;
        }
        if (!wants_input() || !io_->readable()) return;
        if (!read_once()) {
            flush();
            return;
        }
    }
}

bool connection::wants_input() const {
    if (peer_closed_) return false;
    switch (state_) {
    case connection_state::head: return !output_full();
    case connection_state::body:
    case connection_state::chunked:
    case connection_state::lingering: return true;
    case connection_state::free:
    case connection_state::pending:
    case connection_state::streaming:
    case connection_state::closing: return false;
    }
    return false;
}

bool connection::output_full() const {
    return unsent_answers_ >= pool_.limits().max_unsent_answers || out_.pending_bytes() >= pool_.limits().max_unsent_bytes;
}

// One read; false when the connection is gone or cannot go on reading now.
bool connection::read_once() {
    char* dst;
    std::size_t want;
    if (!input_target(dst, want)) return false;
    io_result r = io_->read(std::span<char>(dst, want));
    switch (r.status) {
    case io_status::ok:
        on_received(r.bytes);
        return state_ != connection_state::free;
    case io_status::would_block:
        return false;
    case io_status::eof:
        on_peer_closed();
        return false;
    case io_status::failed:
        close();
        return false;
    }
    return false;
}

// Where the next bytes read go: the body buffer for a body read straight into it, else the input
// buffer (grown when needed). False when nothing sane remains (the connection was answered 431).
bool connection::input_target(char*& dst, std::size_t& want) {
    if (state_ == connection_state::body && body_place_ == body_place::own) {
        if (body_filled_ == body_capacity_ && !grow_body()) return false;
        dst = body_.get() + body_filled_;
        want = body_capacity_ - body_filled_;
        return true;
    }
    if (state_ == connection_state::lingering) in_size_ = in_start_ = in_parse_ = 0;
    if (!ensure_input_space()) {
        // a head this large was refused by the parser already; nothing sane remains
        answer_error(431, "header section too large");
        flush();
        return false;
    }
    dst = in_ + in_size_;
    want = in_capacity_ - in_size_;
    return true;
}

bool connection::ensure_input_space() {
    if (in_size_ < in_capacity_) return true;
    compact_input();
    if (in_size_ < in_capacity_) return true;
    std::size_t max = max_read_buffer_bytes(pool_.limits().head);
    if (in_capacity_ >= max) return false;
    std::size_t want = std::min(max, std::max<std::size_t>(in_capacity_ * 2, 4096));
    auto* p = static_cast<char*>(std::realloc(in_, want));
    if (!p) return false;
    in_ = p;
    in_capacity_ = want;
    return true;
}

// Moves what the current request still needs to the front of the buffer. A chunked body's head
// was kept aside (keep_head), so only its undecoded raw bytes stay. (Keeping the head in place
// here let a head that began late in the buffer, behind pipelined requests, fill it with raw
// chunk bytes: a valid chunked PUT answered 431, 2 in 207,411 in the soak.)
void connection::compact_input() {
    std::size_t keep_from;
    if (state_ == connection_state::chunked) keep_from = in_parse_;
    else if (state_ == connection_state::head) keep_from = in_start_;
    else return;
    if (keep_from == 0) return;
    std::memmove(in_, in_ + keep_from, in_size_ - keep_from);
    in_size_ -= keep_from;
    in_parse_ -= keep_from;
    in_start_ -= std::min(in_start_, keep_from);
}

void connection::on_received(std::size_t n) {
    if (state_ == connection_state::lingering) return;
    if (state_ == connection_state::body && body_place_ == body_place::own) {
        body_filled_ += n;
        body_progress(n);
    } else {
        // a head must arrive in full within the idle timeout of its first byte; bodies may take
        // longer as long as they keep moving at the rate floor
        if (in_size_ == in_start_ && state_ == connection_state::head) touch();
        if (state_ == connection_state::chunked) body_progress(n);
        in_size_ += n;
    }
    process_input();
}

void connection::on_peer_closed() {
    peer_closed_ = true;
    if (state_ == connection_state::pending || state_ == connection_state::streaming) return;  // answer, then close
    if (!out_.empty()) {
        state_ = connection_state::closing;
        return;
    }
    close();
}

void connection::process_input() {
    while (state_ != connection_state::free) {
        switch (state_) {
        case connection_state::head:
            if (in_size_ == in_start_) {
                if (out_.empty()) out_.shrink(pool_.limits().keep_output_bytes);
                return;
            }
            if (output_full()) {
                input_paused_ = true;   // pump() resumes once the answers drain
                bump(pool_.stats().reads_paused);
                return;
            }
            if (!parse_head()) return;
            break;
        case connection_state::body:
            if (body_place_ == body_place::own && body_filled_ < body_size_) return;
            dispatch();
            break;
        case connection_state::chunked:
            if (!decode_chunked()) return;
            dispatch();
            break;
        case connection_state::free:
        case connection_state::pending:
        case connection_state::streaming:
        case connection_state::closing:
        case connection_state::lingering:
            return;
        }
    }
}

// Decodes what the input holds of a chunked body; true when the body is complete.
bool connection::decode_chunked() {
    std::uint64_t before = body_size_;
    auto r = chunked_.decode(std::string_view(in_ + in_parse_, in_size_ - in_parse_), take_chunk, this);
    in_parse_ += r.consumed;
    if (body_size_ > before && !reserve_body(body_size_ - before)) {
        answer_error(503, "body budget exhausted");
        return false;
    }
    if (r.state == chunked_decoder::status::error) {
        answer_error(r.http_status, r.reason);
        return false;
    }
    if (r.state == chunked_decoder::status::need_more) {
        compact_input();
        return false;
    }
    body_filled_ = body_size_;
    return true;
}

void connection::take_chunk(void* self, const char* data, std::size_t size) {
    auto* c = static_cast<connection*>(self);
    if (c->body_size_ + size > c->body_capacity_) {
        std::uint64_t cap = std::max<std::uint64_t>(c->body_capacity_ * 2, c->body_size_ + size);
        cap = std::max<std::uint64_t>(cap, 4096);
        auto grown = std::make_unique_for_overwrite<char[]>(cap);
        if (c->body_size_) std::memcpy(grown.get(), c->body_.get(), c->body_size_);
        c->body_ = std::move(grown);
        c->body_capacity_ = cap;
    }
    std::memcpy(c->body_.get() + c->body_size_, data, size);
    c->body_size_ += size;
}

connection_header connection::connection_for(const request_head& h) const {
    if (ending_ != ending::keep_alive) return connection_header::close;
    return h.version_minor == 0 ? connection_header::keep_alive : connection_header::none;
}

// Parses the head at in_start_; false when more input is needed or the connection is done.
bool connection::parse_head() {
    parse_result r = parser_.parse(std::string_view(in_ + in_start_, in_size_ - in_start_), head_, pool_.fields());
    if (r.outcome == parse_outcome::incomplete) {
        if (in_start_ > 0 && in_size_ == in_capacity_) compact_input();
        return false;
    }
    if (r.outcome == parse_outcome::error) {
        answer_error(r.status, r.reason);
        return false;
    }
    request_started_ = pool_.now();
    bool client_closes = head_.version_minor == 0 ? head_.connection != connection_option::keep_alive
                                                  : head_.connection == connection_option::close;
    if (pool_.shutting_down() && ending_ == ending::keep_alive) ending_ = ending::linger_then_close;
    if (client_closes && ending_ == ending::keep_alive) ending_ = ending::close_at_once;  // confirmed once answered
    in_parse_ = in_start_ + head_.head_bytes;
    if (!check_head()) return false;
    if (!admit()) return state_ == connection_state::head;   // refused: on to the next request, or closing
    begin_body();
    return state_ == connection_state::head || state_ == connection_state::body || state_ == connection_state::chunked;
}

bool connection::check_head() {
    if (!valid_target_form(head_)) {
        answer_error(400, "malformed request target");
        return false;
    }
    if (head_.expect_unsupported) {
        answer_error(417, "unsupported expectation");
        return false;
    }
    if (!head_.chunked && !head_.has_content_length && head_.verb == method::put) {
        answer_error(411, "length required");
        return false;
    }
    if (head_.has_content_length && head_.content_length > pool_.limits().max_body_bytes) {
        answer_error(413, "body too large");
        return false;
    }
    return true;
}

bool connection::announces_body() const {
    return head_.chunked || (head_.has_content_length && head_.content_length > 0);
}

// Asks the handler whether the request may go on (request_handler::admit): its head is complete
// and valid, none of its body is buffered or charged yet, and no earlier request of this connection
// waits for an answer. A refusal is the request's whole answer; true when admitted.
bool connection::admit() {
    const bool has_body = announces_body();
    const connection_header ch = has_body ? connection_header::close : connection_for(head_);
    response res(out_, pool_.head_lines(ch), ch, head_.verb == method::head);
    handed_request_ = true;
    const admission a = pool_.handler().admit(head_, res, ticket());
    turn_class_ = a.turn_class;
    if (a.admitted) {
        PERCORE_DEBUG_ASSERT(res.status() == 0);   // an admitted request is answered by handle()
        return true;
    }
    PERCORE_DEBUG_ASSERT(res.status() != 0);
    if (has_body) {
        ending_ = ending::linger_then_close;   // its body is never read: the linger drops it
    } else {
        in_start_ = in_parse_;
        parser_.reset();
        if (ending_ == ending::close_at_once && in_parse_ != in_size_) ending_ = ending::linger_then_close;
    }
    answered(head_.verb, res.status());
    return false;
}

void connection::begin_body() {
    body_.reset();
    body_size_ = body_filled_ = body_capacity_ = 0;
    if (!announces_body()) {
        body_place_ = body_place::input;
        state_ = connection_state::body;
        dispatch();
        return;
    }
    std::size_t buffered = in_size_ - in_parse_;
    bool all_buffered = !head_.chunked && buffered >= head_.content_length;
    if (head_.expect_continue && head_.version_minor >= 1 && !all_buffered) {
        out_.append(status_line(100));
        out_.append("\r\n");
        flush();
        if (state_ == connection_state::free) return;
    }
    if (head_.chunked) {
        chunked_limits limits;
        limits.max_body_bytes = pool_.limits().max_body_bytes;
        chunked_ = chunked_decoder(limits);
        state_ = connection_state::chunked;
        begin_body_clock();
        body_place_ = body_place::own;
        keep_head();
        return;
    }
    begin_sized_body();
}

// A Content-Length body: read in place when it is all buffered, else straight into its own buffer.
// Admitted when it fits beside what other bodies hold now. Its buffer grows as the bytes arrive
// (doubling, from body_first_buffer_bytes), and the budget is charged by what is allocated: bodies
// announced but not sent hold next to nothing (four tricklers announcing 16 MiB each held a
// whole 64 MiB budget), and what the budget counts is what the shard's memory holds.
bool connection::begin_sized_body() {
    std::size_t buffered = in_size_ - in_parse_;
    bool all_buffered = buffered >= head_.content_length;
    std::uint64_t first = all_buffered ? head_.content_length
                                       : std::min<std::uint64_t>(head_.content_length,
                                                                 std::max<std::uint64_t>(buffered, body_first_buffer_bytes));
    if (!pool_.body_fits(head_.content_length, turn_class_) || !reserve_body(first)) {
        answer_error(503, "body budget exhausted");
        return false;
    }
    body_size_ = head_.content_length;
    state_ = connection_state::body;
    if (all_buffered) {
        body_place_ = body_place::input;
        return true;
    }
    body_place_ = body_place::own;
    keep_head();
    body_ = std::make_unique_for_overwrite<char[]>(first);
    body_capacity_ = first;
    std::memcpy(body_.get(), in_ + in_parse_, buffered);
    body_filled_ = buffered;
    in_size_ = in_parse_;  // the rest of the body is read straight into body_
    begin_body_clock();
    return true;
}

// Doubles a Content-Length body's buffer (up to its length), charging the budget for the growth;
// false when the budget has no room (the body is answered 503).
bool connection::grow_body() {
    std::uint64_t grown = std::min<std::uint64_t>(body_size_, body_capacity_ * 2);
    if (!reserve_body(grown - body_capacity_)) {
        answer_error(503, "body budget exhausted");
        flush();
        return false;
    }
    auto bigger = std::make_unique_for_overwrite<char[]>(grown);
    std::memcpy(bigger.get(), body_.get(), body_filled_);
    body_ = std::move(bigger);
    body_capacity_ = grown;
    return true;
}

void connection::keep_head() {
    const char* base = in_ + in_start_;
    const std::size_t n = head_.head_bytes;
    kept_head_.assign(base, base + n);
    const char* moved = kept_head_.data();
    auto rebase = [&](std::string_view v) {
        if (v.empty() || v.data() < base || v.data() >= base + n) return v;
        return std::string_view(moved + (v.data() - base), v.size());
    };
    head_.method_text = rebase(head_.method_text);
    head_.target = rebase(head_.target);
    head_.host = rebase(head_.host);
    kept_fields_.assign(head_.fields.begin(), head_.fields.end());
    for (auto& f : kept_fields_) {
        f.name = rebase(f.name);
        f.value = rebase(f.value);
    }
    head_.fields = std::span<const header_field>(kept_fields_);
}

void connection::dispatch() {
    std::string_view body_view;
    std::uint64_t body_bytes_in_input = 0;
    if (body_place_ == body_place::own) {
        body_view = std::string_view(body_.get(), body_size_);
    } else {
        body_view = std::string_view(in_ + in_parse_, body_size_);
        body_bytes_in_input = body_size_;
    }
    connection_header ch = connection_for(head_);
    request req(head_, body_view, body_ ? &body_ : nullptr);
    response res(out_, pool_.head_lines(ch), ch, head_.verb == method::head);
    auto result = pool_.handler().handle(req, res, answer_ticket{index_, generation_});
    in_parse_ += body_bytes_in_input;
    in_start_ = in_parse_;
    parser_.reset();
    body_.reset();
    body_capacity_ = 0;
    body_place_ = body_place::none;
    if (ending_ == ending::close_at_once && in_parse_ != in_size_) ending_ = ending::linger_then_close;
    if (result == request_handler::result::pending) {
        pending_verb_ = head_.verb;
        pending_connection_ = ch;
        pending_http10_ = head_.version_minor == 0;
        state_ = connection_state::pending;
        return;
    }
    finish_request(res.status());
}

void connection::finish_request(int status) { answered(head_.verb, status); }

// The tail of every answer to a parsed request: counted, its body's budget given back, and the
// connection ready for the next head (or closing).
void connection::answered(method verb, int status) {
    report_answer(verb, status);
    next_request();
}

// A stream is reported when its head is sent: its latency is the time to its first byte.
void connection::report_answer(method verb, int status) {
    pool_.handler().answered(verb, status, static_cast<std::uint64_t>((pool_.now() - request_started_).count()));
}

void connection::next_request() {
    ++unsent_answers_;
    release_body_budget();
    state_ = ending_ == ending::keep_alive ? connection_state::head : connection_state::closing;
    touch();
}

void connection::complete(const simple_answer& answer) {
    PERCORE_REQUIRES(state_ == connection_state::pending);
    response res(out_, pool_.head_lines(pending_connection_), pending_connection_, pending_verb_ == method::head);
    if (answer.error) {
        if (answer.has_etag) res.error_with_etag(answer.status, answer.error, answer.etag);
        else res.error(answer.status, answer.error);
    } else if (!answer.body.empty()) {
        res.json(answer.status, answer.body);
    } else {
        res.start(answer.status);
        if (answer.has_etag) res.etag(answer.etag);
        if (answer.status != 204 && answer.status != 304) res.content_length(0);
        res.end_head();
    }
    answered(pending_verb_, answer.status);
    if (state_ == connection_state::head) process_input();
    if (state_ == connection_state::free) return;
    pump();
}

// The head of a streamed answer: chunked to HTTP/1.1 clients; to HTTP/1.0 ones (no chunked
// coding) Connection: close, the body's end being the connection's.
stream_status connection::stream_begin(int status, std::string_view content_type, std::string_view extra_name,
                                       std::string_view extra_value) {
    PERCORE_REQUIRES(state_ == connection_state::pending);
    PERCORE_REQUIRES(status >= 200 && status <= 599 && status != 204 && status != 304);
    PERCORE_REQUIRES(!content_type.empty() && content_type.find_first_of("\r\n") == std::string_view::npos);
    PERCORE_REQUIRES(extra_name.find_first_of("\r\n:") == std::string_view::npos &&
                     extra_value.find_first_of("\r\n") == std::string_view::npos);
    if (pending_http10_ && ending_ == ending::keep_alive) ending_ = ending::linger_then_close;
    const connection_header ch = ending_ == ending::keep_alive ? pending_connection_ : connection_header::close;
    stream_head_only_ = pending_verb_ == method::head;
    stream_chunked_ = !pending_http10_;
    response res(out_, pool_.head_lines(ch), ch, stream_head_only_);
    res.start(status);
    res.header("Content-Type", content_type);
    res.header("Cache-Control", "no-store");
    if (!extra_name.empty()) res.header(extra_name, extra_value);
    if (stream_chunked_) res.header("Transfer-Encoding", "chunked");
    res.end_head();
    report_answer(pending_verb_, status);
    release_body_budget();   // the request is done with; a stream may last hours
    state_ = connection_state::streaming;
    touch();
    if (pool_.shutting_down()) {
        stop_keep_alive();   // a stream begun while the pool stops ends at once
        return stream_status::gone;
    }
    flush();
    return state_ == connection_state::streaming ? stream_status::sent : stream_status::gone;
}

// One chunk (raw bytes to HTTP/1.0), unless what would then wait unsent passes the bound: then the
// connection is cut off, since a stream cannot be paused the way reading answers is.
stream_status connection::stream_write(std::string_view bytes) {
    PERCORE_REQUIRES(state_ == connection_state::streaming);
    if (bytes.empty()) return stream_status::sent;   // never the last chunk
    touch();   // the handler wrote: a heartbeat
    if (stream_head_only_) return stream_status::sent;
    char line[24];
    char* const line_end = line + sizeof line;
    char* const line_first = stream_chunked_ ? format_chunk_size_line(bytes.size(), line_end) : line_end;
    const std::size_t framing = stream_chunked_ ? static_cast<std::size_t>(line_end - line_first) + 2 : 0;
    if (out_.pending_bytes() + bytes.size() + framing > pool_.limits().max_stream_unsent_bytes) {
        bump(pool_.stats().streams_cut_off);
        close();
        return stream_status::cut_off;
    }
    out_.append(std::string_view(line_first, static_cast<std::size_t>(line_end - line_first)));
    out_.append(bytes);
    if (stream_chunked_) out_.append("\r\n");
    flush();
    return state_ == connection_state::streaming ? stream_status::sent : stream_status::gone;
}

// A chunk's framing at most: its size in up to 16 hex digits and CRLF, then CRLF after its bytes.
constexpr std::size_t max_chunk_framing_bytes = 16 + 2 + 2;

std::size_t connection::stream_room() const {
    if (state_ != connection_state::streaming) return 0;
    const std::size_t used = out_.pending_bytes() + max_chunk_framing_bytes;
    const std::size_t bound = pool_.limits().max_stream_unsent_bytes;
    return used >= bound ? 0 : bound - used;
}

void connection::stream_end() {
    PERCORE_REQUIRES(state_ == connection_state::streaming);
    finish_stream();
    if (state_ == connection_state::head) process_input();
    if (state_ == connection_state::free) return;
    pump();
}

// The last chunk (nothing for HTTP/1.0: closing ends its body); then on as after any answer.
void connection::finish_stream() {
    if (stream_chunked_ && !stream_head_only_) out_.append("0\r\n\r\n");
    next_request();
}

void connection::answer_error(int status, const char* reason) {
    bool parsed = state_ != connection_state::head;
    response res(out_, pool_.date_line(), connection_header::close, parsed && head_.verb == method::head);
    res.error(status, reason);
    ending_ = ending::linger_then_close;
    pool_.handler().answered(parsed ? head_.verb : method::other, status, 0);
    ++unsent_answers_;
    release_body_budget();
    body_place_ = body_place::none;
    state_ = connection_state::closing;
}

void connection::flush() {
    if (state_ == connection_state::free) return;
    if (ending_ == ending::keep_alive && !out_.empty()) io_->set_low_latency();
    if (!send_output()) return;
    if (peer_closed_ && state_ == connection_state::head) {
        close();  // nothing more can arrive
        return;
    }
    if (state_ == connection_state::closing) {
        if (peer_closed_ || ending_ == ending::close_at_once) {
            io_->end_stream();
            close();
            return;
        }
        start_linger();
    }
}

// The send loop, for every transport: memory pieces gathered into one write, file pieces from
// the file. True when everything left; false when waiting for the transport (or closed).
bool connection::send_output() {
    while (!out_.empty() || io_->pending_output()) {
        io_result r;
        int file;
        std::uint64_t file_offset;
        std::size_t file_bytes;
        if (out_.empty()) {
            r = io_->flush();
        } else if (out_.front_file(file, file_offset, file_bytes)) {
            r = io_->write_file(file, file_offset, file_bytes);
        } else {
            iovec iov[max_iovecs];
            std::size_t count = out_.gather(iov, max_iovecs);
            r = more_follows(iov, count) ? io_->write_more(std::span<const iovec>(iov, count))
                                         : io_->write(std::span<const iovec>(iov, count));
        }
        if (r.status == io_status::ok) {
            if (r.bytes) {
                out_.consume(r.bytes);
                touch();
            }
            continue;
        }
        if (r.status != io_status::would_block) close();
        return false;
    }
    unsent_answers_ = 0;
    return true;
}

// Whether more follows the gathered pieces at once: the connection's last answer (its FIN comes
// next: sent with the answer's last segment instead of in a packet of its own) or a file's bytes
// (a head goes out with the file's first segment).
bool connection::more_follows(const iovec* iov, std::size_t count) const {
    if (state_ == connection_state::closing) return true;
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < count; ++i) bytes += iov[i].iov_len;
    return bytes < out_.pending_bytes();
}

// After a closing answer, read and drop what the client still sends so that closing does not
// reset the connection before it has read the answer (RFC 9112 §9.6).
void connection::start_linger() {
    io_->shutdown_write();
    state_ = connection_state::lingering;
    deadline_ = pool_.now() + pool_.limits().linger_timeout;
    in_size_ = in_start_ = in_parse_ = 0;
}

void connection::expire() {
    switch (state_) {
    case connection_state::streaming:
        // Everything written was sent: the stream waits for its handler, whose heartbeats say when
        // it is alive (SPEC §8's default heartbeat, 30 s, is past the default idle timeout, 10 s);
        // a peer that is gone is found at the next write. Bytes left unsent for a whole idle
        // timeout: a client that does not read, closed.
        if (out_.empty()) {
            touch();
            return;
        }
        close();
        return;
    case connection_state::lingering:
    case connection_state::closing:
        close();
        return;
    case connection_state::head:
        if (!out_.empty()) {
            close();   // a client that does not read its answers
        } else if (in_size_ > in_start_) {
            answer_error(408, "request timeout");
            flush();
        } else if (!idle_grace_given_) {
            // idle: the Keep-Alive timeout its answers advertised is kept with a margin (limits.hpp)
            idle_grace_given_ = true;
            deadline_ += pool_.limits().keep_alive_grace;
        } else {
            close();
        }
        return;
    case connection_state::body:
    case connection_state::chunked:
        answer_error(408, "request timeout");
        flush();
        return;
    case connection_state::free:
    case connection_state::pending:
        return;
    }
}

void connection::stop_keep_alive() {
    if (ending_ == ending::keep_alive) ending_ = ending::linger_then_close;
    if (state_ == connection_state::streaming) {
        finish_stream();   // closing: the connection closes once the last chunk is sent
        flush();
        return;
    }
    if (idle()) close();
}

// A body is charged to the class of the request it belongs to: admission set the class before the
// body's first byte, and the next admission comes only after the body's budget was given back.
bool connection::reserve_body(std::uint64_t bytes) {
    if (body_reserved_ == 0) body_class_ = turn_class_;
    if (!pool_.reserve_body(bytes, body_class_)) return false;
    body_reserved_ += bytes;
    return true;
}

void connection::release_body_budget() {
    if (body_reserved_ == 0) return;
    pool_.release_body(body_reserved_, body_class_);
    body_reserved_ = 0;
}

}  // namespace percore::net
