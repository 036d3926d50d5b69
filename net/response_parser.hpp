// response_parser: an incremental HTTP/1.1 response parser for the outgoing client (SPEC §9
// deliveries): status line, header fields, body framing, bounded whatever the receiver sends.
//
// Contract
// - feed() consumes a prefix of `in`; it may be called with any split of the response bytes, and
//   the response and the outcome are the same for every split. The head is copied into the
//   parser (at most limits.max_head_bytes), so the caller's buffer may be reused after each call.
// - Interim 1xx heads (100 Continue, 102, 103) are read and skipped; 101 (an upgrade nobody
//   asked for) is malformed. The request is always a POST, never HEAD: framing follows RFC 9112
//   §6.3 for that case — 204 and 304 have no body; Transfer-Encoding ending in chunked is chunked
//   (decoded by chunked_decoder); Transfer-Encoding otherwise or no framing field: the body ends
//   when the peer closes (finish()); else Content-Length. Content-Length with Transfer-Encoding,
//   differing or invalid Content-Lengths are malformed (a response-splitting sign).
// - `done`: consumed stops at the response's last byte; bytes after it were not asked for.
//   keep_alive() says whether the connection may carry the next request.
// - Bounds (client_limits): a head over max_head_bytes or with more than max_header_fields fields
//   is too_large; the body is kept up to max_kept_body_bytes and the rest counted and discarded
//   (or, with a body_sink set, every decoded body byte goes to the sink and none is kept);
//   once max_response_bytes have been consumed without the response's end (or a Content-Length
//   says it would be passed) the outcome is too_large: the caller stops reading and closes.
// - finish(): the peer closed. A close-delimited body is then done; anything else incomplete is
//   `truncated`. Errors are values and final until reset(); reset() before the next response.
// - Allocates the head copy, the fields and the kept body (all bounded); one parser per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/chunked_decoder.hpp"
#include "net/limits.hpp"

namespace percore::net {

struct response_field {
    std::string name;    // as sent (compare case-insensitively: find())
    std::string value;   // leading and trailing whitespace removed
};

enum class response_error : std::uint8_t { none, malformed, too_large, truncated };

// The final response as far as it has been read.
struct response_message {
    int status = 0;                  // 0 until a final (non-1xx) head is read
    int version_minor = 1;
    std::string reason;              // the reason phrase, maybe empty
    std::vector<response_field> fields;
    std::string body;                // the first max_kept_body_bytes of the (decoded) body
    std::uint64_t body_bytes = 0;    // every body byte read, kept or discarded
    std::uint32_t interim_heads = 0; // 1xx heads skipped

    // The first field with this name (case-insensitive), or nullptr.
    const response_field* find(std::string_view name) const;
};

// Where a response's decoded body goes instead of response_message::body: a body of any size
// streamed on (`percore admin backup` writes a tar to standard output). write() gets the final
// status and each piece in order; body_bytes still counts them. No sink (write null): kept.
struct body_sink {
    void (*write)(void* context, int status, std::string_view piece) = nullptr;
    void* context = nullptr;
};

class response_parser {
public:
    enum class state : std::uint8_t { need_more, done, error };

    struct result {
        state outcome = state::need_more;
        std::size_t consumed = 0;                  // bytes of `in` used by this call
        response_error error = response_error::none;
        const char* reason = "";                   // on error: short static text
    };

    explicit response_parser(client_limits limits = {});

    result feed(std::string_view in);
    result finish();
    void reset();

    const response_message& message() const { return message_; }
    // After done: no Connection: close, HTTP/1.1, and the body was not close-delimited.
    bool keep_alive() const { return keep_alive_; }
    // Every byte consumed for this response so far (interim heads included).
    std::uint64_t consumed_bytes() const { return total_; }
    const client_limits& limits() const { return limits_; }
    // From the next body byte on; kept across reset() (a connection's setting, not a response's).
    void set_body_sink(body_sink sink) { sink_ = sink; }

private:
    enum class phase : std::uint8_t { head, length, chunked, until_close, done, failed };

    result feed_head(std::string_view in);
    result feed_body(std::string_view in);
    // What the header fields say about framing and the connection.
    struct head_framing {
        bool close = false;
        bool te_seen = false;
        bool te_chunked_last = false;
        bool has_length = false;
        std::uint64_t length = 0;
    };
    result parse_head(std::size_t head_end);
    // The header fields of h from `at` to the empty line: into `fields` and `framing`; a failure's
    // reason, or null.
    const char* parse_fields(std::string_view h, std::size_t at, std::vector<response_field>& fields,
                             head_framing& framing, response_error& error) const;
    result begin_body();
    result fail(std::size_t consumed, response_error e, const char* reason);
    void keep(const char* data, std::size_t size);
    static void keep_sink(void* self, const char* data, std::size_t size);

    client_limits limits_;
    body_sink sink_;
    phase phase_ = phase::head;
    std::string head_;                   // the current head's bytes, up to its end
    std::size_t searched_ = 0;           // bytes of head_ known not to end the head
    std::uint64_t remaining_ = 0;        // Content-Length bytes still to come
    std::uint64_t total_ = 0;
    bool keep_alive_ = false;
    bool has_length_ = false;
    bool chunked_ = false;
    bool close_delimited_ = false;
    response_error error_ = response_error::none;
    const char* error_reason_ = "";
    response_message message_;
    chunked_decoder chunks_;
};

const char* to_string(response_error e);

}  // namespace percore::net
