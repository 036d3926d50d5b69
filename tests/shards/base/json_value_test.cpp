#include <doctest.h>

#include <string>

#include "shards/base/json_text.hpp"
#include "shards/base/json_value.hpp"

using namespace percore::shards;

TEST_CASE("an object with every kind of value is read whole") {
    auto v = parse_json(R"( {"s":"a\"b\u00e9\ud83d\ude00","n":42,"t":true,"f":false,"z":null,"a":[1,{"x":{}}],"o":{"k":"v"}} )");
    REQUIRE(v);
    CHECK(v->find("s")->text == "a\"b\xc3\xa9\xf0\x9f\x98\x80");
    CHECK(v->find("n")->as_count() == 42);
    CHECK(v->find("t")->flag);
    CHECK_FALSE(v->find("f")->flag);
    CHECK(v->find("f")->what == json_value::kind::boolean);
    CHECK(v->find("z")->what == json_value::kind::null);
    CHECK(v->find("a")->items.size() == 2);
    CHECK(v->find("o")->find("k")->text == "v");
    CHECK(v->find("missing") == nullptr);
}

TEST_CASE("only whole numbers without sign, fraction or exponent are counts") {
    for (const char* text : {"-1", "1.5", "1e3", "0.0", "99999999999999999999"}) {
        auto v = parse_json(text);
        REQUIRE(v);
        CHECK_FALSE(v->as_count());
    }
    CHECK(parse_json("0")->as_count() == 0);
    CHECK(parse_json("9223372036854775807")->as_count() == 9223372036854775807ull);
    CHECK_FALSE(parse_json("9223372036854775808")->as_count());
}

TEST_CASE("malformed texts are refused with a reason") {
    for (const char* text : {"", "{", "{\"a\"}", "{\"a\":1,}", "[1,]", "{\"a\":1}x", "\"\\x\"", "\"\x01\"", "01",
                             "{\"a\":1,\"a\":2}", "\"\\ud800\"", "\"\\udc00\"", "nul", "\"\xff\"", "{'a':1}"}) {
        auto v = parse_json(text);
        CHECK_MESSAGE(!v, text);
        if (!v) CHECK(v.error().reason.starts_with("JSON: "));
    }
}

TEST_CASE("nesting deeper than the bound and texts larger than the bound are refused") {
    std::string deep(max_json_depth + 2, '[');
    deep += std::string(max_json_depth + 2, ']');
    CHECK_FALSE(parse_json(deep));
    std::string big = "\"" + std::string(max_json_bytes, 'a') + "\"";
    CHECK_FALSE(parse_json(big));
}

TEST_CASE("every byte value at every position of strings up to 20 bytes is escaped exactly when JSON needs it") {
    // the eight-bytes-at-a-time scan must find an escape wherever it sits, and take bytes of 0x7f
    // and above (UTF-8) as they are
    for (std::size_t len = 1; len <= 20; ++len)
        for (std::size_t at = 0; at < len; ++at)
            for (int byte = 0; byte < 256; ++byte) {
                std::string s(len, 'x');
                s[at] = static_cast<char>(byte);
                const bool escaped = byte < 0x20 || byte == '"' || byte == '\\';
                std::string appended;
                append_json_string(appended, s);
                std::string put(json_string_max_bytes(s.size()), '\0');
                put.resize(static_cast<std::size_t>(put_json_string(put.data(), s) - put.data()));
                CAPTURE(len);
                CAPTURE(at);
                CAPTURE(byte);
                REQUIRE(appended == put);
                CHECK((appended.size() == len + 2) == !escaped);
                if (byte < 0x80) {  // whole UTF-8 only: a lone high byte is not text the parser takes
                    auto v = parse_json(appended);
                    REQUIRE(v);
                    CHECK(v->text == s);
                }
            }
}

TEST_CASE("a string written by append_json_string reads back the same, escapes and runs alike") {
    const std::string cases[] = {"", "plain", "\"", "\\", "a\"b\\c", std::string("nul\0x", 5), "\x01\x1f tab\t nl\n",
                                 "utf-8 \xc3\xa9\xf0\x9f\x98\x80", "end\""};
    for (const std::string& s : cases) {
        CAPTURE(s);
        std::string text;
        append_json_string(text, s);
        auto v = parse_json(text);
        REQUIRE(v);
        CHECK(v->text == s);
    }
}

namespace {

// {"aaa":0,"aab":0,…}: `n` distinct three-letter names (review M1: ~8,000 fill a 64 KiB body).
std::string object_of_distinct_names(std::size_t n) {
    std::string text = "{";
    for (std::size_t i = 0; i < n; ++i) {
        if (i) text.push_back(',');
        const char name[] = {'"', static_cast<char>('a' + i / 676 % 26), static_cast<char>('a' + i / 26 % 26),
                             static_cast<char>('a' + i % 26), '"', ':', '0'};
        text.append(name, sizeof name);
    }
    text.push_back('}');
    return text;
}

}  // namespace

TEST_CASE("an object of 8,000 distinct member names within 64 KiB is read whole") {
    const std::string text = object_of_distinct_names(8000);
    REQUIRE(text.size() <= max_json_bytes);
    auto v = parse_json(text);
    REQUIRE(v);
    CHECK(v->names.size() == 8000);
    CHECK(v->find("aaa") != nullptr);
}

TEST_CASE("an object of 8,000 member names is refused when its last name repeats its first") {
    std::string text = object_of_distinct_names(8000);
    text.pop_back();
    text.append(",\"aaa\":1}");
    auto v = parse_json(text);
    REQUIRE_FALSE(v);
    CHECK(v.error().reason == "JSON: duplicate member name");
}

TEST_CASE("a duplicate member name inside a nested object is refused") {
    CHECK_FALSE(parse_json(R"({"a":{"x":1,"y":2,"x":3},"b":1})"));
    CHECK(parse_json(R"({"a":{"x":1},"b":{"x":1}})"));
}
