// Digests: SHA-256 and HMAC-SHA256 against published vectors, the constant-time comparison, random
// bytes.
#include <doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/digest.hpp"
#include "crypto_test_support.hpp"

using namespace percore::crypto;
using namespace percore::crypto::testing;

namespace {

std::string to_hex(std::span<const std::uint8_t> bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string text;
    for (std::uint8_t b : bytes) {
        text += digits[b >> 4];
        text += digits[b & 15];
    }
    return text;
}

std::string sha256_hex(std::string_view data) {
    auto digest = sha256(api(), data);
    if (!digest) FAIL(text(digest.error()));
    return to_hex(*digest);
}

std::string hmac_hex(std::string_view key, std::string_view data) {
    auto mac = hmac_sha256(api(), key, data);
    if (!mac) FAIL(text(mac.error()));
    return to_hex(*mac);
}

std::vector<std::uint8_t> bytes(std::string_view text) { return {text.begin(), text.end()}; }

}  // namespace

// FIPS 180-2, Appendix B (SHA-256 examples); the empty message from NIST's example values.

TEST_CASE("SHA-256 of \"abc\" is the FIPS 180-2 one-block example") {
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("SHA-256 of the empty string is e3b0c442...b855") {
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex(std::string_view()) == sha256_hex(""));  // no bytes at a null pointer
}

TEST_CASE("SHA-256 of the 448-bit message is the FIPS 180-2 two-block example") {
    CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("sha256 without a table loads the module and gives the same digest") {
    auto loaded = sha256(std::string_view("abc"));
    REQUIRE_MESSAGE(loaded.has_value(), (loaded ? std::string() : text(loaded.error())));
    CHECK(to_hex(*loaded) == sha256_hex("abc"));
}

// RFC 4231, "Identifiers and Test Vectors for HMAC-SHA-224, HMAC-SHA-256, HMAC-SHA-384, and
// HMAC-SHA-512", section 4.

TEST_CASE("HMAC-SHA256 gives RFC 4231 test case 1 (a 20-byte key of 0x0b)") {
    CHECK(hmac_hex(std::string(20, '\x0b'), "Hi There") ==
          "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST_CASE("HMAC-SHA256 gives RFC 4231 test case 2 (a key shorter than the output)") {
    CHECK(hmac_hex("Jefe", "what do ya want for nothing?") ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("HMAC-SHA256 gives RFC 4231 test case 6 (a 131-byte key, longer than the block, hashed first)") {
    CHECK(hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First") ==
          "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("HMAC-SHA256 accepts an empty key and empty data") {
    // The value every HMAC-SHA256 implementation gives (e.g. `openssl dgst -sha256 -hmac ''`).
    CHECK(hmac_hex("", "") == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST_CASE("HMAC-SHA256 over parts equals it over the parts joined, empty parts included") {
    const std::string key = "Jefe";
    const std::span<const char> parts[] = {std::string_view("what do ya"), std::string_view(), std::string_view(" want"),
                                           std::string_view(" for nothing?")};
    auto mac = hmac_sha256(api(), key, parts);
    REQUIRE(mac);
    CHECK(to_hex(*mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    auto none = hmac_sha256(api(), key, std::span<const std::span<const char>>());
    auto empty = hmac_sha256(api(), key, std::span<const char>());
    REQUIRE(none);
    REQUIRE(empty);
    CHECK(*none == *empty);
}

TEST_CASE("equal_constant_time is true for equal bytes") {
    CHECK(equal_constant_time(bytes("the same 32 bytes, twice over ok"), bytes("the same 32 bytes, twice over ok")));
    CHECK(equal_constant_time({}, {}));
}

TEST_CASE("equal_constant_time is false when the first byte differs") {
    auto a = bytes("0123456789abcdef0123456789abcdef");
    auto b = a;
    b.front() ^= 0x80;
    CHECK_FALSE(equal_constant_time(a, b));
}

TEST_CASE("equal_constant_time is false when the last byte differs") {
    auto a = bytes("0123456789abcdef0123456789abcdef");
    auto b = a;
    b.back() ^= 0x01;
    CHECK_FALSE(equal_constant_time(a, b));
}

TEST_CASE("equal_constant_time is false for different lengths, even when one is a prefix of the other") {
    auto a = bytes("0123456789abcdef0123456789abcdef");
    auto b = bytes("0123456789abcdef0123456789abcde");
    CHECK_FALSE(equal_constant_time(a, b));
    CHECK_FALSE(equal_constant_time(b, a));
    CHECK_FALSE(equal_constant_time(a, {}));
}

TEST_CASE("random_bytes gives different bytes on two calls") {
    sha256_digest first{}, second{};
    random_bytes(first);
    random_bytes(second);
    CHECK(first != second);  // equal with probability 2^-256
}

TEST_CASE("random_bytes fills the whole span, past what one getrandom call returns") {
    // getrandom(2) returns at most 32 MiB - 1 bytes per call, so this takes more than one call.
    std::vector<std::uint8_t> buffer((std::size_t{32} << 20) + 100, 0);
    random_bytes(buffer);
    // Every 16-byte block (and the last 16 bytes) was written: left all zero with probability 2^-128.
    constexpr std::size_t block = 16;
    auto untouched = [&](std::size_t at) {
        return std::all_of(buffer.begin() + static_cast<std::ptrdiff_t>(at),
                           buffer.begin() + static_cast<std::ptrdiff_t>(at + block), [](std::uint8_t b) { return b == 0; });
    };
    std::size_t unwritten = 0;
    for (std::size_t at = 0; at + block <= buffer.size(); at += block) unwritten += untouched(at) ? 1 : 0;
    unwritten += untouched(buffer.size() - block) ? 1 : 0;
    CHECK(unwritten == 0);
}

TEST_CASE("random_bytes of an empty span does nothing") {
    random_bytes({});
}
