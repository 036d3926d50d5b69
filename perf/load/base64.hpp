// base64: standard base64 (RFC 4648 §4: alphabet A-Z a-z 0-9 + /, '=' padding), encode only.
//
// Contract
// - base64_length(n) is the exact encoded length of n bytes: 4 * ceil(n / 3).
// - base64_encode() writes exactly base64_length(in.size()) bytes at `out` (the caller provides
//   the room) and returns the end; it allocates nothing, so it may run per request.
#pragma once

#include <cstddef>
#include <string_view>

namespace percore::load {

constexpr std::size_t base64_length(std::size_t n) { return (n + 2) / 3 * 4; }

inline char* base64_encode(std::string_view in, char* out) {
    constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    auto byte = [&](std::size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(in[i])); };
    std::size_t i = 0;
    for (; i + 3 <= in.size(); i += 3) {
        unsigned v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
        *out++ = alphabet[(v >> 18) & 63];
        *out++ = alphabet[(v >> 12) & 63];
        *out++ = alphabet[(v >> 6) & 63];
        *out++ = alphabet[v & 63];
    }
    std::size_t rest = in.size() - i;
    if (rest > 0) {
        unsigned v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0u);
        *out++ = alphabet[(v >> 18) & 63];
        *out++ = alphabet[(v >> 12) & 63];
        *out++ = rest == 2 ? alphabet[(v >> 6) & 63] : '=';
        *out++ = '=';
    }
    return out;
}

}  // namespace percore::load
