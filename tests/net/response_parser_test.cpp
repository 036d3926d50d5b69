// The client's response parser: a table of responses, each fed whole, split in two at every
// offset and byte by byte, must give the same outcome; malformed heads and every bound.
#include <doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "net/response_parser.hpp"

using namespace percore::net;

namespace {

// Everything a parse reports, copied out so that feeds can be compared.
struct parsed {
    response_parser::state outcome = response_parser::state::need_more;
    response_error error = response_error::none;
    std::string reason;
    int status = 0;
    std::string phrase;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    std::uint64_t body_bytes = 0;
    bool keep_alive = false;
    std::string leftover;    // bytes after a done response, not consumed

    bool operator==(const parsed&) const = default;
};

[[maybe_unused]] doctest::String toString(const parsed& p) {
    std::string text = "{outcome " + std::to_string(static_cast<int>(p.outcome)) + " " + to_string(p.error) + " " +
                       p.reason + ", status " + std::to_string(p.status) + ", body " + std::to_string(p.body.size()) +
                       "/" + std::to_string(p.body_bytes) + ", keep " + std::to_string(p.keep_alive) +
                       ", leftover " + std::to_string(p.leftover.size()) + "}";
    return text.c_str();
}

// Feeds `pieces` in order; `eof` calls finish() after them when the response is not over.
parsed parse_pieces(const std::vector<std::string_view>& pieces, bool eof, client_limits limits = {}) {
    response_parser parser(limits);
    parsed p;
    response_parser::result r{};
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        r = parser.feed(pieces[i]);
        if (r.outcome == response_parser::state::need_more) {
            REQUIRE(r.consumed == pieces[i].size());   // need_more takes every byte
            continue;
        }
        if (r.outcome == response_parser::state::done) {
            p.leftover = std::string(pieces[i].substr(r.consumed));
            for (std::size_t j = i + 1; j < pieces.size(); ++j) p.leftover += pieces[j];
        }
        break;
    }
    if (r.outcome == response_parser::state::need_more && eof) r = parser.finish();
    p.outcome = r.outcome;
    p.error = r.error;
    p.reason = r.reason;
    const response_message& m = parser.message();
    p.status = m.status;
    p.phrase = m.reason;
    for (const response_field& f : m.fields) p.fields.emplace_back(f.name, f.value);
    p.body = m.body;
    p.body_bytes = m.body_bytes;
    p.keep_alive = r.outcome == response_parser::state::done && parser.keep_alive();
    return p;
}

parsed parse_whole(std::string_view in, bool eof, client_limits limits = {}) { return parse_pieces({in}, eof, limits); }

parsed parse_split(std::string_view in, std::size_t split, bool eof, client_limits limits = {}) {
    return parse_pieces({in.substr(0, split), in.substr(split)}, eof, limits);
}

parsed parse_bytewise(std::string_view in, bool eof, client_limits limits = {}) {
    std::vector<std::string_view> bytes;
    for (std::size_t i = 0; i < in.size(); ++i) bytes.push_back(in.substr(i, 1));
    return parse_pieces(bytes, eof, limits);
}

client_limits small_limits() {
    client_limits l;
    l.max_head_bytes = 64;
    l.max_header_fields = 3;
    l.max_kept_body_bytes = 4;
    l.max_response_bytes = 128;
    return l;
}

struct table_case {
    const char* name;
    std::string input;
    bool eof;                  // the peer closes after the input
    response_error expected;   // none: done
    client_limits limits = {};
};

std::vector<table_case> response_table() {
    return {
        {"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, response_error::none},
        {"bare LF lines", "HTTP/1.1 503 Busy\nretry-after: 5\n\n", true, response_error::none},
        {"no reason phrase", "HTTP/1.1 204\r\n\r\n", false, response_error::none},
        {"chunked with a trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: v\r\n\r\n",
         false, response_error::none},
        {"interim heads skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n",
         false, response_error::none},
        {"close-delimited", "HTTP/1.1 500 Oops\r\nContent-Type: text/plain\r\n\r\nsomething broke", true, response_error::none},
        {"http/1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false, response_error::none},
        {"connection close", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", false, response_error::none},
        {"bytes after the response", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200", false, response_error::none},
        {"304 has no body", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", false, response_error::none},
        {"eof mid-body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true, response_error::truncated},
        {"eof mid-head", "HTTP/1.1 200 OK\r\nContent-Le", true, response_error::truncated},
        {"eof before anything", "", true, response_error::truncated},
        {"not http", "\x15\x03\x03\x00\x02\x02\x28", false, response_error::malformed},
        {"bad status code", "HTTP/1.1 2x0 OK\r\n\r\n", false, response_error::malformed},
        {"http/2 status line", "HTTP/2 200\r\n\r\n", false, response_error::malformed},
        {"obs-fold", "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", false, response_error::malformed},
        {"space before colon", "HTTP/1.1 200 OK\r\nA : b\r\n\r\n", false, response_error::malformed},
        {"content-length and chunked", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", false,
         response_error::malformed},
        {"conflicting content-lengths", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", false,
         response_error::malformed},
        {"bad content-length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, response_error::malformed},
        {"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false, response_error::malformed},
        {"101 nobody asked for", "HTTP/1.1 101 Switching Protocols\r\n\r\n", false, response_error::malformed},
        {"head over its bound", "HTTP/1.1 200 OK\r\nX: " + std::string(60, 'a') + "\r\n\r\n", false, response_error::too_large,
         small_limits()},
        {"too many fields", "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", false, response_error::too_large,
         small_limits()},
        {"body kept in part", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", false, response_error::none,
         small_limits()},
        {"content-length past the hard bound", "HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n", false,
         response_error::too_large},
        {"close-delimited past the hard bound", "HTTP/1.1 200 OK\r\n\r\n" + std::string(200, 'z'), true,
         response_error::too_large, small_limits()},
        {"chunks past the hard bound", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(30, '1') + "\r\n",
         false, response_error::too_large},
        {"endless interim heads", [] {
             std::string s;
             for (int i = 0; i < 10; ++i) s += "HTTP/1.1 100 Continue\r\n\r\n";
             return s;
         }(), false, response_error::too_large, small_limits()},
    };
}

}  // namespace

TEST_CASE("every response in the table gets its expected outcome when fed whole") {
    for (const table_case& c : response_table()) {
        CAPTURE(std::string(c.name));
        const parsed p = parse_whole(c.input, c.eof, c.limits);
        CHECK(p.error == c.expected);
        CHECK(p.outcome == (c.expected == response_error::none ? response_parser::state::done : response_parser::state::error));
    }
}

TEST_CASE("every response in the table parses the same when split in two at any offset and byte by byte") {
    for (const table_case& c : response_table()) {
        CAPTURE(std::string(c.name));
        const parsed whole = parse_whole(c.input, c.eof, c.limits);
        for (std::size_t split = 0; split <= c.input.size(); ++split) {
            CAPTURE(split);
            CHECK(parse_split(c.input, split, c.eof, c.limits) == whole);
        }
        CHECK(parse_bytewise(c.input, c.eof, c.limits) == whole);
    }
}

TEST_CASE("a content-length response reports its status, fields and body and keeps the connection") {
    const parsed p = parse_whole("HTTP/1.1 201 Created\r\nX-Id: 7 \r\nContent-Length: 5\r\n\r\nhello", false);
    CHECK(p.status == 201);
    CHECK(p.phrase == "Created");
    CHECK((p.fields == std::vector<std::pair<std::string, std::string>>{{"X-Id", "7"}, {"Content-Length", "5"}}));
    CHECK(p.body == "hello");
    CHECK(p.keep_alive);
}

TEST_CASE("field names are found whatever their case") {
    response_parser parser;
    REQUIRE(parser.feed("HTTP/1.1 503 Busy\r\nRETRY-after: 30\r\nContent-Length: 0\r\n\r\n").outcome ==
            response_parser::state::done);
    const response_field* f = parser.message().find("Retry-After");
    REQUIRE(f != nullptr);
    CHECK(f->value == "30");
    CHECK(parser.message().find("Location") == nullptr);
}

TEST_CASE("a chunked body is decoded and the connection kept") {
    const parsed p = parse_whole("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", false);
    CHECK(p.body == "abc");
    CHECK(p.keep_alive);
}

TEST_CASE("interim 1xx heads are skipped and the final status is reported") {
    response_parser parser;
    REQUIRE(parser.feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n").outcome ==
            response_parser::state::done);
    CHECK(parser.message().status == 302);
    CHECK(parser.message().interim_heads == 1);
    CHECK(parser.message().find("Location")->value == "/x");
}

TEST_CASE("a close-delimited body ends at the close and does not keep the connection") {
    const parsed p = parse_whole("HTTP/1.1 500 Oops\r\n\r\nsomething broke", true);
    CHECK(p.outcome == response_parser::state::done);
    CHECK(p.body == "something broke");
    CHECK_FALSE(p.keep_alive);
}

TEST_CASE("Connection: close and HTTP/1.0 do not keep the connection") {
    CHECK_FALSE(parse_whole("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false).keep_alive);
    CHECK_FALSE(parse_whole("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false).keep_alive);
}

TEST_CASE("bytes after a complete response are left unconsumed") {
    const parsed p = parse_whole("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxyz", false);
    CHECK(p.body == "x");
    CHECK(p.leftover == "yz");
}

TEST_CASE("a body past the kept bound is counted and discarded") {
    const parsed p = parse_whole("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", false, small_limits());
    CHECK(p.outcome == response_parser::state::done);
    CHECK(p.body == "0123");
    CHECK(p.body_bytes == 10);
}

TEST_CASE("a receiver that answers without end is cut off at the hard bound without reading past it") {
    client_limits l = small_limits();
    response_parser parser(l);
    REQUIRE(parser.feed("HTTP/1.1 200 OK\r\n\r\n").outcome == response_parser::state::need_more);
    const std::string flood(1000, 'z');
    const response_parser::result r = parser.feed(flood);
    CHECK(r.outcome == response_parser::state::error);
    CHECK(r.error == response_error::too_large);
    CHECK(parser.consumed_bytes() == l.max_response_bytes);
    CHECK(parser.message().body.size() == l.max_kept_body_bytes);
}

TEST_CASE("a Content-Length over the hard bound is too_large as soon as the head is read") {
    response_parser parser;
    const response_parser::result r = parser.feed("HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n");
    CHECK(r.error == response_error::too_large);
    CHECK(parser.message().status == 200);
}

TEST_CASE("an error is final until reset, and reset parses the next response") {
    response_parser parser;
    REQUIRE(parser.feed("HTTP/1.1 2x0\r\n\r\n").outcome == response_parser::state::error);
    CHECK(parser.feed("HTTP/1.1 200 OK\r\n\r\n").error == response_error::malformed);
    parser.reset();
    CHECK(parser.feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").outcome == response_parser::state::done);
}

namespace {
struct sunk {
    std::string bytes;
    std::vector<int> statuses;
    static void write(void* self, int status, std::string_view piece) {
        auto* s = static_cast<sunk*>(self);
        s->bytes.append(piece);
        s->statuses.push_back(status);
    }
};
}  // namespace

TEST_CASE("with a body sink every body byte goes to it, with the status, for every split, and none is kept") {
    const std::string body(70000, 'x');   // past max_kept_body_bytes (64 KiB)
    const std::string chunked_body = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    const std::string length_body = "HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + body;
    for (const auto& [wire, expected] : {std::pair{chunked_body, std::string("hello world")}, std::pair{length_body, body}}) {
        for (std::size_t split : {std::size_t{1}, std::size_t{7}, wire.size() / 2, wire.size()}) {
            client_limits limits;
            limits.max_response_bytes = 1u << 20;
            response_parser p(limits);
            sunk s;
            p.set_body_sink({&sunk::write, &s});
            response_parser::result r;
            for (std::size_t at = 0; at < wire.size(); at += split)
                r = p.feed(std::string_view(wire).substr(at, split));
            CHECK(r.outcome == response_parser::state::done);
            CHECK(s.bytes == expected);
            CHECK(p.message().body.empty());
            CHECK(p.message().body_bytes == expected.size());
            for (int status : s.statuses) CHECK(status == 200);
        }
    }
}
