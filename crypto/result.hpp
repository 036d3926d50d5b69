// result: how every fallible call of the crypto layer answers (the loader, tls_server, seal_key):
// a value, or an error saying what went wrong. [[nodiscard]]: an ignored crypto error is a bug.
//
// Contract
// - error: a code (errc) and, for errors an operator reads (a module that cannot be loaded, a
//   certificate, key or seal key file that cannot be used), one line without a newline that names
//   the file. message() is that line, or to_string(code()) when there is none (sealing errors,
//   which happen per value and allocate nothing). "--tls-listen: " + error gives the line to print.
// - result<T> is std::expected<T, error> with [[nodiscard]] on the type, so every function that
//   returns one is checked by the compiler; it converts from T and from std::unexpected(error).
// - Ownership: an error owns its text; a result owns its value (handles stay move-only).
// - Thread: plain values; any thread, no sharing.
// The C ABI below (crypto/module_abi.h) stays plain C: statuses and error buffers; only the C++
// wrappers answer with result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

#include "crypto/module_abi.h"

namespace percore::crypto {

enum class errc : std::uint8_t {
    module_not_found = 1,  // the loader found no module at any candidate path
    module_refused,        // a module exists but cannot be opened, or is no percore module of this ABI
    unusable_file,         // a certificate, key or seal key file is missing, unreadable or unfit
    out_of_memory,
    // Sealing: the module's percore_seal_status values.
    output_too_small,       // the output span is too short (seal: sealed_size(), open: opened_size())
    truncated,              // shorter than header and tag
    not_sealed,             // no known format byte
    unknown_suite,
    authentication_failed,  // changed, wrong key or wrong associated data
    internal,               // the crypto library failed (out of memory, no random bytes)
};

// A short fixed text for the code ("sealed value truncated", ...).
std::string_view to_string(errc code);

class error {
public:
    // REQUIRES: nothing; `text` may be empty (message() then is to_string(code)).
    error(errc code, std::string text = {}) : code_(code), text_(std::move(text)) {}

    errc code() const noexcept { return code_; }
    std::string_view message() const noexcept { return text_.empty() ? to_string(code_) : std::string_view(text_); }

    friend bool operator==(const error& e, errc code) noexcept { return e.code_ == code; }
    friend std::string operator+(std::string prefix, const error& e) { return prefix.append(e.message()); }

private:
    errc code_;
    std::string text_;
};

// How large an error buffer the C++ wrappers hand the module (its reasons are one line).
inline constexpr std::size_t module_error_bytes = 512;

// The error for a module's refusal of an operator's file (certificate, key, CA file), given the
// module's one-line reason: errc::out_of_memory when that reason is "out of memory", otherwise
// errc::unusable_file with the reason (which names the file) as its message.
error file_error(std::string_view module_reason);

template <class T>
class [[nodiscard]] result : public std::expected<T, error> {
public:
    using std::expected<T, error>::expected;
};

}  // namespace percore::crypto
