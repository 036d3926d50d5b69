#include "net/chunked_decoder.hpp"

#include <limits>

#include "net/hex.hpp"

namespace percore::net {

namespace {

// Bytes allowed inside a chunk extension or a trailer line: HT, SP, VCHAR, obs-text.
bool is_text_byte(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
}

// tchar (RFC 9110 §5.6.2): the bytes of a trailer field name.
bool is_tchar(char c) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z')) return true;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        return true;
    default:
        return false;
    }
}

}  // namespace

void chunked_decoder::reset() {
    phase_ = phase::size;
    chunk_remaining_ = 0;
    body_bytes_ = 0;
    line_bytes_ = 0;
    trailer_bytes_ = 0;
    size_digits_ = false;
    trailer_colon_ = false;
    last_chunk_ = false;
    error_status_ = 0;
    error_reason_ = "";
}

chunked_decoder::result chunked_decoder::fail(std::size_t consumed, int http_status, const char* reason) {
    phase_ = phase::failed;
    error_status_ = http_status;
    error_reason_ = reason;
    return {status::error, consumed, http_status, reason};
}

void chunked_decoder::end_size_line() {
    line_bytes_ = 0;
    size_digits_ = false;
    if (chunk_remaining_ == 0) {
        last_chunk_ = true;
        phase_ = phase::trailer;
    } else {
        phase_ = phase::data;
    }
}

chunked_decoder::result chunked_decoder::decode(std::string_view in, data_sink sink, void* context) {
    if (phase_ == phase::done) return {status::done, 0, 0, ""};
    if (phase_ == phase::failed) return {status::error, 0, error_status_, error_reason_};

    const char* const data = in.data();
    const std::size_t n = in.size();
    std::size_t i = 0;
    while (i < n) {
        if (phase_ == phase::data) {
            const std::size_t available = n - i;
            const std::size_t take =
                chunk_remaining_ < available ? static_cast<std::size_t>(chunk_remaining_) : available;
            if (sink != nullptr) sink(context, data + i, take);
            i += take;
            chunk_remaining_ -= take;
            body_bytes_ += take;
            if (chunk_remaining_ == 0) phase_ = phase::data_cr;
            continue;
        }

        const char c = data[i++];
        switch (phase_) {
        case phase::size: {
            if (c == '\r' || c == '\n') {
                if (!size_digits_) return fail(i, 400, "malformed chunk size");
                if (c == '\r') {
                    phase_ = phase::size_lf;
                } else {
                    end_size_line();
                }
                break;
            }
            if (++line_bytes_ > limits_.max_chunk_line_bytes) return fail(i, 400, "chunk size line too long");
            const int digit = hex_digit_value(c);
            if (digit >= 0) {
                if (chunk_remaining_ > (std::numeric_limits<std::uint64_t>::max() >> 4)) {
                    return fail(i, 400, "chunk size overflow");
                }
                chunk_remaining_ = (chunk_remaining_ << 4) | static_cast<std::uint64_t>(digit);
                size_digits_ = true;
                if (chunk_remaining_ > limits_.max_body_bytes - body_bytes_) return fail(i, 413, "body too large");
            } else if (!size_digits_) {
                return fail(i, 400, "malformed chunk size");
            } else if (c == ';') {
                phase_ = phase::extension;
            } else if (c == ' ' || c == '\t') {
                phase_ = phase::size_ws;
            } else {
                return fail(i, 400, "malformed chunk size");
            }
            break;
        }
        case phase::size_ws:
            if (c == '\r') {
                phase_ = phase::size_lf;
            } else if (c == '\n') {
                end_size_line();
            } else if (++line_bytes_ > limits_.max_chunk_line_bytes) {
                return fail(i, 400, "chunk size line too long");
            } else if (c == ';') {
                phase_ = phase::extension;
            } else if (c != ' ' && c != '\t') {
                return fail(i, 400, "malformed chunk size");
            }
            break;
        case phase::extension:
            if (c == '\r') {
                phase_ = phase::size_lf;
            } else if (c == '\n') {
                end_size_line();
            } else if (++line_bytes_ > limits_.max_chunk_line_bytes) {
                return fail(i, 400, "chunk size line too long");
            } else if (!is_text_byte(c)) {
                return fail(i, 400, "malformed chunk extension");
            }
            break;
        case phase::size_lf:
            if (c != '\n') return fail(i, 400, "malformed chunk size");
            end_size_line();
            break;
        case phase::data_cr:
            if (c == '\r') {
                phase_ = phase::data_lf;
            } else if (c == '\n') {
                phase_ = phase::size;
            } else {
                return fail(i, 400, "missing crlf after chunk data");
            }
            break;
        case phase::data_lf:
            if (c != '\n') return fail(i, 400, "missing crlf after chunk data");
            phase_ = phase::size;
            break;
        case phase::trailer:
        case phase::trailer_lf:
            if (++trailer_bytes_ > limits_.max_trailer_bytes) return fail(i, 400, "trailer section too large");
            if (phase_ == phase::trailer_lf && c != '\n') return fail(i, 400, "malformed trailer");
            if (c == '\r') {
                phase_ = phase::trailer_lf;
            } else if (c == '\n') {
                if (line_bytes_ == 0) {
                    phase_ = phase::done;
                    return {status::done, i, 0, ""};
                }
                if (!trailer_colon_) return fail(i, 400, "trailer line without colon");
                line_bytes_ = 0;
                trailer_colon_ = false;
                phase_ = phase::trailer;
            } else if (trailer_colon_) {
                // field-value: HT, SP, VCHAR, obs-text
                if (!is_text_byte(c)) return fail(i, 400, "malformed trailer");
                ++line_bytes_;
            } else if (c == ':') {
                // field-line = field-name ":" ... (RFC 9112 §5, §7.1.2); the name is 1*tchar
                if (line_bytes_ == 0) return fail(i, 400, "malformed trailer");
                trailer_colon_ = true;
                ++line_bytes_;
            } else if (is_tchar(c)) {
                ++line_bytes_;
            } else {
                // whitespace before the colon or at the line's start (obs-fold), or a non-token byte
                return fail(i, 400, "malformed trailer");
            }
            break;
        case phase::data:
        case phase::done:
        case phase::failed:
            break;
        }
    }
    return {status::need_more, i, 0, ""};
}

}  // namespace percore::net
