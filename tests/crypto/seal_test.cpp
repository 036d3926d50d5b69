// Sealing: the AEADs against published vectors, the sealed form, round trips, tampering, key files.
#include <doctest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "crypto_test_support.hpp"

using namespace percore::crypto;
using namespace percore::crypto::testing;

namespace {

std::vector<std::uint8_t> hex(std::string_view text) {
    std::vector<std::uint8_t> bytes;
    for (std::size_t i = 0; i + 1 < text.size(); i += 2)
        bytes.push_back(static_cast<std::uint8_t>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
    return bytes;
}

std::string to_hex(const void* data, std::size_t len) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string text;
    for (std::size_t i = 0; i < len; ++i) {
        auto b = static_cast<const std::uint8_t*>(data)[i];
        text += digits[b >> 4];
        text += digits[b & 15];
    }
    return text;
}

struct aead_vector {
    const char* name;
    int suite;
    const char* key;
    const char* nonce;
    const char* aad;
    std::string plain;  // bytes
    const char* sealed;  // ciphertext || tag, hex
};

// Checks both directions of a known-answer test through the module's bare AEAD.
void check_vector(const aead_vector& v) {
    INFO(v.name);
    auto key = hex(v.key), nonce = hex(v.nonce), aad = hex(v.aad);
    std::vector<std::uint8_t> out(v.plain.size() + 16);
    std::size_t n = 0;
    REQUIRE(test_entries().test_aead_seal(v.suite, key.data(), nonce.data(), aad.data(), aad.size(), v.plain.data(),
                                 v.plain.size(), out.data(), out.size(), &n) == PERCORE_SEAL_OK);
    CHECK(to_hex(out.data(), n) == v.sealed);

    auto sealed = hex(v.sealed);
    std::vector<std::uint8_t> back(sealed.size());
    REQUIRE(test_entries().test_aead_open(v.suite, key.data(), nonce.data(), aad.data(), aad.size(), sealed.data(),
                                 sealed.size(), back.data(), back.size(), &n) == PERCORE_SEAL_OK);
    CHECK(std::string(reinterpret_cast<const char*>(back.data()), n) == v.plain);

    sealed.back() ^= 1;  // a changed tag
    CHECK(test_entries().test_aead_open(v.suite, key.data(), nonce.data(), aad.data(), aad.size(), sealed.data(),
                               sealed.size(), back.data(), back.size(), &n) == PERCORE_SEAL_AUTH_FAILED);
}

std::string bytes_of(std::string_view hex_text) {
    auto b = hex(hex_text);
    return std::string(b.begin(), b.end());
}

// A key file holding 00 01 02 ... 1f.
constexpr const char* counting_key_hex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

seal_key load_key(const temp_dir& dir, const char* suite, std::string_view hex_text = counting_key_hex,
                  const char* name = "seal.key", const crypto_api& from = api()) {
    seal_suite_override forced(suite);
    write_file(dir.file(name), hex_text);
    auto key = seal_key::load(from, dir.file(name));
    if (!key) FAIL(text(key.error()));
    return std::move(*key);
}

std::string load_error(const temp_dir& dir, std::string_view content) {
    write_file(dir.file("bad.key"), content);
    auto key = seal_key::load(api(), dir.file("bad.key"));
    REQUIRE_FALSE(key.has_value());
    return text(key.error());
}

std::span<const char> view(const std::string& s) { return {s.data(), s.size()}; }
std::span<const char> view(const std::vector<char>& v) { return {v.data(), v.size()}; }

constexpr const char* both_suites[] = {"aes-256-gcm", "chacha20-poly1305"};

}  // namespace

TEST_CASE("ChaCha20-Poly1305 gives the ciphertext and tag of RFC 8439 section 2.8.2") {
    // RFC 8439, "ChaCha20 and Poly1305 for IETF Protocols", §2.8.2 (Example and Test Vector for
    // AEAD_CHACHA20_POLY1305).
    check_vector({"RFC 8439 2.8.2", PERCORE_SEAL_CHACHA20_POLY1305,
                  "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f", "070000004041424344454647",
                  "50515253c0c1c2c3c4c5c6c7",
                  "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
                  "sunscreen would be it.",
                  "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b"
                  "1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc"
                  "3ff4def08e4b7a9de576d26586cec64b6116"
                  "1ae10b594f09e26a7e902ecbd0600691"});
}

TEST_CASE("AES-256-GCM gives the ciphertexts and tags of the GCM specification's 256-bit test cases") {
    // McGrew and Viega, "The Galois/Counter Mode of Operation (GCM)", revised 2005, Appendix B:
    // test cases 13 (empty), 14 (one zero block) and 16 (60 bytes with 20 bytes of AAD).
    check_vector({"GCM test case 13", PERCORE_SEAL_AES_256_GCM,
                  "0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "",
                  "", "530f8afbc74536b9a963b4f1c4cb738b"});
    check_vector({"GCM test case 14", PERCORE_SEAL_AES_256_GCM,
                  "0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "",
                  bytes_of("00000000000000000000000000000000"),
                  "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919"});
    check_vector({"GCM test case 16", PERCORE_SEAL_AES_256_GCM,
                  "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
                  "feedfacedeadbeeffeedfacedeadbeefabaddad2",
                  bytes_of("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e24"
                           "49a6b525b16aedf5aa0de657ba637b39"),
                  "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838"
                  "c5f61e6393ba7a0abcc9f662"
                  "76fc6ece0f4e1768cddf8853bb2d551b"});
}

TEST_CASE("the sealed form of each suite is pinned") {
    // Computed independently (Python: hmac/hashlib for HKDF-SHA256, the `cryptography` package for
    // the AEADs) from module_abi.h's description: key file 00..1f, nonce a0..ab, associated data
    // "app\0key". Sealed values live on disk: this must never change.
    temp_dir dir;
    const std::string plain = "a sealed document";
    const std::string aad("app\0key", 7);
    const auto nonce = hex("a0a1a2a3a4a5a6a7a8a9aaab");
    struct pinned {
        const char* suite;
        const char* sealed;
    };
    for (const pinned& p : {pinned{"aes-256-gcm", "0101a0a1a2a3a4a5a6a7a8a9aaab4011f1f950545183ecc97e7500ce5d15eb17d7"
                                                  "2187f1d844b13ddf4a333a607e1b"},
                            pinned{"chacha20-poly1305", "0102a0a1a2a3a4a5a6a7a8a9aaab30f62beea979f79b596b4f5f72e6832f"
                                                        "131a8dfc5ea66dbadb9340b50cedee1579"}}) {
        INFO(p.suite);
        seal_key key = load_key(dir, p.suite, counting_key_hex, "seal.key", test_api());  // for the test entry
        std::vector<char> out(plain.size() + PERCORE_SEAL_OVERHEAD);
        std::size_t n = 0;
        REQUIRE(test_entries().test_seal_with_nonce(key.native(), nonce.data(), aad.data(), aad.size(), plain.data(),
                                           plain.size(), out.data(), out.size(), &n) == PERCORE_SEAL_OK);
        CHECK(to_hex(out.data(), n) == p.sealed);
        auto opened = key.open_to_vector(view(out), view(aad));
        REQUIRE(opened.has_value());
        CHECK(std::string(opened->begin(), opened->end()) == plain);
    }
}

TEST_CASE("seal and open round trip with each suite forced by PERCORE_SEAL_SUITE") {
    temp_dir dir;
    for (const char* suite : both_suites) {
        INFO(suite);
        seal_key key = load_key(dir, suite);
        CHECK(key.suite_name() == suite);
        for (std::size_t size : {0, 1, 15, 16, 17, 1000, 100000}) {
            std::string plain(size, '\0');
            for (std::size_t i = 0; i < size; ++i) plain[i] = static_cast<char>(i * 31 + 7);
            auto sealed = key.seal_to_vector(view(plain));
            REQUIRE(sealed.has_value());
            CHECK(sealed->size() == seal_key::sealed_size(size));
            CHECK(static_cast<unsigned char>((*sealed)[0]) == PERCORE_SEAL_FORMAT_V1);
            CHECK(static_cast<unsigned char>((*sealed)[1]) ==
                  (std::string_view(suite) == "aes-256-gcm" ? PERCORE_SEAL_AES_256_GCM : PERCORE_SEAL_CHACHA20_POLY1305));
            auto opened = key.open_to_vector(view(*sealed));
            REQUIRE(opened.has_value());
            CHECK(std::string(opened->begin(), opened->end()) == plain);
        }
    }
}

TEST_CASE("a value sealed with one suite opens with a key that seals with the other") {
    temp_dir dir;
    seal_key aes = load_key(dir, "aes-256-gcm");
    seal_key chacha = load_key(dir, "chacha20-poly1305");
    const std::string plain = "moved between machines";
    auto from_aes = aes.seal_to_vector(view(plain));
    auto from_chacha = chacha.seal_to_vector(view(plain));
    REQUIRE(from_aes.has_value());
    REQUIRE(from_chacha.has_value());
    auto a = chacha.open_to_vector(view(*from_aes));
    auto c = aes.open_to_vector(view(*from_chacha));
    REQUIRE(a.has_value());
    REQUIRE(c.has_value());
    CHECK(std::string(a->begin(), a->end()) == plain);
    CHECK(std::string(c->begin(), c->end()) == plain);
}

TEST_CASE("sealing the same value twice gives different sealed forms") {
    temp_dir dir;
    seal_key key = load_key(dir, nullptr);
    const std::string plain = "same";
    auto first = key.seal_to_vector(view(plain));
    auto second = key.seal_to_vector(view(plain));
    REQUIRE(first.has_value());
    REQUIRE(second.has_value());
    CHECK(*first != *second);  // fresh random nonces
}

TEST_CASE("changing any byte of a sealed value makes open fail") {
    temp_dir dir;
    for (const char* suite : both_suites) {
        INFO(suite);
        seal_key key = load_key(dir, suite);
        const std::string plain = "twenty-one bytes long";
        auto sealed = key.seal_to_vector(view(plain), view(std::string("ctx")));
        REQUIRE(sealed.has_value());
        for (std::size_t i = 0; i < sealed->size(); ++i) {
            for (unsigned char flip : {0x01, 0x03, 0x80, 0xff}) {  // 0x03 turns suite 1 into 2 and back
                std::vector<char> changed = *sealed;
                changed[i] = static_cast<char>(changed[i] ^ flip);
                std::vector<char> out(plain.size(), 'x');
                auto opened = key.open(view(changed), out, view(std::string("ctx")));
                CAPTURE(i);
                CAPTURE(static_cast<int>(flip));
                REQUIRE_FALSE(opened.has_value());
                if (i == 0) CHECK(opened.error() == errc::not_sealed);
                else if (i == 1 && flip != 0x03) CHECK(opened.error() == errc::unknown_suite);
                else CHECK(opened.error() == errc::authentication_failed);
                CHECK(std::string(out.begin(), out.end()).find("twenty") == std::string::npos);  // nothing leaks
            }
        }
    }
}

TEST_CASE("every truncation of a sealed value makes open fail") {
    temp_dir dir;
    for (const char* suite : both_suites) {
        INFO(suite);
        seal_key key = load_key(dir, suite);
        auto sealed = key.seal_to_vector(view(std::string("truncate me")));
        REQUIRE(sealed.has_value());
        for (std::size_t len = 0; len < sealed->size(); ++len) {
            CAPTURE(len);
            auto opened = key.open_to_vector(std::span<const char>(sealed->data(), len));
            REQUIRE_FALSE(opened.has_value());
            if (len < PERCORE_SEAL_OVERHEAD) CHECK(opened.error() == errc::truncated);
            else CHECK(opened.error() == errc::authentication_failed);
        }
        std::vector<char> longer = *sealed;
        longer.push_back(0);
        CHECK_FALSE(key.open_to_vector(view(longer)).has_value());
    }
}

TEST_CASE("open needs the associated data that seal was given") {
    temp_dir dir;
    seal_key key = load_key(dir, nullptr);
    auto sealed = key.seal_to_vector(view(std::string("value")), view(std::string("app/key-1")));
    REQUIRE(sealed.has_value());
    CHECK(key.open_to_vector(view(*sealed), view(std::string("app/key-1"))).has_value());
    auto other = key.open_to_vector(view(*sealed), view(std::string("app/key-2")));
    REQUIRE_FALSE(other.has_value());
    CHECK(other.error() == errc::authentication_failed);
    CHECK_FALSE(key.open_to_vector(view(*sealed)).has_value());
}

TEST_CASE("a value sealed under one key does not open under another") {
    temp_dir dir;
    seal_key one = load_key(dir, nullptr, counting_key_hex, "one.key");
    seal_key two = load_key(dir, nullptr, "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "two.key");
    auto sealed = one.seal_to_vector(view(std::string("secret")));
    REQUIRE(sealed.has_value());
    auto opened = two.open_to_vector(view(*sealed));
    REQUIRE_FALSE(opened.has_value());
    CHECK(opened.error() == errc::authentication_failed);
}

TEST_CASE("seal and open report an output buffer that is too small") {
    temp_dir dir;
    seal_key key = load_key(dir, nullptr);
    const std::string plain = "0123456789";
    std::vector<char> out(seal_key::sealed_size(plain.size()) - 1);
    auto sealed = key.seal(view(plain), out);
    REQUIRE_FALSE(sealed.has_value());
    CHECK(sealed.error() == errc::output_too_small);
    out.resize(seal_key::sealed_size(plain.size()));
    REQUIRE(key.seal(view(plain), out).has_value());
    std::vector<char> back(plain.size() - 1);
    auto opened = key.open(view(out), back);
    REQUIRE_FALSE(opened.has_value());
    CHECK(opened.error() == errc::output_too_small);
}

TEST_CASE("without PERCORE_SEAL_SUITE the suite follows the CPU's AES instructions") {
    temp_dir dir;
    seal_key key = load_key(dir, nullptr);
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    bool aes = false, carryless = false;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
        line += ' ';
        aes = line.find(" aes ") != std::string::npos;
        carryless = line.find(" pclmulqdq ") != std::string::npos || line.find(" pmull ") != std::string::npos;
        break;
    }
    MESSAGE("CPU has AES instructions: " << (aes && carryless) << "; sealing with " << key.suite_name());
    CHECK(key.suite_name() == (aes && carryless ? "aes-256-gcm" : "chacha20-poly1305"));
}

TEST_CASE("an unknown PERCORE_SEAL_SUITE is an error that names the choices") {
    temp_dir dir;
    write_file(dir.file("seal.key"), counting_key_hex);
    seal_suite_override forced("aes-128-cbc");
    auto key = seal_key::load(api(), dir.file("seal.key"));
    REQUIRE_FALSE(key.has_value());
    CHECK(text(key.error()) == "PERCORE_SEAL_SUITE=aes-128-cbc: expected aes-256-gcm or chacha20-poly1305");
}

TEST_CASE("a key file may hold whitespace around its 64 hex digits, in either case") {
    temp_dir dir;
    seal_key plain = load_key(dir, "chacha20-poly1305", counting_key_hex, "plain.key");
    seal_key spaced = load_key(dir, "chacha20-poly1305",
                               "\n  000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F \r\n\t", "spaced.key");
    auto sealed = plain.seal_to_vector(view(std::string("same key")));
    REQUIRE(sealed.has_value());
    CHECK(spaced.open_to_vector(view(*sealed)).has_value());
}

TEST_CASE("a key file with too few or too many hex digits is refused with the count") {
    temp_dir dir;
    std::string digits = counting_key_hex;
    CHECK(load_error(dir, digits.substr(0, 63)) ==
          "seal key file " + dir.file("bad.key") + " holds 63 hex digits; it must hold exactly 64 (a 32-byte key)");
    CHECK(load_error(dir, digits + "0").find("holds 65 hex digits") != std::string::npos);
    CHECK(load_error(dir, "").find("holds 0 hex digits") != std::string::npos);
    CHECK(load_error(dir, "\n\n").find("holds 0 hex digits") != std::string::npos);
}

TEST_CASE("a key file with anything but hex digits inside is refused with the place") {
    temp_dir dir;
    std::string digits = counting_key_hex;
    std::string with_g = digits;
    with_g[10] = 'g';
    CHECK(load_error(dir, with_g) == "seal key file " + dir.file("bad.key") + ": 'g' at byte 10 is not a hex digit");
    std::string with_space = digits.substr(0, 32) + " " + digits.substr(32);
    CHECK(load_error(dir, with_space).find("byte 0x20 at byte 32 is not a hex digit") != std::string::npos);
    CHECK(load_error(dir, "0x" + digits.substr(2)).find("'x' at byte 1") != std::string::npos);
    CHECK(load_error(dir, std::string(64, '\0')).find("byte 0x00 at byte 0") != std::string::npos);
}

TEST_CASE("a missing or oversized key file is refused clearly") {
    temp_dir dir;
    auto missing = seal_key::load(api(), dir.file("nope.key"));
    REQUIRE_FALSE(missing.has_value());
    CHECK(text(missing.error()) == "cannot read seal key file " + dir.file("nope.key") + ": No such file or directory");
    CHECK(load_error(dir, std::string(5000, ' ')).find("is larger than 4096 bytes") != std::string::npos);
    auto folder = seal_key::load(api(), dir.path());
    REQUIRE_FALSE(folder.has_value());
    CHECK(text(folder.error()).find("is not a regular file") != std::string::npos);
}

TEST_CASE("a key made from 32 bytes opens what the key file of their hex sealed, with each suite") {
    temp_dir dir;
    auto bytes = hex(counting_key_hex);
    REQUIRE(bytes.size() == 32);
    for (const char* suite : both_suites) {
        seal_key from_file = load_key(dir, suite);
        seal_suite_override forced(suite);
        auto from_bytes = seal_key::from_bytes(api(), std::span<const std::uint8_t, 32>(bytes.data(), 32));
        REQUIRE_MESSAGE(from_bytes.has_value(), suite);
        CHECK(from_bytes->suite_name() == suite);
        auto sealed = from_file.seal_to_vector(view(std::string("batch")), view(std::string("hook")));
        REQUIRE(sealed.has_value());
        auto opened = from_bytes->open_to_vector(view(*sealed), view(std::string("hook")));
        REQUIRE(opened.has_value());
        CHECK(std::string(opened->begin(), opened->end()) == "batch");
    }
}

TEST_CASE("a key made from other bytes does not open what another key sealed") {
    std::array<std::uint8_t, 32> a{}, b{};
    b[31] = 1;
    auto one = seal_key::from_bytes(api(), a);
    auto two = seal_key::from_bytes(api(), b);
    REQUIRE(one.has_value());
    REQUIRE(two.has_value());
    auto sealed = one->seal_to_vector(view(std::string("secret")));
    REQUIRE(sealed.has_value());
    auto opened = two->open_to_vector(view(*sealed));
    REQUIRE_FALSE(opened.has_value());
    CHECK(opened.error() == errc::authentication_failed);
}

TEST_CASE("a key from bytes with an unknown PERCORE_SEAL_SUITE is an error that names the choices") {
    std::array<std::uint8_t, 32> k{};
    seal_suite_override forced("rot13");
    auto key = seal_key::from_bytes(api(), k);
    REQUIRE_FALSE(key.has_value());
    CHECK(text(key.error()).find("aes-256-gcm or chacha20-poly1305") != std::string::npos);
}
