// response_parser: parses the head (status line and header fields) of one HTTP/1.x response.
//
// Contract
// - parse_response_head() looks at bytes that start at the first byte of a response. It returns
//   need_more until the blank line that ends the head is in `bytes`, then done (filling `out`;
//   out.head_bytes counts the head including the blank line) or malformed.
// - It allocates nothing; out.etag points into `bytes` and is valid as long as they are.
// - Only what the load generator needs is extracted: status, Content-Length, Transfer-Encoding
//   (chunked answers are reported, not decoded), Connection: close (and HTTP/1.0 without
//   keep-alive), ETag. Duplicate differing Content-Lengths are malformed.
// - The caller enforces max_response_head_bytes while need_more is returned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace percore::load {

inline constexpr std::size_t max_response_head_bytes = 16 * 1024;

struct response_head {
    int status = 0;
    bool has_content_length = false;
    std::uint64_t content_length = 0;
    bool chunked = false;
    bool close = false;          // the server ends the connection after this answer
    std::string_view etag;       // empty when absent
    std::size_t head_bytes = 0;
};

enum class head_result { need_more, done, malformed };

head_result parse_response_head(std::string_view bytes, response_head& out);

}  // namespace percore::load
