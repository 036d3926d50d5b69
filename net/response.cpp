#include "net/response.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <ctime>
#include <string>

#include "shards/runtime/check.hpp"

namespace percore::net {

std::string_view status_line(int status) {
    switch (status) {
    case 100: return "HTTP/1.1 100 Continue\r\n";
    case 200: return "HTTP/1.1 200 OK\r\n";
    case 201: return "HTTP/1.1 201 Created\r\n";
    case 204: return "HTTP/1.1 204 No Content\r\n";
    case 206: return "HTTP/1.1 206 Partial Content\r\n";
    case 304: return "HTTP/1.1 304 Not Modified\r\n";
    case 400: return "HTTP/1.1 400 Bad Request\r\n";
    case 401: return "HTTP/1.1 401 Unauthorized\r\n";
    case 403: return "HTTP/1.1 403 Forbidden\r\n";
    case 404: return "HTTP/1.1 404 Not Found\r\n";
    case 405: return "HTTP/1.1 405 Method Not Allowed\r\n";
    case 408: return "HTTP/1.1 408 Request Timeout\r\n";
    case 410: return "HTTP/1.1 410 Gone\r\n";
    case 411: return "HTTP/1.1 411 Length Required\r\n";
    case 409: return "HTTP/1.1 409 Conflict\r\n";
    case 412: return "HTTP/1.1 412 Precondition Failed\r\n";
    case 413: return "HTTP/1.1 413 Content Too Large\r\n";
    case 414: return "HTTP/1.1 414 URI Too Long\r\n";
    case 416: return "HTTP/1.1 416 Range Not Satisfiable\r\n";
    case 417: return "HTTP/1.1 417 Expectation Failed\r\n";
    case 421: return "HTTP/1.1 421 Misdirected Request\r\n";  // a follower takes no write (SPEC §10)
    case 429: return "HTTP/1.1 429 Too Many Requests\r\n";
    case 431: return "HTTP/1.1 431 Request Header Fields Too Large\r\n";
    case 500: return "HTTP/1.1 500 Internal Server Error\r\n";
    case 501: return "HTTP/1.1 501 Not Implemented\r\n";
    case 503: return "HTTP/1.1 503 Service Unavailable\r\n";
    case 505: return "HTTP/1.1 505 HTTP Version Not Supported\r\n";
    case 507: return "HTTP/1.1 507 Insufficient Storage\r\n";
    default: return "HTTP/1.1 500 Internal Server Error\r\n";
    }
}

char* format_decimal(std::uint64_t v, char* end) {
    do {
        *--end = static_cast<char>('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return end;
}

namespace {

// Eight lowercase hex digits of `v`, most significant first, as the bytes of a word to store:
// the nibbles are spread one a byte, then each becomes '0'+d or 'a'+d-10 in the same add (~12
// instructions instead of a table lookup a digit: an ETag is on every answer).
std::uint64_t hex_digits_of(std::uint32_t v) {
    std::uint64_t x = v;
    x = (x | (x << 16)) & 0x0000ffff0000ffffull;
    x = (x | (x << 8)) & 0x00ff00ff00ff00ffull;
    x = (x | (x << 4)) & 0x0f0f0f0f0f0f0f0full;   // nibble i (from the low end) in byte i
    const std::uint64_t letters = ((x + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull;
    x += 0x3030303030303030ull + letters * ('a' - '0' - 10);
    return __builtin_bswap64(x);   // the most significant digit first in memory
}

}  // namespace

void format_etag(std::uint64_t version, char* out) {
    static_assert(std::endian::native == std::endian::little);
    const std::uint64_t high = hex_digits_of(static_cast<std::uint32_t>(version >> 32));
    const std::uint64_t low = hex_digits_of(static_cast<std::uint32_t>(version));
    out[0] = '"';
    std::memcpy(out + 1, &high, 8);
    std::memcpy(out + 9, &low, 8);
    out[17] = '"';
}

bool parse_etag(std::string_view tag, bool allow_weak, std::uint64_t& version) {
    if (tag.size() >= 2 && tag[0] == 'W' && tag[1] == '/') {
        if (!allow_weak) return false;
        tag.remove_prefix(2);
    }
    if (tag.size() != etag_text_bytes || tag.front() != '"' || tag.back() != '"') return false;
    std::uint64_t v = 0;
    for (std::size_t i = 1; i < 17; ++i) {
        char c = tag[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
        else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
        else return false;
        v = v << 4 | d;
    }
    version = v;
    return true;
}

void response::start(int status) {
    status_ = status;
    out_.append(status_line(status));
    out_.append(head_lines_);
    switch (connection_) {
    case connection_header::none: break;
    case connection_header::keep_alive: out_.append("Connection: keep-alive\r\n"); break;
    case connection_header::close: out_.append("Connection: close\r\n"); break;
    }
}

void response::header(std::string_view name, std::string_view value) {
    char* p = out_.reserve(name.size() + value.size() + 4);
    std::memcpy(p, name.data(), name.size());
    p += name.size();
    *p++ = ':';
    *p++ = ' ';
    if (!value.empty()) std::memcpy(p, value.data(), value.size());   // an empty view may hold no pointer
    p += value.size();
    *p++ = '\r';
    *p++ = '\n';
    out_.commit(name.size() + value.size() + 4);
}

void response::etag(std::uint64_t version) {
    static constexpr std::string_view name = "ETag: ";
    char* p = out_.reserve(name.size() + etag_text_bytes + 2);
    std::memcpy(p, name.data(), name.size());
    format_etag(version, p + name.size());
    p[name.size() + etag_text_bytes] = '\r';
    p[name.size() + etag_text_bytes + 1] = '\n';
    out_.commit(name.size() + etag_text_bytes + 2);
}

namespace {
// Literal bytes at p; their size is known here, so the copy is a few moves, not a memcpy call.
template <std::size_t N>
char* put_literal(char* p, const char (&text)[N]) {
    std::memcpy(p, text, N - 1);
    return p + N - 1;
}

// A view's bytes at p; an empty view may have no data at all (memcpy's source must not be null).
char* put_bytes(char* p, std::string_view bytes) {
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    return p + bytes.size();
}
}  // namespace

void response::document_head(int status, std::string_view content_type, std::uint64_t version, std::uint64_t length) {
    status_ = status;
    const std::string_view status_text = status_line(status);
    std::string_view connection_text;
    if (connection_ == connection_header::keep_alive) connection_text = "Connection: keep-alive\r\n";
    else if (connection_ == connection_header::close) connection_text = "Connection: close\r\n";
    char digits[24];
    char* const digits_end = digits + sizeof digits;
    const char* const first_digit = format_decimal(length, digits_end);
    const auto digit_count = static_cast<std::size_t>(digits_end - first_digit);
    constexpr std::size_t fixed_bytes = sizeof("Content-Type: ") - 1 + sizeof("\r\nETag: ") - 1 + etag_text_bytes +
                                        sizeof("\r\nAccept-Ranges: bytes\r\nContent-Length: ") - 1 + 4;
    const std::size_t total = status_text.size() + head_lines_.size() + connection_text.size() + content_type.size() +
                              digit_count + fixed_bytes;
    char* const begin = out_.reserve(total);
    char* p = begin;
    p = put_bytes(p, status_text);
    p = put_bytes(p, head_lines_);
    p = put_bytes(p, connection_text);
    p = put_literal(p, "Content-Type: ");
    p = put_bytes(p, content_type);
    p = put_literal(p, "\r\nETag: ");
    format_etag(version, p);
    p += etag_text_bytes;
    p = put_literal(p, "\r\nAccept-Ranges: bytes\r\nContent-Length: ");
    std::memcpy(p, first_digit, digit_count);
    p += digit_count;
    p = put_literal(p, "\r\n\r\n");
    PERCORE_DEBUG_ASSERT(static_cast<std::size_t>(p - begin) == total);
    out_.commit(total);
}

void response::content_length(std::uint64_t bytes) {
    char digits[24];
    char* end = digits + sizeof digits;
    char* first = format_decimal(bytes, end);
    header("Content-Length", std::string_view(first, static_cast<std::size_t>(end - first)));
}

void response::body(std::string_view bytes) {
    if (!head_only_) out_.append(bytes);
}

void response::body_reference(std::string_view bytes, output_buffer::release_fn release, void* context) {
    if (head_only_) {
        release(context);
        return;
    }
    out_.add_reference(bytes.data(), bytes.size(), release, context);
}

void response::body_file(int fd, std::uint64_t offset, std::size_t size, output_buffer::release_fn release,
                         void* context) {
    if (head_only_) {
        release(context);
        return;
    }
    out_.add_file(fd, offset, size, release, context);
}

// `reason` as a JSON string's contents: most texts are ours, but some name what a client sent (a
// JSON field's name), so quotes, backslashes and control bytes are escaped (\u00XX for controls);
// other bytes, UTF-8 included, pass as they are. net/ sits below shards/base's json_text, so this
// is the same escaping written here.
static std::string json_escaped(std::string_view reason) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(reason.size());
    for (char ch : reason) {
        auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c < 0x20 || c == 0x7f) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += ch;
        }
    }
    return out;
}

static bool needs_json_escape(std::string_view reason) {
    for (char ch : reason) {
        auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\' || c < 0x20 || c == 0x7f) return true;
    }
    return false;
}

static void error_body(response& r, std::string_view reason) {
    // our own texts need no escape: no copy (a 404 flood allocates nothing)
    std::string escaped;
    if (needs_json_escape(reason)) escaped = json_escaped(reason);
    const std::string_view text = escaped.empty() ? reason : std::string_view(escaped);
    r.header("Content-Type", "application/json");
    r.content_length(text.size() + 12);
    r.end_head();
    if (!r.head_only()) {
        r.body("{\"error\":\"");
        r.body(text);
        r.body("\"}");
    }
}

void response::error(int status, std::string_view reason, std::string_view allow) {
    start(status);
    if (!allow.empty()) header("Allow", allow);
    if (status == 503 || status == 429) header("Retry-After", "1");
    error_body(*this, reason);
}

void response::error_with_header(int status, std::string_view reason, std::string_view name, std::string_view value) {
    start(status);
    header(name, value);
    error_body(*this, reason);
}

void response::error_with_etag(int status, std::string_view reason, std::uint64_t version) {
    start(status);
    etag(version);
    error_body(*this, reason);
}

void response::empty(int status) {
    start(status);
    if (status != 204 && status != 304) out_.append("Content-Length: 0\r\n");
    end_head();
}

void response::json(int status, std::string_view body_bytes) {
    start(status);
    header("Content-Type", "application/json");
    content_length(body_bytes.size());
    end_head();
    body(body_bytes);
}

void format_date_line(std::int64_t unix_seconds, char* out) {
    static constexpr char days[] = "SunMonTueWedThuFriSat";
    static constexpr char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    std::time_t t = unix_seconds;
    std::tm tm{};
    gmtime_r(&t, &tm);
    auto two = [](char* p, int v) { p[0] = static_cast<char>('0' + v / 10); p[1] = static_cast<char>('0' + v % 10); };
    std::memcpy(out, "Date: ", 6);
    std::memcpy(out + 6, days + 3 * tm.tm_wday, 3);
    out[9] = ',';
    out[10] = ' ';
    two(out + 11, tm.tm_mday);
    out[13] = ' ';
    std::memcpy(out + 14, months + 3 * tm.tm_mon, 3);
    out[17] = ' ';
    int year = tm.tm_year + 1900;
    two(out + 18, year / 100);
    two(out + 20, year % 100);
    out[22] = ' ';
    two(out + 23, tm.tm_hour);
    out[25] = ':';
    two(out + 26, tm.tm_min);
    out[28] = ':';
    two(out + 29, tm.tm_sec);
    std::memcpy(out + 31, " GMT\r\n", 6);
}

std::size_t format_keep_alive_line(std::chrono::milliseconds idle_timeout, char* out) {
    static constexpr std::string_view name = "Keep-Alive: timeout=";
    const auto seconds = std::max<std::int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(idle_timeout).count());
    char digits[24];
    char* const digits_end = digits + sizeof digits;
    const char* const first = format_decimal(static_cast<std::uint64_t>(seconds), digits_end);
    const auto n = static_cast<std::size_t>(digits_end - first);
    PERCORE_ASSERT(name.size() + n + 2 <= max_keep_alive_line_bytes);
    std::memcpy(out, name.data(), name.size());
    std::memcpy(out + name.size(), first, n);
    out[name.size() + n] = '\r';
    out[name.size() + n + 1] = '\n';
    return name.size() + n + 2;
}

}  // namespace percore::net
