#include "crypto/digest.hpp"

#include <sys/random.h>

#include <cerrno>

#include "shards/runtime/check.hpp"

namespace percore::crypto {

result<sha256_digest> sha256(const crypto_api& api, std::span<const char> data) {
    sha256_digest out;
    if (api.digest_sha256(data.data(), data.size(), out.data()) != 0) return std::unexpected(error(errc::internal));
    return out;
}

result<sha256_digest> sha256(std::span<const char> data) {
    auto api = load_crypto_module();
    if (!api) return std::unexpected(api.error());
    return sha256(**api, data);
}

result<sha256_digest> hmac_sha256(const crypto_api& api, std::span<const char> key, std::span<const char> data) {
    sha256_digest out;
    if (api.hmac_sha256(key.data(), key.size(), data.data(), data.size(), out.data()) != 0)
        return std::unexpected(error(errc::internal));
    return out;
}

result<sha256_digest> hmac_sha256(const crypto_api& api, std::span<const char> key,
                                  std::span<const std::span<const char>> parts) {
    // the table's iovec array on the stack: a signature has three or four parts
    constexpr std::size_t most_parts = 8;
    PERCORE_REQUIRES(parts.size() <= most_parts);
    struct iovec iov[most_parts];
    for (std::size_t i = 0; i < parts.size(); ++i) iov[i] = {const_cast<char*>(parts[i].data()), parts[i].size()};
    sha256_digest out;
    if (api.hmac_sha256_parts(key.data(), key.size(), iov, parts.size(), out.data()) != 0)
        return std::unexpected(error(errc::internal));
    return out;
}

bool equal_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
    if (a.size() != b.size()) return false;
    std::uint8_t differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        differ |= static_cast<std::uint8_t>(a[i] ^ b[i]);
        // The compiler must assume the barrier may change `differ`, so it can neither stop the loop
        // once `differ` is non-zero nor turn the loop into an early-exit memcmp.
        asm volatile("" : "+r"(differ));
    }
    return differ == 0;
}

void random_bytes(std::span<std::uint8_t> out) {
    std::size_t done = 0;
    while (done < out.size()) {
        ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
        if (n < 0 && errno == EINTR) continue;
        PERCORE_ASSERT(n > 0);  // getrandom(2) failed: no random bytes, so no tokens
        done += static_cast<std::size_t>(n);
    }
}

}  // namespace percore::crypto
