// json_text: the text writers every page and JSON body shares — unsigned and decimal numbers
// without the float formatter, and JSON strings escaped eight bytes at a time.
//
// Contract: pure functions on the caller's buffer, any thread; they only append (or write at `o`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace percore::shards {

void append_uint(std::string& out, std::uint64_t v);
void append_decimal(std::string& out, double v);
void append_ratio(std::string& out, std::uint64_t num, std::uint64_t den);  // num/den, up to nine places
void append_json_string(std::string& out, std::string_view s);
// The JSON string of n bytes takes at most json_string_max_bytes(n) characters (every byte a
// \u00XX escape, and the quotes); put_json_string() writes it at `o`, which has that room, and
// returns the end.
constexpr std::size_t json_string_max_bytes(std::size_t n) { return 6 * n + 2; }
char* put_json_string(char* o, std::string_view s);

}  // namespace percore::shards
