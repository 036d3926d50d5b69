#include "crypto/seal.hpp"

#include <utility>

namespace percore::crypto {

namespace {

constexpr std::size_t error_buffer_bytes = 512;

seal_error error_of(int raw) {
    switch (raw) {
    case PERCORE_SEAL_OUTPUT_TOO_SMALL: return seal_error::output_too_small;
    case PERCORE_SEAL_TRUNCATED: return seal_error::truncated;
    case PERCORE_SEAL_NOT_SEALED: return seal_error::not_sealed;
    case PERCORE_SEAL_UNKNOWN_SUITE: return seal_error::unknown_suite;
    case PERCORE_SEAL_AUTH_FAILED: return seal_error::authentication_failed;
    default: return seal_error::internal;
    }
}

}  // namespace

std::string_view to_string(seal_error error) {
    switch (error) {
    case seal_error::output_too_small: return "output buffer too small";
    case seal_error::truncated: return "sealed value truncated";
    case seal_error::not_sealed: return "not a sealed value";
    case seal_error::unknown_suite: return "sealed with an unknown suite";
    case seal_error::authentication_failed: return "sealed value altered, or wrong key or associated data";
    case seal_error::internal: return "crypto library failure";
    }
    return "crypto library failure";
}

std::expected<seal_key, std::string> seal_key::load(const crypto_api& api, const std::string& hex_key_path) {
    char err[error_buffer_bytes] = {};
    percore_seal_key* key = api.seal_key_load(hex_key_path.c_str(), err, sizeof err);
    if (key == nullptr) return std::unexpected(std::string(err));
    return seal_key(api, key);
}

std::expected<seal_key, std::string> seal_key::load(const std::string& hex_key_path) {
    auto api = load_crypto_module();
    if (!api) return std::unexpected(api.error());
    return load(**api, hex_key_path);
}

seal_key& seal_key::operator=(seal_key&& other) noexcept {
    if (this != &other) {
        if (key_ != nullptr) api_->seal_key_free(key_);
        api_ = other.api_;
        key_ = std::exchange(other.key_, nullptr);
    }
    return *this;
}

seal_key::~seal_key() {
    if (key_ != nullptr) api_->seal_key_free(key_);
}

std::expected<std::size_t, seal_error> seal_key::seal(std::span<const char> plain, std::span<char> out,
                                                      std::span<const char> associated) const {
    std::size_t n = 0;
    int status = api_->seal(key_, associated.data(), associated.size(), plain.data(), plain.size(), out.data(),
                            out.size(), &n);
    if (status != PERCORE_SEAL_OK) return std::unexpected(error_of(status));
    return n;
}

std::expected<std::size_t, seal_error> seal_key::open(std::span<const char> sealed, std::span<char> out,
                                                      std::span<const char> associated) const {
    std::size_t n = 0;
    int status = api_->open(key_, associated.data(), associated.size(), sealed.data(), sealed.size(), out.data(),
                            out.size(), &n);
    if (status != PERCORE_SEAL_OK) return std::unexpected(error_of(status));
    return n;
}

std::expected<std::vector<char>, seal_error> seal_key::seal_to_vector(std::span<const char> plain,
                                                                      std::span<const char> associated) const {
    std::vector<char> out(sealed_size(plain.size()));
    auto n = seal(plain, std::span<char>(out), associated);
    if (!n) return std::unexpected(n.error());
    out.resize(*n);
    return out;
}

std::expected<std::vector<char>, seal_error> seal_key::open_to_vector(std::span<const char> sealed,
                                                                      std::span<const char> associated) const {
    std::vector<char> out(opened_size(sealed.size()));
    auto n = open(sealed, std::span<char>(out), associated);
    if (!n) return std::unexpected(n.error());
    out.resize(*n);
    return out;
}

std::string_view seal_key::suite_name() const { return api_->seal_suite_name(key_); }

}  // namespace percore::crypto
