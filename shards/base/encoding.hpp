// encoding: the byte-to-text codings the administration shows and stores — lower-case hex,
// base64 (RFC 4648 §4, padded: Standard Webhooks secrets, delivery values) and base64url (§5,
// unpadded: tokens).
//
// Contract: pure functions, any thread; the append_ functions only grow `out`. Decoders are strict
// (no whitespace, the canonical form only) and return nullopt for anything else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace percore::shards {

void append_hex(std::string& out, std::span<const std::uint8_t> bytes);
void append_base64(std::string& out, std::span<const std::uint8_t> bytes);     // padded, '+' '/'
// The padded base64 of n bytes is base64_bytes(n) characters; put_base64() writes them at `o`
// (which has room for them) and returns the end.
constexpr std::size_t base64_bytes(std::size_t n) { return (n + 2) / 3 * 4; }
char* put_base64(char* o, std::span<const std::uint8_t> bytes);
void append_base64url(std::string& out, std::span<const std::uint8_t> bytes);  // unpadded, '-' '_'

// The base64 text's length for `n` bytes (padded).
constexpr std::size_t base64_size(std::size_t n) { return (n + 2) / 3 * 4; }

bool is_lower_hex(std::string_view s);
// Lower-case hex of an even length; nullopt otherwise.
std::optional<std::vector<std::uint8_t>> decode_hex(std::string_view text);
// Padded base64 (length a multiple of 4, '=' only at the end, unused bits zero); nullopt otherwise.
std::optional<std::vector<std::uint8_t>> decode_base64(std::string_view text);

// A span over a string's bytes.
inline std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace percore::shards
