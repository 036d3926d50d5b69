#include <doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "net/chunked_decoder.hpp"

using namespace percore::net;

namespace {

using status = chunked_decoder::status;

void append_to_string(void* context, const char* data, std::size_t size) {
    REQUIRE(size > 0);
    static_cast<std::string*>(context)->append(data, size);
}

struct decoded {
    status state = status::need_more;
    int http_status = 0;
    std::string body;
    std::size_t consumed = 0;  // over every call; 0 after an error

    bool operator==(const decoded&) const = default;
};

[[maybe_unused]] doctest::String toString(const decoded& d) {
    const std::string text = "{state " + std::to_string(static_cast<int>(d.state)) + ", status " +
                             std::to_string(d.http_status) + ", body " + std::to_string(d.body.size()) +
                             " bytes, consumed " + std::to_string(d.consumed) + "}";
    return text.c_str();
}

// Hands the decoder a heap copy of exactly the bytes it may read, so that the address sanitizer
// catches reads past them.
chunked_decoder::result decode_exact(chunked_decoder& decoder, std::string_view bytes, std::string& body) {
    std::unique_ptr<char[]> copy(new char[bytes.empty() ? 1 : bytes.size()]);
    std::memcpy(copy.get(), bytes.data(), bytes.size());
    return decoder.decode({copy.get(), bytes.size()}, append_to_string, &body);
}

void record(decoded& d, const chunked_decoder::result& r) {
    d.state = r.state;
    d.http_status = r.http_status;
    if (r.state == status::error) {
        CHECK(std::strlen(r.reason) > 0);
        d.consumed = 0;
    } else {
        d.consumed += r.consumed;
    }
}

decoded decode_whole(std::string_view encoded, chunked_limits limits = {}) {
    chunked_decoder decoder(limits);
    decoded d;
    record(d, decode_exact(decoder, encoded, d.body));
    return d;
}

decoded decode_split(std::string_view encoded, std::size_t split, chunked_limits limits = {}) {
    chunked_decoder decoder(limits);
    decoded d;
    record(d, decode_exact(decoder, encoded.substr(0, split), d.body));
    if (d.state == status::need_more) record(d, decode_exact(decoder, encoded.substr(d.consumed), d.body));
    return d;
}

decoded decode_bytewise(std::string_view encoded, chunked_limits limits = {}) {
    chunked_decoder decoder(limits);
    decoded d;
    std::string pending;
    for (char c : encoded) {
        pending += c;
        const chunked_decoder::result r = decode_exact(decoder, pending, d.body);
        record(d, r);
        if (r.state != status::need_more) break;
        pending.erase(0, r.consumed);
    }
    return d;
}

struct valid_body {
    const char* name;
    std::string encoded;
    std::string data;
    std::string after = {};
};

std::vector<valid_body> valid_bodies() {
    return {
        {"one chunk", "5\r\nhello\r\n0\r\n\r\n", "hello"},
        {"several chunks with upper and lower case hex",
         "3\r\nabc\r\nA\r\n0123456789\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
         "abc0123456789abcdefghijklmnopqrstuvwxyz"},
        {"an empty body", "0\r\n\r\n", ""},
        {"leading zeros in sizes", "0005\r\nhello\r\n000\r\n\r\n", "hello"},
        {"chunk extensions", "5;name=value;quoted=\"a b;c\"\r\nhello\r\n0;last\r\n\r\n", "hello"},
        {"whitespace before an extension", "5 \t;ext\r\nhello\r\n0 \r\n\r\n", "hello"},
        {"trailer fields", "5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Other: d\te\r\n\r\n", "hello"},
        {"trailer values with colons and an empty value", "0\r\nX-A: a:b\r\nX-B:\r\nX-C:: \r\n\r\n", ""},
        {"bare LF everywhere", "5\nhello\n0\nX-T: 1\n\n", "hello"},
        {"CR LF inside chunk data", "4\r\n\r\n\r\n\r\n0\r\n\r\n", "\r\n\r\n"},
        {"binary chunk data", std::string("3\r\n\0\xff\n\r\n0\r\n\r\n", 13), std::string("\0\xff\n", 3)},
        {"bytes after the body", "5\r\nhello\r\n0\r\n\r\n", "hello", "GET / HTTP/1.1\r\n\r\n"},
    };
}

}  // namespace

TEST_CASE("valid chunked bodies decode to their data when fed whole") {
    for (const valid_body& b : valid_bodies()) {
        CAPTURE(std::string(b.name));
        const decoded d = decode_whole(b.encoded + b.after);
        CHECK(d.state == status::done);
        CHECK(d.body == b.data);
        CHECK(d.consumed == b.encoded.size());
    }
}

TEST_CASE("valid chunked bodies decode the same when split in two at any offset") {
    for (const valid_body& b : valid_bodies()) {
        CAPTURE(std::string(b.name));
        const std::string input = b.encoded + b.after;
        const decoded whole = decode_whole(input);
        for (std::size_t split = 0; split <= input.size(); ++split) {
            CAPTURE(split);
            CHECK(decode_split(input, split) == whole);
        }
    }
}

TEST_CASE("valid chunked bodies decode the same when fed byte by byte") {
    for (const valid_body& b : valid_bodies()) {
        CAPTURE(std::string(b.name));
        const std::string input = b.encoded + b.after;
        CHECK(decode_bytewise(input) == decode_whole(input));
    }
}

TEST_CASE("bytes following the chunked body are not consumed") {
    const std::string body = "5\r\nhello\r\n0\r\n\r\n";
    chunked_decoder decoder;
    std::string data;
    const auto r = decoder.decode(body + "PUT /x HTTP/1.1\r\n", append_to_string, &data);
    CHECK(r.state == status::done);
    CHECK(r.consumed == body.size());
    CHECK(decoder.body_bytes() == 5);
}

TEST_CASE("a decoder that is done consumes nothing more") {
    chunked_decoder decoder;
    std::string data;
    REQUIRE(decoder.decode("0\r\n\r\n", append_to_string, &data).state == status::done);
    const auto r = decoder.decode("1\r\nx\r\n", append_to_string, &data);
    CHECK(r.state == status::done);
    CHECK(r.consumed == 0);
    CHECK(data.empty());
}

TEST_CASE("a reset decoder decodes a new body") {
    chunked_decoder decoder;
    std::string data;
    REQUIRE(decoder.decode("3\r\nabc\r\n0\r\n\r\n", append_to_string, &data).state == status::done);
    decoder.reset();
    CHECK(decoder.body_bytes() == 0);
    data.clear();
    REQUIRE(decoder.decode("2\r\nde\r\n0\r\n\r\n", append_to_string, &data).state == status::done);
    CHECK(data == "de");
}

TEST_CASE("large chunk data reaches the sink in pieces of the sizes fed") {
    const std::string payload(100000, 'z');
    const std::string encoded = "186a0\r\n" + payload + "\r\n0\r\n\r\n";
    chunked_decoder decoder;
    std::string data;
    std::size_t offset = 0;
    chunked_decoder::result r;
    while (offset < encoded.size()) {
        const std::size_t piece = std::min<std::size_t>(4096, encoded.size() - offset);
        r = decoder.decode(std::string_view(encoded).substr(offset, piece), append_to_string, &data);
        offset += r.consumed;
        if (r.state != status::need_more) break;
    }
    CHECK(r.state == status::done);
    CHECK(offset == encoded.size());
    CHECK(data == payload);
}

struct invalid_body {
    const char* name;
    std::string encoded;
    int http_status;
    chunked_limits limits = {};
};

std::vector<invalid_body> invalid_bodies() {
    chunked_limits small;
    small.max_body_bytes = 10;
    small.max_chunk_line_bytes = 8;
    small.max_trailer_bytes = 16;
    return {
        {"a size that is not hex", "g\r\nhello\r\n0\r\n\r\n", 400},
        {"a size line without digits", "\r\nhello\r\n0\r\n\r\n", 400},
        {"an extension without a size", ";ext\r\n0\r\n\r\n", 400},
        {"a sign before the size", "+5\r\nhello\r\n0\r\n\r\n", 400},
        {"a 0x prefix", "0x5\r\nhello\r\n0\r\n\r\n", 400},
        {"whitespace between hex digits", "1 1\r\n", 400},
        {"a CR not followed by LF after the size", "5\rhello\r\n0\r\n\r\n", 400},
        {"a control byte in an extension", "5;a\x01\r\nhello\r\n0\r\n\r\n", 400},
        {"an overflowing size", "10000000000000000\r\n", 400, {std::uint64_t(-1), 4096, 16384}},
        {"data longer than its size", "5\r\nhello!\r\n0\r\n\r\n", 400},
        {"data followed by CR and another byte", "5\r\nhello\rx0\r\n\r\n", 400},
        {"data without its CRLF", "5\r\nhello0\r\n\r\n", 400},
        {"a size line over the limit", "5;abcdefgh\r\nhello\r\n0\r\n\r\n", 400, small},
        {"a size of many zeros over the limit", "000000005\r\nhello\r\n0\r\n\r\n", 400, small},
        {"a trailer section over the limit", "0\r\nX-Trailer: abcdefgh\r\n\r\n", 400, small},
        {"a trailer CR not followed by LF", "0\r\nX: a\rb\r\n\r\n", 400},
        {"a NUL in a trailer", std::string("0\r\nX: \0\r\n\r\n", 11), 400},
        {"a trailer line without a colon", "0\r\nNoColon\r\n\r\n", 400},
        {"a trailer line without a colon ended by bare LF", "0\nNoColon\n\n", 400},
        {"a trailer line without a colon after a valid one", "5\r\nhello\r\n0\r\nX: 1\r\nbad value\r\n\r\n", 400},
        {"a trailer line with an empty name", "0\r\n: v\r\n\r\n", 400},
        {"whitespace before a trailer colon", "0\r\nX : v\r\n\r\n", 400},
        {"a trailer line starting with whitespace", "0\r\nX: a\r\n b\r\n\r\n", 400},
        {"a non-token trailer name", "0\r\nX(Y): v\r\n\r\n", 400},
        {"one chunk over the body limit", "b\r\n", 413, small},
        {"chunks adding up over the body limit", "6\r\nabcdef\r\n5\r\nghijk\r\n0\r\n\r\n", 413, small},
        {"a default-limit body over 16 MiB", "1000001\r\n", 413},
    };
}

TEST_CASE("malformed or oversized chunked bodies are errors for every split") {
    for (const invalid_body& b : invalid_bodies()) {
        CAPTURE(std::string(b.name));
        const decoded whole = decode_whole(b.encoded, b.limits);
        CHECK(whole.state == status::error);
        CHECK(whole.http_status == b.http_status);
        CHECK(decode_bytewise(b.encoded, b.limits) == whole);
        for (std::size_t split = 0; split <= b.encoded.size(); ++split) {
            CAPTURE(split);
            CHECK(decode_split(b.encoded, split, b.limits) == whole);
        }
    }
}

TEST_CASE("a size line at the limit is accepted") {
    chunked_limits limits;
    limits.max_chunk_line_bytes = 8;
    const decoded d = decode_whole("5;abcdef\r\nhello\r\n0\r\n\r\n", limits);
    CHECK(d.state == status::done);
    CHECK(d.body == "hello");
}

TEST_CASE("a body of exactly the maximum size is accepted") {
    chunked_limits limits;
    limits.max_body_bytes = 10;
    const decoded d = decode_whole("6\r\nabcdef\r\n4\r\nghij\r\n0\r\n\r\n", limits);
    CHECK(d.state == status::done);
    CHECK(d.body == "abcdefghij");
}

TEST_CASE("a trailer section at the limit is accepted") {
    chunked_limits limits;
    limits.max_trailer_bytes = 16;
    const decoded d = decode_whole("0\r\nX-Trailer: a\r\n\r\n", limits);
    CHECK(d.state == status::done);
}

TEST_CASE("a decoder that failed keeps answering the same error") {
    chunked_decoder decoder;
    std::string data;
    const auto first = decoder.decode("z\r\n", append_to_string, &data);
    REQUIRE(first.state == status::error);
    const auto again = decoder.decode("0\r\n\r\n", append_to_string, &data);
    CHECK(again.state == status::error);
    CHECK(again.http_status == first.http_status);
}
