// digest: SHA-256 and HMAC-SHA256 through the crypto module, and the two things around them that
// need no OpenSSL: a constant-time comparison and random bytes from the kernel. App tokens (SPEC §7)
// are made with random_bytes(), stored as their sha256() and checked with equal_constant_time();
// deliveries (§9) sign with hmac_sha256().
//
// Contract
// - What: sha256() and hmac_sha256() are one-shot over one buffer (hmac_sha256 also over parts) (module_abi.h, "Digests"); the
//   32-byte answer is a value (sha256_digest). sha256(data) without a table loads the module on
//   first use, as seal_key::load does; its error is the loader's (errc::module_not_found,
//   module_refused: one line for the operator). Otherwise the only error is errc::internal (OpenSSL
//   failed, e.g. out of memory).
// - equal_constant_time() and random_bytes() are plain C++ and system calls: they never load the
//   module, so checking a token costs no OpenSSL beyond hashing it.
// - equal_constant_time(a, b): true when both hold the same bytes. Its time depends only on the
//   lengths, never on the contents or on where they differ; different lengths answer false at once
//   (lengths are no secret: compare digests, which all have 32 bytes, not the tokens themselves).
// - random_bytes(out) fills all of `out` from getrandom(2) (the kernel's CSPRNG; it waits only
//   while the kernel's pool is not yet initialised, early at boot). It does not fail: getrandom
//   cannot fail on a supported kernel short of a bad buffer, and a server that cannot draw random
//   bytes must not make tokens, so any other error stops the process (PERCORE_ASSERT).
// - Ownership: callers own every buffer; nothing is kept after a call returns (a key is not cached).
//   The module (crypto_api) outlives the call.
// - Thread: every function may be called from any thread, any number at once.
// - A string literal converts to std::span<const char> with its terminating NUL: pass a
//   std::string_view (or std::string) to hash text.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "crypto/loader.hpp"
#include "crypto/result.hpp"

namespace percore::crypto {

inline constexpr std::size_t sha256_bytes = PERCORE_SHA256_BYTES;
using sha256_digest = std::array<std::uint8_t, sha256_bytes>;

result<sha256_digest> sha256(const crypto_api& api, std::span<const char> data);
result<sha256_digest> sha256(std::span<const char> data);  // loads the module

result<sha256_digest> hmac_sha256(const crypto_api& api, std::span<const char> key, std::span<const char> data);
// The same over `parts` one after the other (at most 8), without joining them first.
result<sha256_digest> hmac_sha256(const crypto_api& api, std::span<const char> key,
                                  std::span<const std::span<const char>> parts);

bool equal_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);

void random_bytes(std::span<std::uint8_t> out);

}  // namespace percore::crypto
