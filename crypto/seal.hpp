// seal: authenticated encryption of values at rest (AES-256-GCM where the CPU has AES instructions,
// ChaCha20-Poly1305 elsewhere), as an owning C++ handle over the crypto module's table. The key
// file format, the suite choice and the sealed form (30 bytes more than the plaintext, naming its
// suite and nonce) are described in crypto/module_abi.h.
//
// Contract
// - What: a seal_key owns one module key (percore_seal_key), move-only; the module (crypto_api)
//   outlives it. Callers own every buffer they pass; nothing is kept after a call returns.
// - seal_key::load() reads the key file (64 hex digits) and loads the module on first use; its error
//   (errc::unusable_file, errc::out_of_memory, or the loader's) has one line for the operator.
//   seal_key::from_bytes() makes the same key from its 32 bytes in memory.
// - seal() writes sealed_size(plain.size()) bytes; open() writes opened_size(sealed.size()) bytes and
//   opens values sealed with either suite. The associated data is not stored: open() must be given
//   the same bytes seal() was (e.g. the document's key, so a sealed value cannot be moved to another).
// - Errors are values: result (crypto/result.hpp) with the sealing codes errc::output_too_small,
//   truncated, not_sealed, unknown_suite, authentication_failed, internal. open() never returns
//   unauthenticated bytes: on any error the output holds no plaintext.
// - Thread: a seal_key is immutable after load(); any number of threads may seal and open with it
//   at once. Output spans must not overlap the input.
// - Random 96-bit nonces: at most PERCORE_SEAL_MESSAGES_PER_KEY (2^32) seals per key.
//
// REQUIRES (PERCORE_REQUIRES, always checked): the seal_key was not moved from; the output span of
// seal()/open() does not overlap the input or the associated data. A too-short output is not a
// breach but errc::output_too_small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/loader.hpp"
#include "crypto/module_handle.hpp"
#include "crypto/result.hpp"

namespace percore::crypto {

class seal_key : public module_handle<percore_seal_key, &crypto_api::seal_key_free> {
public:
    static constexpr std::size_t overhead_bytes = PERCORE_SEAL_OVERHEAD;
    static constexpr std::size_t sealed_size(std::size_t plain_bytes) { return plain_bytes + overhead_bytes; }
    static constexpr std::size_t opened_size(std::size_t sealed_bytes) {
        return sealed_bytes >= overhead_bytes ? sealed_bytes - overhead_bytes : 0;
    }

    static result<seal_key> load(const crypto_api& api, const std::string& hex_key_path);
    static result<seal_key> load(const std::string& hex_key_path);  // loads the module
    // The key of these 32 bytes (a delivery's, SPEC §9): the same key as a file of their hex. The
    // bytes are not kept. Errors: errc::out_of_memory, errc::internal (OpenSSL, PERCORE_SEAL_SUITE).
    static result<seal_key> from_bytes(const crypto_api& api, std::span<const std::uint8_t, 32> key);
    static result<seal_key> from_bytes(std::span<const std::uint8_t, 32> key);  // loads the module

    // Bytes written to `out` (== sealed_size(plain.size())).
    // REQUIRES: `out` overlaps neither `plain` nor `associated`.
    result<std::size_t> seal(std::span<const char> plain, std::span<char> out,
                             std::span<const char> associated = {}) const;
    // Bytes written to `out` (== opened_size(sealed.size())).
    // REQUIRES: `out` overlaps neither `sealed` nor `associated`.
    result<std::size_t> open(std::span<const char> sealed, std::span<char> out,
                             std::span<const char> associated = {}) const;
    result<std::vector<char>> seal_to_vector(std::span<const char> plain, std::span<const char> associated = {}) const;
    result<std::vector<char>> open_to_vector(std::span<const char> sealed, std::span<const char> associated = {}) const;

    std::string_view suite_name() const;  // "aes-256-gcm" or "chacha20-poly1305"
    const crypto_api& api() const { return *api_; }

private:
    seal_key(const crypto_api& api, percore_seal_key* key) : module_handle(api, key) {}
    static result<seal_key> made(const crypto_api& api, percore_seal_key* key, const char* err, errc otherwise);
};

}  // namespace percore::crypto
