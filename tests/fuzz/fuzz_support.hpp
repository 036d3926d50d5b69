// fuzz_support: what the fuzz targets in this folder share.
//
// - Each target is a plain function `percore::fuzz::<target>_one_input(data, size)`; its .cpp adds
//   `extern "C" LLVMFuzzerTestOneInput` forwarding to it when built as a libFuzzer binary
//   (PERCORE_LIBFUZZER defined, -Dfuzz=true), and fuzz_replay_tests (always built) calls the same
//   functions with every file of tests/fuzz/corpus/<target>/ and tests/fuzz/regressions/<target>/.
// - fuzz_fail(): a broken invariant. By default it prints what broke and aborts (libFuzzer then
//   saves the input as a crash); the replay test installs a handler that throws instead, so one
//   failing file is reported with its name and the others still run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace percore::fuzz {

int request_parser_one_input(const std::uint8_t* data, std::size_t size);
int list_query_one_input(const std::uint8_t* data, std::size_t size);
int recovery_one_input(const std::uint8_t* data, std::size_t size);
int admin_input_one_input(const std::uint8_t* data, std::size_t size);
int follower_page_one_input(const std::uint8_t* data, std::size_t size);

using failure_handler = void (*)(const std::string& what);
inline failure_handler& failure_hook() {
    static failure_handler hook = nullptr;
    return hook;
}

[[noreturn]] inline void fuzz_fail(const std::string& what) {
    if (failure_hook() != nullptr) failure_hook()(what);  // throws in the replay test
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

#define PERCORE_FUZZ_STR2(x) #x
#define PERCORE_FUZZ_STR(x) PERCORE_FUZZ_STR2(x)
// FUZZ_CHECK(condition, message expression convertible to std::string)
#define FUZZ_CHECK(cond, msg)                                                                                  \
    do {                                                                                                       \
        if (!(cond))                                                                                           \
            ::percore::fuzz::fuzz_fail(std::string(__FILE__ ":" PERCORE_FUZZ_STR(__LINE__) ": " #cond ": ") + \
                                       std::string(msg));                                                      \
    } while (0)

// Printable form of bytes, for messages.
inline std::string printable(std::string_view s, std::size_t max = 200) {
    std::string out;
    for (std::size_t i = 0; i < s.size() && i < max; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out += static_cast<char>(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    if (s.size() > max) out += "...";
    return out;
}

}  // namespace percore::fuzz
