#include "crypto/seal.hpp"

#include <functional>
#include <utility>

#include "shards/runtime/check.hpp"

namespace percore::crypto {

namespace {

constexpr std::size_t error_buffer_bytes = 512;

errc error_of(int raw) {
    switch (raw) {
    case PERCORE_SEAL_OUTPUT_TOO_SMALL: return errc::output_too_small;
    case PERCORE_SEAL_TRUNCATED: return errc::truncated;
    case PERCORE_SEAL_NOT_SEALED: return errc::not_sealed;
    case PERCORE_SEAL_UNKNOWN_SUITE: return errc::unknown_suite;
    case PERCORE_SEAL_AUTH_FAILED: return errc::authentication_failed;
    default: return errc::internal;
    }
}

// Whether two byte ranges share no byte (an empty range overlaps nothing).
bool disjoint(std::span<const char> a, std::span<const char> b) {
    if (a.empty() || b.empty()) return true;
    std::less<const char*> before;  // a total order, even across objects
    return !before(a.data(), b.data() + b.size()) || !before(b.data(), a.data() + a.size());
}

}  // namespace

// The module's answer as a result: its key, or its error text with the code it stands for.
result<seal_key> seal_key::made(const crypto_api& api, percore_seal_key* key, const char* err, errc otherwise) {
    if (key != nullptr) return seal_key(api, key);
    std::string_view why(err);
    return std::unexpected(error(why == "out of memory" ? errc::out_of_memory : otherwise, std::string(why)));
}

result<seal_key> seal_key::load(const crypto_api& api, const std::string& hex_key_path) {
    char err[error_buffer_bytes] = {};
    percore_seal_key* key = api.seal_key_load(hex_key_path.c_str(), err, sizeof err);
    return made(api, key, err, errc::unusable_file);
}

result<seal_key> seal_key::load(const std::string& hex_key_path) {
    auto api = load_crypto_module();
    if (!api) return std::unexpected(api.error());
    return load(**api, hex_key_path);
}

result<seal_key> seal_key::from_bytes(const crypto_api& api, std::span<const std::uint8_t, 32> key) {
    static_assert(PERCORE_SEAL_KEY_BYTES == 32);
    char err[error_buffer_bytes] = {};
    percore_seal_key* made_key = api.seal_key_from_bytes(key.data(), err, sizeof err);
    return made(api, made_key, err, errc::internal);
}

result<seal_key> seal_key::from_bytes(std::span<const std::uint8_t, 32> key) {
    auto api = load_crypto_module();
    if (!api) return std::unexpected(api.error());
    return from_bytes(**api, key);
}

result<std::size_t> seal_key::seal(std::span<const char> plain, std::span<char> out,
                                   std::span<const char> associated) const {
    PERCORE_REQUIRES(object_ != nullptr);
    PERCORE_REQUIRES(disjoint(out, plain) && disjoint(out, associated));
    std::size_t n = 0;
    int status = api_->seal(object_, associated.data(), associated.size(), plain.data(), plain.size(), out.data(),
                            out.size(), &n);
    if (status != PERCORE_SEAL_OK) return std::unexpected(error_of(status));
    return n;
}

result<std::size_t> seal_key::open(std::span<const char> sealed, std::span<char> out,
                                   std::span<const char> associated) const {
    PERCORE_REQUIRES(object_ != nullptr);
    PERCORE_REQUIRES(disjoint(out, sealed) && disjoint(out, associated));
    std::size_t n = 0;
    int status = api_->open(object_, associated.data(), associated.size(), sealed.data(), sealed.size(), out.data(),
                            out.size(), &n);
    if (status != PERCORE_SEAL_OK) return std::unexpected(error_of(status));
    return n;
}

result<std::vector<char>> seal_key::seal_to_vector(std::span<const char> plain,
                                                   std::span<const char> associated) const {
    std::vector<char> out(sealed_size(plain.size()));
    auto n = seal(plain, std::span<char>(out), associated);
    if (!n) return std::unexpected(n.error());
    out.resize(*n);
    return out;
}

result<std::vector<char>> seal_key::open_to_vector(std::span<const char> sealed,
                                                   std::span<const char> associated) const {
    std::vector<char> out(opened_size(sealed.size()));
    auto n = open(sealed, std::span<char>(out), associated);
    if (!n) return std::unexpected(n.error());
    out.resize(*n);
    return out;
}

std::string_view seal_key::suite_name() const {
    PERCORE_REQUIRES(object_ != nullptr);
    return api_->seal_suite_name(object_);
}

}  // namespace percore::crypto
