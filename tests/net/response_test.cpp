#include <doctest.h>

#include <string>

#include "net/output_buffer.hpp"
#include "net/response.hpp"

using namespace percore::net;

namespace {
std::string drain(output_buffer& out) {
    std::string s;
    iovec iov[16];
    std::size_t n = out.gather(iov, 16);
    for (std::size_t i = 0; i < n; ++i) s.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    out.consume(s.size());
    return s;
}
constexpr std::string_view date = "Date: Mon, 30 Nov 2026 01:42:00 GMT\r\n";
}  // namespace

TEST_CASE("the date line is formatted as an IMF-fixdate") {
    char line[date_line_bytes];
    format_date_line(1796002920, line);  // 2026-11-30 01:42:00 UTC
    CHECK(std::string_view(line, date_line_bytes) == date);
}

TEST_CASE("the keep-alive line gives the idle timeout in whole seconds, never 0") {
    char line[max_keep_alive_line_bytes];
    auto text = [&](std::chrono::milliseconds idle) {
        return std::string(line, format_keep_alive_line(idle, line));
    };
    CHECK(text(std::chrono::seconds(10)) == "Keep-Alive: timeout=10\r\n");
    CHECK(text(std::chrono::milliseconds(2500)) == "Keep-Alive: timeout=2\r\n");
    CHECK(text(std::chrono::milliseconds(500)) == "Keep-Alive: timeout=1\r\n");   // 0 would mean "no timeout" to Node
    CHECK(text(std::chrono::seconds(86400)) == "Keep-Alive: timeout=86400\r\n");
}

TEST_CASE("an etag renders as 16 quoted hex digits and parses back") {
    char text[etag_text_bytes];
    format_etag(0x00066174b28a61fcull, text);
    CHECK(std::string_view(text, etag_text_bytes) == "\"00066174b28a61fc\"");
    std::uint64_t v = 0;
    CHECK(parse_etag("\"00066174b28a61fc\"", false, v));
    CHECK(v == 0x00066174b28a61fcull);
    CHECK_FALSE(parse_etag("W/\"00066174b28a61fc\"", false, v));
    CHECK(parse_etag("W/\"00066174b28a61fc\"", true, v));
    CHECK_FALSE(parse_etag("\"xyz\"", true, v));
    CHECK_FALSE(parse_etag("\"00066174B28A61FC\"", true, v));
}

TEST_CASE("an etag renders every hex digit in its place, at both ends of the range") {
    char text[etag_text_bytes];
    format_etag(0x0123456789abcdefull, text);
    CHECK(std::string_view(text, etag_text_bytes) == "\"0123456789abcdef\"");
    format_etag(0xfedcba9876543210ull, text);
    CHECK(std::string_view(text, etag_text_bytes) == "\"fedcba9876543210\"");
    format_etag(0, text);
    CHECK(std::string_view(text, etag_text_bytes) == "\"0000000000000000\"");
    format_etag(~0ull, text);
    CHECK(std::string_view(text, etag_text_bytes) == "\"ffffffffffffffff\"");
}

TEST_CASE("an error answer carries a JSON body and the connection decision") {
    output_buffer out;
    response r(out, date, connection_header::close, false);
    r.error(405, "method not allowed", "GET, HEAD");
    CHECK(drain(out) ==
          "HTTP/1.1 405 Method Not Allowed\r\n" + std::string(date) +
              "Connection: close\r\nAllow: GET, HEAD\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n"
              "{\"error\":\"method not allowed\"}");
}

TEST_CASE("an error reason that names what a client sent is JSON-escaped, and the length counts the escapes") {
    output_buffer out;
    response r(out, date, connection_header::none, false);
    r.error(400, std::string("unknown field 'a\"b\\\n\x01\x7f\xc3\xa9' in the delivery body"));
    const std::string body = "{\"error\":\"unknown field 'a\\\"b\\\\\\u000a\\u0001\\u007f\xc3\xa9' in the delivery body\"}";
    CHECK(drain(out) == "HTTP/1.1 400 Bad Request\r\n" + std::string(date) +
                            "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                            "\r\n\r\n" + body);
}

TEST_CASE("a HEAD answer keeps the body's length and leaves the body out") {
    output_buffer out;
    response r(out, date, connection_header::none, true);
    r.json(200, "{\"a\":1}");
    CHECK(drain(out) == "HTTP/1.1 200 OK\r\n" + std::string(date) +
                            "Content-Type: application/json\r\nContent-Length: 7\r\n\r\n");
}

TEST_CASE("a referenced body is sent in place between copied bytes and released once sent") {
    output_buffer out;
    int released = 0;
    std::string big(100000, 'x');
    out.append("head");
    out.add_reference(big.data(), big.size(), [](void* c) { ++*static_cast<int*>(c); }, &released);
    out.append("tail");
    CHECK(out.pending_bytes() == 100008);
    iovec iov[8];
    REQUIRE(out.gather(iov, 8) == 3);
    CHECK(iov[1].iov_base == big.data());
    out.consume(50);
    CHECK(released == 0);
    REQUIRE(out.gather(iov, 8) == 2);
    CHECK(iov[0].iov_base == big.data() + 46);
    out.consume(100000 - 46);
    CHECK(released == 1);
    CHECK(drain(out) == "tail");
    CHECK(out.empty());
}

TEST_CASE("clearing an output buffer releases references that were never sent") {
    output_buffer out;
    int released = 0;
    out.add_reference("abc", 3, [](void* c) { ++*static_cast<int*>(c); }, &released);
    out.clear();
    CHECK(released == 1);
    CHECK(out.empty());
}

TEST_CASE("the refusals of admission have their own status lines") {
    CHECK(status_line(401) == "HTTP/1.1 401 Unauthorized\r\n");
    CHECK(status_line(403) == "HTTP/1.1 403 Forbidden\r\n");
    CHECK(status_line(429) == "HTTP/1.1 429 Too Many Requests\r\n");
    CHECK(status_line(410) == "HTTP/1.1 410 Gone\r\n");  // an expired feed cursor (SPEC §8)
    CHECK(status_line(421) == "HTTP/1.1 421 Misdirected Request\r\n");  // a write on a follower (SPEC §10)
}

TEST_CASE("a 429 error answer carries Retry-After") {
    output_buffer out;
    response res(out, date, connection_header::none, false);
    res.error(429, "rate");
    CHECK(drain(out).find("\r\nRetry-After: 1\r\n") != std::string::npos);
}

TEST_CASE("a document head in one piece is what the field-by-field calls write") {
    for (auto conn : {connection_header::none, connection_header::keep_alive, connection_header::close}) {
        for (std::uint64_t length : {0ull, 7ull, 64ull, 1048576ull, 18446744073709551615ull}) {
            for (std::string_view type : {std::string_view("application/octet-stream"), std::string_view(),
                                          std::string_view("text/plain; charset=utf-8")}) {
                CAPTURE(length);
                CAPTURE(type);
                output_buffer by_field, whole;
                response a(by_field, date, conn, false);
                a.start(200);
                a.header("Content-Type", type);
                a.etag(0x0123456789abcdefull + length);
                a.header("Accept-Ranges", "bytes");
                a.content_length(length);
                a.end_head();
                response b(whole, date, conn, false);
                b.document_head(200, type, 0x0123456789abcdefull + length, length);
                CHECK(b.status() == 200);
                CHECK(drain(whole) == drain(by_field));
            }
        }
    }
}
