#include "net/client_connection.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <charconv>

#include "shards/runtime/check.hpp"

namespace percore::net {

namespace {

bool is_token(std::string_view s) {
    constexpr std::string_view specials = "!#$%&'*+-.^_`|~";
    return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
        const auto u = static_cast<unsigned char>(c);
        return (u >= '0' && u <= '9') || ((u | 0x20) >= 'a' && (u | 0x20) <= 'z') ||
               specials.find(c) != std::string_view::npos;
    });
}

// No byte that could end a line or a field early (request splitting).
bool is_field_text(std::string_view s) {
    return std::none_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

bool framing_field(std::string_view name) {
    return iequals(name, "host") || iequals(name, "content-length") || iequals(name, "transfer-encoding") ||
           iequals(name, "connection");
}

bool valid_request(const client_request& r) {
    if (!is_token(r.method) || r.target.empty() || !is_field_text(r.target) ||
        r.target.find(' ') != std::string_view::npos || !is_field_text(r.host)) {
        return false;
    }
    return std::all_of(r.headers.begin(), r.headers.end(), [](const header_field& f) {
        return is_token(f.name) && is_field_text(f.value) && !framing_field(f.name);
    });
}

void format_head(const client_request& r, std::string& out) {
    char length[24];
    const auto [end, ec] = std::to_chars(length, length + sizeof length, r.body.size());
    (void)ec;
    out.clear();
    out.append(r.method).append(" ").append(r.target).append(" HTTP/1.1\r\nHost: ").append(r.host).append("\r\n");
    for (const header_field& f : r.headers) out.append(f.name).append(": ").append(f.value).append("\r\n");
    out.append("Content-Length: ").append(length, end).append("\r\n\r\n");
}

client_error error_of(response_error e) {
    switch (e) {
    case response_error::too_large: return client_error::too_large;
    case response_error::truncated: return client_error::closed_early;
    case response_error::none:
    case response_error::malformed: break;
    }
    return client_error::malformed;
}

}  // namespace

const char* to_string(client_error e) {
    switch (e) {
    case client_error::none: return "none";
    case client_error::connect_failed: return "connect_failed";
    case client_error::tls_failed: return "tls_failed";
    case client_error::timed_out: return "timed_out";
    case client_error::closed_early: return "closed_early";
    case client_error::malformed: return "malformed";
    case client_error::too_large: return "too_large";
    }
    return "?";
}

client_connection::client_connection(client_transport& transport, client_events& events, client_limits limits)
    : transport_(transport),
      events_(events),
      limits_(limits),
      parser_(limits),
      read_buffer_(new char[limits.read_buffer_bytes]) {}

client_connection::~client_connection() {
    if (transport_.is_open()) transport_.close();
}

void client_connection::send(const client_request& request, std::int64_t deadline_ns) {
    PERCORE_REQUIRES(!busy());
    PERCORE_REQUIRES(valid_request(request));
    format_head(request, head_);
    body_ = request.body;
    sent_ = 0;
    deadline_ns_ = deadline_ns;
    parser_.reset();
    resent_ = write_failed_ = false;
    reused_ = phase_ == phase::idle;
    if (reused_) {
        phase_ = phase::exchanging;
        transport_.post_ready();
    } else {
        start_open();
    }
}

void client_connection::start_open() {
    if (transport_.is_open()) transport_.close();
    ++opens_;
    phase_ = phase::connecting;
    transport_.bind_events(this);
    transport_.open();
}

void client_connection::tick(std::int64_t now_ns) {
    if (!busy() || now_ns < deadline_ns_) return;
    fail(client_error::timed_out,
         phase_ == phase::connecting ? "not connected before the deadline" : "no complete response before the deadline");
}

void client_connection::close() {
    PERCORE_REQUIRES(!busy());
    close_transport();
}

void client_connection::on_ready() {
    switch (phase_) {
    case phase::closed:
        return;
    case phase::idle:
        drain_idle();
        return;
    case phase::connecting:
        if (opened()) exchange();
        return;
    case phase::exchanging:
        exchange();
        return;
    }
}

bool client_connection::opened() {
    switch (transport_.open_progress()) {
    case client_transport::open_state::connecting:
        return false;
    case client_transport::open_state::open:
        phase_ = phase::exchanging;
        return true;
    case client_transport::open_state::connect_failed:
        fail(client_error::connect_failed, "connect failed", transport_.open_error());
        return false;
    case client_transport::open_state::tls_failed:
        fail(client_error::tls_failed, "tls handshake failed");
        return false;
    }
    return false;
}

// Writes what the transport takes, then reads whatever has come: a receiver may answer (and close)
// before it has read the whole request.
void client_connection::exchange() {
    write_request();
    read_response();
}

void client_connection::write_request() {
    const std::size_t total = head_.size() + body_.size();
    while (sent_ < total && !write_failed_) {
        iovec pieces[2];
        std::size_t n = 0;
        if (sent_ < head_.size()) pieces[n++] = {head_.data() + sent_, head_.size() - sent_};
        const std::size_t body_sent = sent_ > head_.size() ? sent_ - head_.size() : 0;
        if (body_sent < body_.size()) pieces[n++] = {const_cast<char*>(body_.data()) + body_sent, body_.size() - body_sent};
        const io_result r = transport_.write(std::span<const iovec>(pieces, n));
        if (r.status == io_status::ok) {
            sent_ += r.bytes;
        } else if (r.status == io_status::would_block) {
            return;   // the transport's on_ready() brings the next try
        } else {
            write_failed_ = true;   // reset or closed: an early answer may still be readable
        }
    }
    if (!write_failed_ && transport_.pending_output()) {
        const io_result r = transport_.flush();
        if (r.status == io_status::failed || r.status == io_status::eof) write_failed_ = true;
    }
}

void client_connection::read_response() {
    while (phase_ == phase::exchanging && transport_.readable()) {
        const io_result r = transport_.read(std::span<char>(read_buffer_.get(), limits_.read_buffer_bytes));
        switch (r.status) {
        case io_status::ok:
            if (feed(r.bytes)) return;
            break;
        case io_status::would_block:
            return;
        case io_status::eof:
            peer_closed(true);
            return;
        case io_status::failed:
            peer_closed(false);
            return;
        }
    }
}

// True when the exchange ended.
bool client_connection::feed(std::size_t bytes) {
    const response_parser::result r = parser_.feed(std::string_view(read_buffer_.get(), bytes));
    switch (r.outcome) {
    case response_parser::state::need_more:
        return false;
    case response_parser::state::done:
        response_done(r.consumed < bytes);
        return true;
    case response_parser::state::error:
        break;
    }
    fail(error_of(r.error), r.reason);
    return true;
}

// The peer closed (clean: an orderly EOF; else a reset or a failed read).
void client_connection::peer_closed(bool clean) {
    if (reused_ && !resent_ && parser_.consumed_bytes() == 0) {
        // A kept connection the receiver closed as the request went out: once more, on a new one.
        resent_ = true;
        reused_ = false;
        sent_ = 0;
        write_failed_ = false;
        parser_.reset();
        start_open();
        return;
    }
    const response_parser::result r = parser_.finish();
    if (clean && r.outcome == response_parser::state::done) {
        response_done(false);
        return;
    }
    if (!clean && r.outcome != response_parser::state::error) {
        fail(client_error::closed_early, "connection reset before the response's end");
        return;
    }
    fail(error_of(r.error), r.reason);
}

// Anything a kept, idle connection reads — the receiver's close, or bytes nobody asked for — ends it.
void client_connection::drain_idle() {
    while (transport_.readable()) {
        const io_result r = transport_.read(std::span<char>(read_buffer_.get(), limits_.read_buffer_bytes));
        if (r.status == io_status::would_block) return;
        close_transport();
        return;
    }
}

void client_connection::response_done(bool stray_bytes) {
    const bool keep = parser_.keep_alive() && !stray_bytes && sent_ == head_.size() + body_.size() && !write_failed_ &&
                      !transport_.pending_output();
    if (keep) {
        phase_ = phase::idle;
    } else {
        close_transport();
    }
    const response_message& m = parser_.message();
    client_outcome outcome;
    outcome.status = m.status;
    outcome.fields = m.fields;
    outcome.body = m.body;
    outcome.body_bytes = m.body_bytes;
    report(outcome);
}

void client_connection::fail(client_error e, const char* text, int system_error) {
    close_transport();
    client_outcome outcome;
    outcome.error = e;
    outcome.text = text;
    outcome.system_error = system_error;
    outcome.status = parser_.message().status;
    report(outcome);
}

void client_connection::close_transport() {
    if (transport_.is_open()) transport_.close();
    phase_ = phase::closed;
}

void client_connection::report(client_outcome& outcome) {
    outcome.reused = reused_;
    events_.on_exchange_done(outcome);
}

}  // namespace percore::net
