// response: writes HTTP/1.1 answers into a connection's output_buffer, without printf.
//
// Contract
// - Made by the connection for one request and handed to the request handler; used on the
//   connection's shard thread only, within the handler call (or when a pending answer completes).
// - start() writes the status line, the head lines the connection gives (the shard's cached Date
//   line, followed by its Keep-Alive line when the connection stays open) and the Connection line
//   the connection decided on; the handler adds fields, then either body()/body_reference() after
//   content_length(), or one of the whole-answer helpers (error(), empty()).
// - For HEAD requests (head_only) the body is left out but Content-Length stays that of the body.
// - Entity tags are rendered from a 64-bit version as a quoted 16-digit hex string; parse_etag()
//   reads that form back (and nothing else).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "net/output_buffer.hpp"

namespace percore::net {

enum class connection_header : std::uint8_t { none, keep_alive, close };

// Status line text ("HTTP/1.1 404 Not Found\r\n") for every status percore sends.
std::string_view status_line(int status);

// Decimal digits of `v` written backwards ending at `end`; returns the first digit's position.
char* format_decimal(std::uint64_t v, char* end);

inline constexpr std::size_t etag_text_bytes = 18;  // "0123456789abcdef" with quotes
void format_etag(std::uint64_t version, char* out);  // writes etag_text_bytes
// Accepts `"<16 hex digits>"` (optionally W/ prefixed when allow_weak) and returns the version.
bool parse_etag(std::string_view tag, bool allow_weak, std::uint64_t& version);

class response {
public:
    response(output_buffer& out, std::string_view head_lines, connection_header conn, bool head_only)
        : out_(out), head_lines_(head_lines), connection_(conn), head_only_(head_only) {}

    void start(int status);
    void header(std::string_view name, std::string_view value);
    void etag(std::uint64_t version);
    void content_length(std::uint64_t bytes);
    void end_head() { out_.append("\r\n"); }
    // A whole document's answer head in one reservation: what start(status), header("Content-Type",
    // content_type), etag(version), header("Accept-Ranges", "bytes"), content_length(length) and
    // end_head() write, byte for byte. Every GET of a document writes it: the six calls were ~500
    // instructions of a pipelined GET's ~3,000 (callgrind), most in variable-length memcpy calls.
    void document_head(int status, std::string_view content_type, std::uint64_t version, std::uint64_t length);
    void body(std::string_view bytes);
    // `bytes` stay valid until release(context) is called.
    void body_reference(std::string_view bytes, output_buffer::release_fn release, void* context);
    // `size` bytes of file `fd` at `offset`, sent with sendfile; the file stays open until release.
    void body_file(int fd, std::uint64_t offset, std::size_t size, output_buffer::release_fn release, void* context);

    // Whole answers.
    // {"error":"reason"}, `reason` JSON-escaped (it may name what a client sent); `allow` adds an
    // Allow field (405); 503 and 429 carry Retry-After: 1.
    void error(int status, std::string_view reason, std::string_view allow = {});
    void error_with_etag(int status, std::string_view reason, std::uint64_t version);
    // {"error":"reason"} with one more field (WWW-Authenticate for 401, Retry-After for 429).
    void error_with_header(int status, std::string_view reason, std::string_view name, std::string_view value);
    void empty(int status);                                           // Content-Length: 0
    void json(int status, std::string_view body);

    bool head_only() const { return head_only_; }
    int status() const { return status_; }

private:
    output_buffer& out_;
    std::string_view head_lines_;   // the Date line, and the Keep-Alive line when the connection stays
    connection_header connection_;
    bool head_only_;
    int status_ = 0;
};

// "Date: Mon, 30 Nov 2026 01:42:00 GMT\r\n" for a unix time; `out` holds date_line_bytes.
inline constexpr std::size_t date_line_bytes = 37;
void format_date_line(std::int64_t unix_seconds, char* out);

// "Keep-Alive: timeout=N\r\n" (RFC 9112 has no Keep-Alive; the field is HTTP/1.0's, still read by
// Node's http.Agent and undici to retire a pooled socket before the server closes it), N the idle
// timeout in whole seconds, at least 1 (a 0 would read as "no timeout" to Node's agent). The
// server keeps an idle connection at least that long (limits.hpp, keep_alive_grace). Returns the
// bytes written; `out` holds max_keep_alive_line_bytes.
inline constexpr std::size_t max_keep_alive_line_bytes = 40;
std::size_t format_keep_alive_line(std::chrono::milliseconds idle_timeout, char* out);

}  // namespace percore::net
