// chunked_decoder: an incremental decoder of the chunked transfer coding (RFC 9112 §7.1).
//
// Contract
// - decode() consumes a prefix of `in` and hands every decoded data byte to `sink`, in order, in as
//   many pieces as it likes. It may be called with any split of the encoded bytes; the data handed
//   to the sink and the final outcome are the same for every split.
// - `done` means the last chunk and the trailer section (checked as field lines, then ignored) have been read; result.consumed
//   then counts exactly the bytes of the chunked body, so what follows in `in` is the next request.
// - Errors are values: result.status is 400 (malformed) or 413 (data beyond limits.max_body_bytes);
//   both break framing. Chunk extensions are accepted and ignored.
// - Allocates nothing. One decoder per request body; reset() before the next.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "net/limits.hpp"

namespace percore::net {

class chunked_decoder {
public:
    using data_sink = void (*)(void* context, const char* data, std::size_t size);

    enum class status : std::uint8_t { need_more, done, error };

    struct result {
        status state = status::need_more;
        std::size_t consumed = 0;    // bytes of `in` used by this call
        int http_status = 0;         // on error
        const char* reason = "";     // on error: short static text
    };

    explicit chunked_decoder(chunked_limits limits = {}) : limits_(limits) {}

    result decode(std::string_view in, data_sink sink, void* context);

    void reset();
    std::uint64_t body_bytes() const { return body_bytes_; }

private:
    enum class phase : std::uint8_t { size, size_ws, extension, size_lf, data, data_cr, data_lf, trailer, trailer_lf, done, failed };
    chunked_limits limits_;
    phase phase_ = phase::size;
    std::uint64_t chunk_remaining_ = 0;
    std::uint64_t body_bytes_ = 0;
    std::size_t line_bytes_ = 0;      // bytes of the current size line or trailer line
    std::size_t trailer_bytes_ = 0;
    bool size_digits_ = false;        // at least one hex digit in the size
    bool trailer_colon_ = false;      // the current trailer line's name has ended with ':'
    bool last_chunk_ = false;
    int error_status_ = 0;
    const char* error_reason_ = "";

    result fail(std::size_t consumed, int http_status, const char* reason);
    void end_size_line();
};

}  // namespace percore::net
