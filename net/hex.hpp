// hex: the value of one hexadecimal digit, for the places HTTP spells numbers in hex
// (chunk sizes, percent-escapes).
#pragma once

namespace percore::net {

// 0-15, or -1 when `c` is not a hex digit (either case).
constexpr int hex_digit_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace percore::net
