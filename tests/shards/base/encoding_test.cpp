#include <doctest.h>

#include <string>

#include "shards/base/encoding.hpp"

using namespace percore::shards;

namespace {
std::string b64(std::string_view s) {
    std::string out;
    append_base64(out, bytes_of(s));
    return out;
}
std::string unb64(std::string_view s) {
    auto v = decode_base64(s);
    REQUIRE(v);
    return std::string(v->begin(), v->end());
}
}  // namespace

TEST_CASE("base64 encodes RFC 4648's test vectors with padding") {
    CHECK(b64("") == "");
    CHECK(b64("f") == "Zg==");
    CHECK(b64("fo") == "Zm8=");
    CHECK(b64("foo") == "Zm9v");
    CHECK(b64("foob") == "Zm9vYg==");
    CHECK(b64("fooba") == "Zm9vYmE=");
    CHECK(b64("foobar") == "Zm9vYmFy");
}

TEST_CASE("base64 decodes RFC 4648's test vectors") {
    CHECK(unb64("") == "");
    CHECK(unb64("Zg==") == "f");
    CHECK(unb64("Zm8=") == "fo");
    CHECK(unb64("Zm9vYmFy") == "foobar");
}

TEST_CASE("base64 of every byte value decodes back") {
    std::string all;
    for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
    CHECK(unb64(b64(all)) == all);
    CHECK(b64("\xfb\xff").find_first_of("+/") != std::string::npos);
}

TEST_CASE("base64 that is not canonical or not padded is refused") {
    CHECK(!decode_base64("Zg"));
    CHECK(!decode_base64("Zh=="));   // unused bits set
    CHECK(!decode_base64("Zm9=v"));
    CHECK(!decode_base64("Zm9v YmFy"));
    CHECK(!decode_base64("Z==="));
    CHECK(!decode_base64("Zm-_"));
}

TEST_CASE("base64url has no padding and uses - and _") {
    std::string out;
    const std::uint8_t bytes[] = {0xfb, 0xff};
    append_base64url(out, bytes);
    CHECK(out == "-_8");
}

TEST_CASE("hex is lower case and decodes back, and odd or upper-case hex is refused") {
    std::string out;
    const std::uint8_t bytes[] = {0x00, 0xab, 0xff};
    append_hex(out, bytes);
    CHECK(out == "00abff");
    auto back = decode_hex(out);
    REQUIRE(back);
    CHECK(back->size() == 3);
    CHECK((*back)[1] == 0xab);
    CHECK(!decode_hex("abc"));
    CHECK(!decode_hex("AB"));
}
