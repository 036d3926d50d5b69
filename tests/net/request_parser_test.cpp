#include <doctest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "net/request_parser.hpp"

using namespace percore::net;

namespace {

// Everything a parse reports, copied out of the parser's views so that results of different
// feeds can be compared.
struct parsed {
    parse_outcome outcome = parse_outcome::incomplete;
    int status = 0;
    std::string reason;
    method verb = method::other;
    std::string method_text;
    std::string target;
    int version_minor = -1;
    bool has_content_length = false;
    std::uint64_t content_length = 0;
    bool chunked = false;
    connection_option connection = connection_option::none;
    bool expect_continue = false;
    bool expect_unsupported = false;
    bool has_host = false;
    std::string host;
    std::vector<std::pair<std::string, std::string>> fields;
    std::size_t head_bytes = 0;

    bool operator==(const parsed&) const = default;
};

[[maybe_unused]] doctest::String toString(const parsed& p) {
    std::string text = "{outcome " + std::to_string(static_cast<int>(p.outcome)) + ", status " +
                       std::to_string(p.status) + " " + p.reason + ", " + p.method_text + " " + p.target +
                       " 1." + std::to_string(p.version_minor) + ", head_bytes " + std::to_string(p.head_bytes) +
                       ", " + std::to_string(p.fields.size()) + " fields}";
    return text.c_str();
}

// A copy of the first `size` bytes in a heap block of exactly that size, so that the address
// sanitizer sees any read past the bytes handed to the parser.
class exact_buffer {
public:
    exact_buffer(std::string_view bytes, std::size_t size) : data_(new char[size == 0 ? 1 : size]), size_(size) {
        std::memcpy(data_.get(), bytes.data(), size);
    }
    std::string_view view() const { return {data_.get(), size_}; }

private:
    std::unique_ptr<char[]> data_;
    std::size_t size_;
};

parsed capture(const parse_result& r, const request_head& head) {
    parsed p;
    p.outcome = r.outcome;
    if (r.outcome == parse_outcome::error) {
        p.status = r.status;
        p.reason = r.reason;
        return p;
    }
    if (r.outcome != parse_outcome::complete) return p;
    p.verb = head.verb;
    p.method_text = head.method_text;
    p.target = head.target;
    p.version_minor = head.version_minor;
    p.has_content_length = head.has_content_length;
    p.content_length = head.content_length;
    p.chunked = head.chunked;
    p.connection = head.connection;
    p.expect_continue = head.expect_continue;
    p.expect_unsupported = head.expect_unsupported;
    p.has_host = head.has_host;
    p.host = head.host;
    for (const header_field& f : head.fields) p.fields.emplace_back(f.name, f.value);
    p.head_bytes = head.head_bytes;
    return p;
}

struct feeder {
    explicit feeder(header_limits limits) : parser(limits), storage(limits.max_header_fields) {}

    parse_result feed(std::string_view input, std::size_t size) {
        buffer = std::make_unique<exact_buffer>(input, size);
        return parser.parse(buffer->view(), head, storage);
    }

    request_parser parser;
    std::vector<header_field> storage;
    request_head head;
    std::unique_ptr<exact_buffer> buffer;
};

parsed parse_whole(std::string_view input, header_limits limits = {}) {
    feeder f(limits);
    const parse_result r = f.feed(input, input.size());
    return capture(r, f.head);
}

parsed parse_split(std::string_view input, std::size_t split, header_limits limits = {}) {
    feeder f(limits);
    parse_result r = f.feed(input, split);
    if (r.outcome == parse_outcome::incomplete) r = f.feed(input, input.size());
    return capture(r, f.head);
}

parsed parse_bytewise(std::string_view input, header_limits limits = {}) {
    feeder f(limits);
    parse_result r{};
    for (std::size_t size = 1; size <= input.size(); ++size) {
        r = f.feed(input, size);
        if (r.outcome != parse_outcome::incomplete) break;
    }
    return capture(r, f.head);
}

constexpr int incomplete = -1;
constexpr int complete = 0;

struct table_case {
    const char* name;
    std::string input;
    int expected;  // incomplete, complete or an error status
    std::function<void(const parsed&)> check = {};
    header_limits limits = {};
};

header_limits small_limits() {
    header_limits l;
    l.max_request_line_bytes = 40;
    l.max_header_section_bytes = 64;
    l.max_header_fields = 4;
    return l;
}

std::string repeat(std::string_view piece, std::size_t times) {
    std::string s;
    for (std::size_t i = 0; i < times; ++i) s += piece;
    return s;
}

std::function<void(const parsed&)> reason_is(const char* reason) {
    return [reason](const parsed& p) { CHECK(p.reason == reason); };
}

std::vector<table_case> request_table() {
    const std::string get = "GET /a HTTP/1.1\r\nHost: h\r\n";
    std::vector<table_case> t;
    // Valid requests.
    t.push_back({"a minimal GET", "GET / HTTP/1.1\r\nHost: example\r\n\r\n", complete, [](const parsed& p) {
                     CHECK(p.verb == method::get);
                     CHECK(p.method_text == "GET");
                     CHECK(p.target == "/");
                     CHECK(p.version_minor == 1);
                     CHECK(p.has_host);
                     CHECK(p.host == "example");
                     CHECK(p.fields.size() == 1);
                     CHECK(p.head_bytes == 33);
                 }});
    t.push_back({"bare LF terminators", "GET /x HTTP/1.1\nHost: h\n\n", complete, [](const parsed& p) {
                     CHECK(p.target == "/x");
                     CHECK(p.host == "h");
                     CHECK(p.head_bytes == 25);
                 }});
    t.push_back({"mixed CRLF and LF", "GET /x HTTP/1.1\r\nHost: h\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.head_bytes == 27); }});
    t.push_back({"leading empty lines are skipped", "\r\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", complete,
                 [](const parsed& p) {
                     CHECK(p.verb == method::get);
                     CHECK(p.head_bytes == 30);
                 }});
    t.push_back({"HTTP/1.0 needs no Host", "GET / HTTP/1.0\r\n\r\n", complete, [](const parsed& p) {
                     CHECK(p.version_minor == 0);
                     CHECK_FALSE(p.has_host);
                     CHECK(p.fields.empty());
                 }});
    t.push_back({"HTTP/1.9 is treated as 1.1", "GET / HTTP/1.9\r\nHost: h\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.version_minor == 1); }});
    t.push_back({"every known method", "HEAD / HTTP/1.1\r\nHost: h\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.verb == method::head); }});
    t.push_back({"PUT", "PUT /a/b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", complete,
                 [](const parsed& p) {
                     CHECK(p.verb == method::put);
                     CHECK(p.has_content_length);
                     CHECK(p.content_length == 5);
                     CHECK(p.head_bytes == 49);
                 }});
    t.push_back({"DELETE", "DELETE /a/b HTTP/1.1\r\nHost: h\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.verb == method::del); }});
    t.push_back({"POST", "POST / HTTP/1.1\r\nHost: h\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.verb == method::post); }});
    t.push_back({"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", complete, [](const parsed& p) {
                     CHECK(p.verb == method::options);
                     CHECK(p.target == "*");
                 }});
    t.push_back({"PATCH", "PATCH / HTTP/1.1\r\nHost: h\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.verb == method::patch); }});
    t.push_back({"an unknown token method is other", "BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n", complete,
                 [](const parsed& p) {
                     CHECK(p.verb == method::other);
                     CHECK(p.method_text == "BREW");
                 }});
    t.push_back({"methods are case-sensitive", "get / HTTP/1.1\r\nHost: h\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.verb == method::other); }});
    t.push_back({"field values are trimmed and obs-text is kept",
                 "GET / HTTP/1.1\r\nHost:\t h \t\r\nX-Y: a \xe2\x82\xac\tb  \r\nEmpty:\r\n\r\n", complete,
                 [](const parsed& p) {
                     REQUIRE(p.fields.size() == 3);
                     CHECK(p.fields[0] == std::pair<std::string, std::string>("Host", "h"));
                     CHECK(p.fields[1].second == "a \xe2\x82\xac\tb");
                     CHECK(p.fields[2].second.empty());
                 }});
    t.push_back({"a repeated equal Content-Length", get + "Content-Length: 7\r\ncontent-length: 7\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.content_length == 7); }});
    t.push_back({"a Content-Length list of equal values", get + "Content-Length: 12 , 12,12\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.content_length == 12); }});
    t.push_back({"the largest Content-Length", get + "Content-Length: 18446744073709551615\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.content_length == 18446744073709551615ull); }});
    t.push_back({"Transfer-Encoding chunked", get + "Transfer-Encoding: Chunked\r\n\r\n", complete, [](const parsed& p) {
                     CHECK(p.chunked);
                     CHECK_FALSE(p.has_content_length);
                 }});
    t.push_back({"Connection close wins over keep-alive", get + "Connection: keep-alive, Close\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.connection == connection_option::close); }});
    t.push_back({"Connection keep-alive among other tokens", get + "Connection: Upgrade ,KEEP-ALIVE\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.connection == connection_option::keep_alive); }});
    t.push_back({"no Connection field", get + "\r\n", complete,
                 [](const parsed& p) { CHECK(p.connection == connection_option::none); }});
    t.push_back({"Expect 100-continue", get + "Expect: 100-Continue\r\n\r\n", complete, [](const parsed& p) {
                     CHECK(p.expect_continue);
                     CHECK_FALSE(p.expect_unsupported);
                 }});
    t.push_back({"an unknown Expect", get + "Expect: 200-ok\r\n\r\n", complete, [](const parsed& p) {
                     CHECK_FALSE(p.expect_continue);
                     CHECK(p.expect_unsupported);
                 }});
    t.push_back({"bytes after the head are left alone", get + "\r\nGET /next HTTP/1.1\r\n", complete,
                 [](const parsed& p) { CHECK(p.head_bytes == 28); }});
    t.push_back({"a request line at the limit", "GET /" + std::string(26, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.target.size() == 27); }, small_limits()});
    t.push_back({"a header section at the limit", "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(48, 'v') + "\r\n\r\n",
                 complete, {}, small_limits()});
    t.push_back({"fields at the limit", "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.fields.size() == 4); }, small_limits()});
    // Unfinished heads.
    t.push_back({"a head without its empty line", get, incomplete});
    t.push_back({"a request line without its end", "GET / HTTP/1.1", incomplete});
    t.push_back({"a lone CR at the end", get + "\r", incomplete});
    // 400: request line.
    t.push_back({"a non-token method", "GE(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400});
    t.push_back({"an empty method", " / HTTP/1.1\r\nHost: h\r\n\r\n", 400});
    t.push_back({"two spaces after the method", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400});
    t.push_back({"two spaces before the version", "GET /  HTTP/1.1\r\nHost: h\r\n\r\n", 400});
    t.push_back({"a tab as separator", "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", 400});
    t.push_back({"a control byte in the target", "GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n", 400});
    t.push_back({"obs-text in the target", "GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", 400});
    t.push_back({"no version", "GET /\r\n\r\n", 400});
    t.push_back({"a trailing space after the version", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400});
    t.push_back({"a lower-case protocol name", "GET / http/1.1\r\nHost: h\r\n\r\n", 400});
    t.push_back({"a two-digit minor version", "GET / HTTP/1.10\r\nHost: h\r\n\r\n", 400});
    t.push_back({"a version without minor", "GET / HTTP/1\r\nHost: h\r\n\r\n", 400});
    t.push_back({"a CR not followed by LF in the request line", "GET / HTTP/1.1\rHost: h\r\n\r\n", 400});
    t.push_back({"a double CR before LF", "GET / HTTP/1.1\r\r\nHost: h\r\n\r\n", 400});
    t.push_back({"binary garbage", std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\n", 10), 400});
    // 400: header fields.
    t.push_back({"whitespace before the colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400,
                 reason_is("whitespace before colon")});
    t.push_back({"obs-fold", get + "X: a\r\n b\r\n\r\n", 400, reason_is("obsolete line folding")});
    t.push_back({"a first field line starting with whitespace", "GET / HTTP/1.1\r\n\tHost: h\r\n\r\n", 400,
                 reason_is("obsolete line folding")});
    t.push_back({"an empty field name", get + ": v\r\n\r\n", 400, reason_is("empty header name")});
    t.push_back({"a field without colon", get + "NoColon\r\n\r\n", 400});
    t.push_back({"a non-token field name", get + "X(Y): v\r\n\r\n", 400});
    t.push_back({"NUL in a value", get + std::string("X: a\0b\r\n\r\n", 10), 400});
    t.push_back({"a CR inside a value", get + "X: a\rb\r\n\r\n", 400});
    t.push_back({"DEL in a value", get + "X: a\x7f\r\n\r\n", 400});
    t.push_back({"a line that is a lone CR", get + "\r\r\n\r\n", 400});
    t.push_back({"HTTP/1.1 without Host", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400, reason_is("missing host")});
    t.push_back({"two Host fields", get + "host: other\r\n\r\n", 400, reason_is("duplicate host")});
    // Host must be empty (RFC 9112 §3.2) or an authority: uri-host [":" port] (RFC 3986 §3.2).
    for (const char* host : {"a b", "a\tb", "exa mple:80", "a/b", "a@b", "user@h:80", "a:8x", "a:80:81", "a?b",
                             "a#b", "h\"x", "a%2", "a%zz", "[::1", "[::1]x", "[zz]", "[1:2:3:4:5:6:7:8:9]",
                             "[1::2::3]", "[::1.2.3.256]", "[v1]", "[v.x]", "::1", ":80", "\xc3\xa9", "a|b"}) {
        t.push_back({"an invalid Host", "GET / HTTP/1.1\r\nHost: " + std::string(host) + "\r\n\r\n", 400,
                     reason_is("malformed Host")});
    }
    t.push_back({"an invalid Host in HTTP/1.0", "GET / HTTP/1.0\r\nHost: a b\r\n\r\n", 400,
                 reason_is("malformed Host")});
    t.push_back({"an invalid Host before a malformed field", "GET / HTTP/1.1\r\nHost: a b\r\nX : y\r\n\r\n", 400,
                 reason_is("malformed Host")});
    for (const char* host : {"example.com", "example.com:8080", "h:", "127.0.0.1:80", "[::1]", "[::1]:8080",
                             "[2001:db8::7]", "[1:2:3:4:5:6:7:8]", "[::ffff:192.0.2.1]", "[::]", "[v1.fe80::a+en1]",
                             "a%2Db", "x-y_z~.!$&'()*+,;=", "EXAMPLE.COM"}) {
        const std::string expected = host;
        t.push_back({"a valid Host", "GET / HTTP/1.1\r\nHost: " + expected + "\r\n\r\n", complete,
                     [expected](const parsed& p) { CHECK(p.host == expected); }});
    }
    t.push_back({"an empty Host is allowed", "GET / HTTP/1.1\r\nHost:\r\n\r\n", complete, [](const parsed& p) {
                     CHECK(p.has_host);
                     CHECK(p.host.empty());
                 }});
    t.push_back({"a Host of only whitespace is empty", "GET / HTTP/1.1\r\nHost: \t \r\n\r\n", complete,
                 [](const parsed& p) { CHECK(p.host.empty()); }});
    t.push_back({"a signed Content-Length", get + "Content-Length: +5\r\n\r\n", 400});
    t.push_back({"a hex Content-Length", get + "Content-Length: 0x5\r\n\r\n", 400});
    t.push_back({"an empty Content-Length", get + "Content-Length:\r\n\r\n", 400});
    t.push_back({"a Content-Length list with an empty element", get + "Content-Length: 5,\r\n\r\n", 400});
    t.push_back({"an overflowing Content-Length", get + "Content-Length: 18446744073709551616\r\n\r\n", 400,
                 reason_is("invalid content-length")});
    t.push_back({"differing Content-Length fields", get + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400,
                 reason_is("conflicting content-length")});
    t.push_back({"a Content-Length list of differing values", get + "Content-Length: 5, 6\r\n\r\n", 400,
                 reason_is("conflicting content-length")});
    t.push_back({"Content-Length with Transfer-Encoding", get + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                 400, reason_is("content-length with transfer-encoding")});
    t.push_back({"Transfer-Encoding not ending in chunked", get + "Transfer-Encoding: chunked, gzip\r\n\r\n", 400,
                 reason_is("transfer-encoding not ending in chunked")});
    t.push_back({"Transfer-Encoding gzip alone", get + "Transfer-Encoding: gzip\r\n\r\n", 400});
    t.push_back({"chunked twice", get + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
                 reason_is("chunked applied twice")});
    t.push_back({"an empty Transfer-Encoding", get + "Transfer-Encoding: \r\n\r\n", 400});
    t.push_back({"chunked with a parameter is not chunked", get + "Transfer-Encoding: chunked;x=1\r\n\r\n", 400});
    t.push_back({"Transfer-Encoding in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
                 reason_is("transfer-encoding in http/1.0")});
    // 414, 431, 501, 505.
    t.push_back({"a request line over the limit", "GET /" + std::string(27, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", 414,
                 reason_is("request line too long"),
                 small_limits()});
    t.push_back({"an unterminated request line over the limit", "GET /" + std::string(60, 'a'), 414, {}, small_limits()});
    t.push_back({"an over-long request line with bad bytes is still 414", "G\x01T /" + std::string(60, 'a') + "\r\n", 414,
                 {}, small_limits()});
    t.push_back({"leading empty lines count toward the request line", "\r\n\r\nGET /" + std::string(24, 'a') +
                                                                        " HTTP/1.1\r\nHost: h\r\n\r\n",
                 414, {}, small_limits()});
    t.push_back({"a header section over the limit", "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(49, 'v') + "\r\n\r\n",
                 431, reason_is("header section too large"), small_limits()});
    t.push_back({"an unterminated header section over the limit", "GET / HTTP/1.1\r\nHost: h\r\n" + repeat("X: v\r\n", 20),
                 431, {}, small_limits()});
    t.push_back({"an over-long section with bad fields is still 431",
                 "GET / HTTP/1.1\r\nHost : h\r\n" + repeat("X: v\r\n", 20) + "\r\n", 431, {}, small_limits()});
    t.push_back({"too many fields", "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", 431,
                 reason_is("too many header fields"),
                 small_limits()});
    t.push_back({"gzip before chunked", get + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501,
                 reason_is("unsupported transfer coding")});
    t.push_back({"gzip and chunked in separate fields", get + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
                 501});
    t.push_back({"HTTP/2.0", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, reason_is("http version not supported")});
    t.push_back({"HTTP/0.9 spelled as a version", "GET / HTTP/0.9\r\n\r\n", 505});
    return t;
}

void check_expected(const table_case& c, const parsed& p) {
    if (c.expected == incomplete) {
        CHECK(p.outcome == parse_outcome::incomplete);
    } else if (c.expected == complete) {
        REQUIRE(p.outcome == parse_outcome::complete);
        if (c.check) c.check(p);
    } else {
        REQUIRE(p.outcome == parse_outcome::error);
        CHECK(p.status == c.expected);
        CHECK_FALSE(p.reason.empty());
        if (c.check) c.check(p);
    }
}

parse_result parse_once(request_parser& parser, std::string_view input, request_head& head,
                        std::vector<header_field>& storage) {
    return parser.parse(input, head, storage);
}

}  // namespace

TEST_CASE("every request in the table gets its expected outcome when fed whole") {
    for (const table_case& c : request_table()) {
        CAPTURE(std::string(c.name));
        CAPTURE(c.input);
        check_expected(c, parse_whole(c.input, c.limits));
    }
}

TEST_CASE("every request in the table parses the same when split in two at any offset") {
    for (const table_case& c : request_table()) {
        CAPTURE(std::string(c.name));
        const parsed whole = parse_whole(c.input, c.limits);
        for (std::size_t split = 0; split <= c.input.size(); ++split) {
            CAPTURE(split);
            CHECK(parse_split(c.input, split, c.limits) == whole);
        }
    }
}

TEST_CASE("every request in the table parses the same when fed byte by byte") {
    for (const table_case& c : request_table()) {
        CAPTURE(std::string(c.name));
        CHECK(parse_bytewise(c.input, c.limits) == parse_whole(c.input, c.limits));
    }
}

TEST_CASE("the table covers every error status") {
    std::vector<int> statuses;
    for (const table_case& c : request_table()) statuses.push_back(c.expected);
    for (int status : {400, 414, 431, 501, 505}) {
        CAPTURE(status);
        CHECK(std::find(statuses.begin(), statuses.end(), status) != statuses.end());
    }
}

TEST_CASE("a long target of visible bytes is taken whole and one bad byte anywhere in it is answered 400") {
    std::string visible;
    for (int c = 0x21; c < 0x7f; ++c) visible.push_back(static_cast<char>(c));
    const parsed ok = parse_whole("GET /" + visible + " HTTP/1.1\r\nHost: h\r\n\r\n");
    CHECK(ok.outcome == parse_outcome::complete);
    CHECK(ok.target == "/" + visible);
    for (const char bad : {'\x00', '\t', '\x1f', '\x7f', '\x80', '\xc3', '\xff'}) {
        for (std::size_t at = 0; at < 20; ++at) {
            std::string target = "/" + std::string(24, 'a');
            target[1 + at] = bad;
            CAPTURE(static_cast<int>(static_cast<unsigned char>(bad)));
            CAPTURE(at);
            const parsed p = parse_whole("GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n");
            CHECK(p.outcome == parse_outcome::error);
            CHECK(p.status == 400);
        }
    }
}

TEST_CASE("a request line longer than 8 KiB is answered 414") {
    const std::string line = "GET /" + std::string(8 * 1024, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n";
    const parsed p = parse_whole(line);
    CHECK(p.outcome == parse_outcome::error);
    CHECK(p.status == 414);
    CHECK(p.reason == "request line too long");
}

TEST_CASE("a request line of exactly 8 KiB is accepted") {
    const std::string target = "/" + std::string(8 * 1024 - 14, 'a');
    const std::string input = "GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n";
    const parsed p = parse_whole(input);
    REQUIRE(p.outcome == parse_outcome::complete);
    CHECK(p.target == target);
}

TEST_CASE("a request line that never ends is answered 414 once more than 8 KiB is buffered") {
    const std::string input = "GET /" + std::string(9 * 1024, 'a');
    request_parser parser;
    request_head head;
    std::vector<header_field> storage(100);
    CHECK(parse_once(parser, std::string_view(input).substr(0, 8 * 1024), head, storage).outcome ==
          parse_outcome::incomplete);
    const parse_result r = parse_once(parser, std::string_view(input).substr(0, 8 * 1024 + 1), head, storage);
    CHECK(r.outcome == parse_outcome::error);
    CHECK(r.status == 414);
}

TEST_CASE("a 8 KiB line waiting for its LF after CR is not cut off early") {
    const std::string input = "GET /" + std::string(8 * 1024 - 14, 'a') + " HTTP/1.1\r";
    request_parser parser;
    request_head head;
    std::vector<header_field> storage(100);
    CHECK(parse_once(parser, input, head, storage).outcome == parse_outcome::incomplete);
    const std::string rest = input + "\nHost: h\r\n\r\n";
    CHECK(parse_once(parser, rest, head, storage).outcome == parse_outcome::complete);
}

TEST_CASE("a header section that never ends is answered 431 once more than 16 KiB is buffered") {
    std::string input = "GET / HTTP/1.1\r\n";
    const std::size_t section_start = input.size();
    request_parser parser;
    request_head head;
    std::vector<header_field> storage(100);
    parse_result r{};
    for (int sent = 0; sent < 1000 && r.outcome == parse_outcome::incomplete; ++sent) {
        input += "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        r = parse_once(parser, input, head, storage);
    }
    CHECK(r.status == 431);
    CHECK(r.reason == std::string("header section too large"));
    CHECK(input.size() - section_start > 16 * 1024);
    CHECK(input.size() - section_start < 16 * 1024 + 64);
}

TEST_CASE("101 header fields are answered 431 and 100 are accepted") {
    std::string fields;
    for (int i = 0; i < 99; ++i) fields += "F" + std::to_string(i) + ": v\r\n";
    const std::string ok = "GET / HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n";
    const std::string too_many = "GET / HTTP/1.1\r\nHost: h\r\n" + fields + "Last: v\r\n\r\n";
    const parsed accepted = parse_whole(ok);
    REQUIRE(accepted.outcome == parse_outcome::complete);
    CHECK(accepted.fields.size() == 100);
    const parsed rejected = parse_whole(too_many);
    CHECK(rejected.outcome == parse_outcome::error);
    CHECK(rejected.status == 431);
}

TEST_CASE("pipelined heads are parsed one after the other from head_bytes") {
    const std::string first = "GET /one HTTP/1.1\r\nHost: h\r\n\r\n";
    const std::string second = "DELETE /two HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    const std::string input = first + second;
    request_parser parser;
    request_head head;
    std::vector<header_field> storage(100);

    parse_result r = parse_once(parser, input, head, storage);
    REQUIRE(r.outcome == parse_outcome::complete);
    CHECK(head.target == "/one");
    REQUIRE(head.head_bytes == first.size());

    parser.reset();
    const std::string_view rest = std::string_view(input).substr(head.head_bytes);
    r = parse_once(parser, rest, head, storage);
    REQUIRE(r.outcome == parse_outcome::complete);
    CHECK(head.verb == method::del);
    CHECK(head.target == "/two");
    CHECK(head.connection == connection_option::close);
    CHECK(head.head_bytes == second.size());
}

TEST_CASE("a reused head carries nothing over from the previous request") {
    request_parser parser;
    request_head head;
    std::vector<header_field> storage(100);
    REQUIRE(parse_once(parser, "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", head,
                       storage)
                .outcome == parse_outcome::complete);
    parser.reset();
    REQUIRE(parse_once(parser, "GET / HTTP/1.0\r\n\r\n", head, storage).outcome == parse_outcome::complete);
    CHECK_FALSE(head.has_content_length);
    CHECK_FALSE(head.expect_continue);
    CHECK_FALSE(head.has_host);
    CHECK(head.fields.empty());
}

TEST_CASE("an end of head split between CR and LF is found on the next call") {
    const std::string input = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    request_parser parser;
    request_head head;
    std::vector<header_field> storage(100);
    CHECK(parse_once(parser, std::string_view(input).substr(0, input.size() - 1), head, storage).outcome ==
          parse_outcome::incomplete);
    const parse_result r = parse_once(parser, input, head, storage);
    REQUIRE(r.outcome == parse_outcome::complete);
    CHECK(head.head_bytes == input.size());
}

TEST_CASE("find returns the first field with a name in any case") {
    request_parser parser;
    request_head head;
    std::vector<header_field> storage(100);
    REQUIRE(parse_once(parser, "GET / HTTP/1.1\r\nHost: h\r\nX-Tag: one\r\nx-tag: two\r\n\r\n", head, storage).outcome ==
            parse_outcome::complete);
    std::string_view value;
    CHECK(head.find("X-TAG", value));
    CHECK(value == "one");
    CHECK_FALSE(head.find("X-Missing", value));
    CHECK(value.empty());
}

TEST_CASE("iequals compares ASCII case-insensitively and nothing else") {
    CHECK(iequals("Content-Length", "content-length"));
    CHECK(iequals("", ""));
    CHECK_FALSE(iequals("host", "hosts"));
    CHECK_FALSE(iequals("a", "b"));
    CHECK_FALSE(iequals("@", "`"));
    CHECK_FALSE(iequals("[", "{"));
}

TEST_CASE("fields point into the caller's buffer without copies") {
    const std::string input = "GET /t HTTP/1.1\r\nHost: h\r\n\r\n";
    request_parser parser;
    request_head head;
    std::vector<header_field> storage(100);
    REQUIRE(parse_once(parser, input, head, storage).outcome == parse_outcome::complete);
    CHECK(head.target.data() == input.data() + 4);
    CHECK(head.fields.data() == storage.data());
    CHECK(head.host.data() == input.data() + 23);
}

TEST_CASE("a malformed request line is answered 400 before the header section arrives") {
    request_parser parser;
    request_head head;
    std::vector<header_field> storage(100);
    CHECK(parse_once(parser, "GET /a b HTTP/1.1", head, storage).outcome == parse_outcome::incomplete);
    const parse_result r = parse_once(parser, "GET /a b HTTP/1.1\r\n", head, storage);
    CHECK(r.outcome == parse_outcome::error);
    CHECK(r.status == 400);
}

TEST_CASE("a request line is not cut off early when the limit is the largest size") {
    header_limits limits;
    limits.max_request_line_bytes = static_cast<std::size_t>(-1);
    const parsed p = parse_bytewise("GET / HTTP/1.1\r\nHost: h\r\n\r\n", limits);
    CHECK(p.outcome == parse_outcome::complete);
}

TEST_CASE("one parser takes a Host it accepted before again, and still refuses a malformed one after it") {
    request_parser parser;
    std::vector<header_field> storage(100);
    auto parse_next = [&](const std::string& input) {
        request_head head;
        parser.reset();
        return std::pair{parse_once(parser, input, head, storage), std::string(head.host)};
    };
    for (int i = 0; i < 2; ++i) {
        auto [r, host] = parse_next("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
        CHECK(r.outcome == parse_outcome::complete);
        CHECK(host == "127.0.0.1:8080");
    }
    auto [bad, ignored] = parse_next("GET / HTTP/1.1\r\nHost: 127.0.0.1:80x0\r\n\r\n");
    CHECK(bad.outcome == parse_outcome::error);
    CHECK(bad.reason == std::string_view("malformed Host"));
    auto [longer, ignored2] = parse_next("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080 x\r\n\r\n");
    CHECK(longer.outcome == parse_outcome::error);
    auto [again, host] = parse_next("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
    CHECK(again.outcome == parse_outcome::complete);
}

TEST_CASE("valid_field_value takes what a parsed field value may be and refuses controls and edge whitespace") {
    CHECK(valid_field_value("text/plain; charset=utf-8"));
    CHECK(valid_field_value(""));
    CHECK(valid_field_value("a\tb \x80\xff"));  // HT, SP and obs-text inside
    CHECK_FALSE(valid_field_value("text/plain\r\nSet-Cookie: a=b"));
    CHECK_FALSE(valid_field_value("a\nb"));
    CHECK_FALSE(valid_field_value(std::string("a\0b", 3)));
    CHECK_FALSE(valid_field_value("a\x7f"));
    CHECK_FALSE(valid_field_value(" a"));
    CHECK_FALSE(valid_field_value("a\t"));
}

TEST_CASE("the first Origin field is noted in the head, any case of its name, and none when absent") {
    request_parser parser;
    std::vector<header_field> storage(100);
    request_head head;
    REQUIRE(parse_once(parser, "GET / HTTP/1.1\r\nHost: a\r\noRiGiN: http://x.example\r\nOrigin: http://y\r\n\r\n", head,
                       storage).outcome == parse_outcome::complete);
    CHECK(head.has_origin);
    CHECK(head.origin == "http://x.example");
    request_head none;
    parser.reset();
    REQUIRE(parse_once(parser, "GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n", none, storage).outcome ==
            parse_outcome::complete);
    CHECK_FALSE(none.has_origin);
    CHECK(none.expect_continue);
}
