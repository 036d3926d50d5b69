#include "net/response_parser.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "net/request_parser.hpp"   // iequals

namespace percore::net {

namespace {

// tchar (RFC 9110 §5.6.2): the bytes of a field name.
bool is_token_byte(char c) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= '0' && u <= '9') || ((u | 0x20) >= 'a' && (u | 0x20) <= 'z')) return true;
    return u != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// field-value and reason-phrase bytes: HT, SP, VCHAR, obs-text.
bool is_text(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// One decimal number (a Content-Length); false when empty, not digits or past 2^64.
bool parse_decimal(std::string_view s, std::uint64_t& out) {
    if (s.empty()) return false;
    std::uint64_t n = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        const auto d = static_cast<std::uint64_t>(c - '0');
        if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return false;
        n = n * 10 + d;
    }
    out = n;
    return true;
}

// Calls f(element) for each trimmed element of a comma-separated list.
template <class F>
void for_each_element(std::string_view list, F&& f) {
    for (;;) {
        const std::size_t comma = list.find(',');
        f(trim(list.substr(0, comma)));
        if (comma == std::string_view::npos) return;
        list.remove_prefix(comma + 1);
    }
}

// The line starting at `at` in `h` without its LF (and CR); `next` is where the next line starts.
std::string_view line_at(std::string_view h, std::size_t at, std::size_t& next) {
    std::size_t lf = h.find('\n', at);
    next = lf + 1;
    if (lf > at && h[lf - 1] == '\r') --lf;
    return h.substr(at, lf - at);
}

constexpr std::string_view http_prefix = "HTTP/";

}  // namespace

const char* to_string(response_error e) {
    switch (e) {
    case response_error::none: return "none";
    case response_error::malformed: return "malformed";
    case response_error::too_large: return "too_large";
    case response_error::truncated: return "truncated";
    }
    return "?";
}

const response_field* response_message::find(std::string_view name) const {
    for (const response_field& f : fields)
        if (iequals(f.name, name)) return &f;
    return nullptr;
}

response_parser::response_parser(client_limits limits)
    : limits_(limits),
      chunks_(chunked_limits{limits.max_response_bytes, limits.max_chunk_line_bytes, limits.max_trailer_bytes}) {}

void response_parser::reset() {
    phase_ = phase::head;
    head_.clear();
    searched_ = 0;
    remaining_ = 0;
    total_ = 0;
    keep_alive_ = has_length_ = chunked_ = close_delimited_ = false;
    error_ = response_error::none;
    error_reason_ = "";
    message_ = response_message{};
    chunks_.reset();
}

response_parser::result response_parser::fail(std::size_t consumed, response_error e, const char* reason) {
    phase_ = phase::failed;
    error_ = e;
    error_reason_ = reason;
    return {state::error, consumed, e, reason};
}

void response_parser::keep(const char* data, std::size_t size) {
    message_.body_bytes += size;
    if (sink_.write) {
        sink_.write(sink_.context, message_.status, std::string_view(data, size));
        return;
    }
    const std::size_t room = limits_.max_kept_body_bytes - message_.body.size();
    message_.body.append(data, std::min(room, size));
}

void response_parser::keep_sink(void* self, const char* data, std::size_t size) {
    static_cast<response_parser*>(self)->keep(data, size);
}

response_parser::result response_parser::feed(std::string_view in) {
    if (phase_ == phase::done) return {state::done, 0};
    if (phase_ == phase::failed) return {state::error, 0, error_, error_reason_};
    // Never read past the bound: what lies beyond it is not looked at.
    const std::uint64_t allowed = limits_.max_response_bytes - total_;
    const std::string_view part = in.size() > allowed ? in.substr(0, static_cast<std::size_t>(allowed)) : in;
    std::size_t used = 0;
    do {
        const std::string_view rest = part.substr(used);
        const result r = phase_ == phase::head ? feed_head(rest) : feed_body(rest);
        used += r.consumed;
        if (r.outcome != state::need_more) return {r.outcome, used, r.error, r.reason};
    } while (used < part.size());
    if (part.size() < in.size()) return fail(used, response_error::too_large, "response over max_response_bytes");
    return {state::need_more, used};
}

response_parser::result response_parser::feed_head(std::string_view in) {
    const std::size_t old = head_.size();
    const std::size_t take = std::min(in.size(), limits_.max_head_bytes - old);
    head_.append(in.data(), take);
    // Not HTTP at all (a TLS alert, an SSH banner): known from the first bytes, whatever follows.
    const std::size_t prefix = std::min(head_.size(), http_prefix.size());
    if (head_.compare(0, prefix, http_prefix.substr(0, prefix)) != 0) {
        return fail(take, response_error::malformed, "not an http response");
    }
    std::size_t end = 0;
    for (std::size_t pos = searched_; pos < head_.size();) {
        const std::size_t lf = head_.find('\n', pos);
        if (lf == std::string::npos) break;
        if ((lf >= 1 && head_[lf - 1] == '\n') || (lf >= 2 && head_[lf - 1] == '\r' && head_[lf - 2] == '\n')) {
            end = lf + 1;
            break;
        }
        pos = lf + 1;
    }
    if (end == 0) {
        searched_ = head_.size();
        if (head_.size() == limits_.max_head_bytes) return fail(take, response_error::too_large, "response head too large");
        total_ += take;
        return {state::need_more, take};
    }
    const std::size_t consumed = end - old;
    head_.resize(end);
    total_ += consumed;
    result r = parse_head(end);
    r.consumed = consumed;
    return r;
}

namespace {

// HTTP/1.x SP 3DIGIT [SP reason-phrase]; the reason may be empty or (leniently) missing. The status,
// or 0 with `why` set.
int parse_status_line(std::string_view line, std::string_view& reason, const char*& why) {
    if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[7] < '0' || line[7] > '9' || line[8] != ' ' ||
        (line.size() > 12 && line[12] != ' ')) {
        why = "malformed status line";
        return 0;
    }
    int status = 0;
    for (std::size_t i = 9; i < 12; ++i) {
        if (line[i] < '0' || line[i] > '9') {
            why = "malformed status code";
            return 0;
        }
        status = status * 10 + (line[i] - '0');
    }
    if (status < 100) {
        why = "malformed status code";
        return 0;
    }
    reason = line.size() > 12 ? line.substr(13) : std::string_view{};
    if (!std::all_of(reason.begin(), reason.end(), is_text)) {
        why = "malformed reason phrase";
        return 0;
    }
    return status;
}

}  // namespace

const char* response_parser::parse_fields(std::string_view h, std::size_t at, std::vector<response_field>& fields,
                                          head_framing& framing, response_error& error) const {
    error = response_error::malformed;
    for (std::size_t next = at; at < h.size(); at = next) {
        const std::string_view line = line_at(h, at, next);
        if (line.empty()) break;   // the empty line that ends the head
        if (line[0] == ' ' || line[0] == '\t') return "obsolete line folding";
        std::size_t colon = 0;
        while (colon < line.size() && is_token_byte(line[colon])) ++colon;
        if (colon == 0 || colon == line.size() || line[colon] != ':') return "malformed header field";
        const std::string_view name = line.substr(0, colon);
        const std::string_view value = trim(line.substr(colon + 1));
        if (!std::all_of(value.begin(), value.end(), is_text)) return "invalid header value";
        if (fields.size() == limits_.max_header_fields) {
            error = response_error::too_large;
            return "too many header fields";
        }
        fields.push_back({std::string(name), std::string(value)});
        if (iequals(name, "content-length")) {
            std::uint64_t n = 0;
            if (!parse_decimal(value, n) || (framing.has_length && n != framing.length)) return "invalid content-length";
            framing.has_length = true;
            framing.length = n;
        } else if (iequals(name, "transfer-encoding")) {
            framing.te_seen = true;
            for_each_element(value, [&](std::string_view coding) { framing.te_chunked_last = iequals(coding, "chunked"); });
        } else if (iequals(name, "connection")) {
            for_each_element(value, [&](std::string_view option) { framing.close = framing.close || iequals(option, "close"); });
        }
    }
    return nullptr;
}

// The head's bytes are head_[0, head_end).
response_parser::result response_parser::parse_head(std::size_t head_end) {
    const std::string_view h(head_.data(), head_end);
    std::size_t next = 0;
    const std::string_view status_line = line_at(h, 0, next);
    std::string_view reason;
    const char* why = nullptr;
    const int status = parse_status_line(status_line, reason, why);
    if (status == 0) return fail(0, response_error::malformed, why);

    std::vector<response_field> fields;
    head_framing framing;
    response_error error = response_error::malformed;
    if (const char* bad = parse_fields(h, next, fields, framing, error)) return fail(0, error, bad);

    if (status < 200) {
        // 100 Continue, 102 Processing, 103 Early Hints: skipped; the final head follows.
        if (status == 101) return fail(0, response_error::malformed, "unexpected 101 switching protocols");
        ++message_.interim_heads;
        head_.clear();
        searched_ = 0;
        return {state::need_more, 0};
    }
    const int minor = status_line[7] - '0';
    if (framing.te_seen && (framing.has_length || minor == 0)) {
        return fail(0, response_error::malformed, "transfer-encoding with content-length or in http/1.0");
    }
    message_.status = status;
    message_.version_minor = minor > 0 ? 1 : 0;
    message_.reason.assign(reason);
    message_.fields = std::move(fields);
    keep_alive_ = minor > 0 && !framing.close;
    has_length_ = framing.has_length;
    remaining_ = framing.length;
    chunked_ = framing.te_seen && framing.te_chunked_last;
    close_delimited_ = framing.te_seen && !framing.te_chunked_last;
    return begin_body();
}

response_parser::result response_parser::begin_body() {
    head_.clear();
    head_.shrink_to_fit();
    if (message_.status == 204 || message_.status == 304) {
        phase_ = phase::done;
        return {state::done, 0};
    }
    if (chunked_) {
        chunks_.reset();
        phase_ = phase::chunked;
        return {state::need_more, 0};
    }
    if (has_length_ && !close_delimited_) {
        if (remaining_ > limits_.max_response_bytes - total_) {
            return fail(0, response_error::too_large, "content-length over max_response_bytes");
        }
        phase_ = remaining_ == 0 ? phase::done : phase::length;
        return {phase_ == phase::done ? state::done : state::need_more, 0};
    }
    keep_alive_ = false;   // the close is the body's end
    phase_ = phase::until_close;
    return {state::need_more, 0};
}

response_parser::result response_parser::feed_body(std::string_view in) {
    switch (phase_) {
    case phase::length: {
        const std::size_t take = remaining_ < in.size() ? static_cast<std::size_t>(remaining_) : in.size();
        keep(in.data(), take);
        remaining_ -= take;
        total_ += take;
        if (remaining_ > 0) return {state::need_more, take};
        phase_ = phase::done;
        return {state::done, take};
    }
    case phase::chunked: {
        const chunked_decoder::result r = chunks_.decode(in, &keep_sink, this);
        total_ += r.consumed;
        if (r.state == chunked_decoder::status::need_more) return {state::need_more, r.consumed};
        if (r.state == chunked_decoder::status::done) {
            phase_ = phase::done;
            return {state::done, r.consumed};
        }
        return fail(r.consumed, r.http_status == 413 ? response_error::too_large : response_error::malformed, r.reason);
    }
    case phase::until_close:
        keep(in.data(), in.size());
        total_ += in.size();
        return {state::need_more, in.size()};
    case phase::head:
    case phase::done:
    case phase::failed:
        break;
    }
    return {state::need_more, 0};
}

response_parser::result response_parser::finish() {
    switch (phase_) {
    case phase::done:
        return {state::done, 0};
    case phase::failed:
        return {state::error, 0, error_, error_reason_};
    case phase::until_close:
        phase_ = phase::done;
        return {state::done, 0};
    case phase::head:
        if (total_ == 0 && head_.empty()) return fail(0, response_error::truncated, "closed before any response");
        return fail(0, response_error::truncated, "closed inside the response head");
    case phase::length:
    case phase::chunked:
        break;
    }
    return fail(0, response_error::truncated, "closed inside the response body");
}

}  // namespace percore::net
