// Fuzz target: net/request_parser with net/chunked_decoder, as a connection drives them.
//
// The input is the byte stream a client sends on one connection. A small connection model reads
// it: request_parser on the buffered bytes until a head is complete, then the body (Content-Length
// bytes, or the chunked decoder until its last chunk and trailers), then the next request
// (pipelining), until an error closes the connection. It writes a transcript: every head (method,
// target, version, every field, Content-Length, chunked, Connection, Expect, Host, head_bytes),
// every body's bytes, every error's status and reason, and what was left buffered at the end.
//
// Checked, with the default limits and again with tight ones (so the 414/431/413 paths are near):
// - split invariance (request_parser.hpp, chunked_decoder.hpp: "the same for every split"): the
//   transcript is identical whether the stream arrives whole, in two or three pieces cut at offsets
//   derived from the input, or (inputs up to 512 bytes) one byte at a time;
// - the parser's only state is where it has searched: after every call a fresh parser given the
//   same buffered bytes answers the same (outcome, status, reason, head);
// - heads are well formed: head_bytes inside the buffer and ending in LF, the request line within
//   max_request_line_bytes and the section within max_header_section_bytes, at most
//   max_header_fields fields, tchar names, values without CR/LF/NUL or outer whitespace,
//   Content-Length equal to every Content-Length field, chunked only in HTTP/1.1 without
//   Content-Length and with a Transfer-Encoding field, Host present in HTTP/1.1 and empty or made of
//   authority bytes only;
// - errors are 400/414/431/501/505 from the parser and 400/413 from the decoder, with a reason;
// - the decoder consumes everything while it needs more, never more than it was given, hands the
//   sink exactly body_bytes() bytes and never more than max_body_bytes.
// Any difference or broken rule aborts (libFuzzer keeps the input).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "net/chunked_decoder.hpp"
#include "net/request_parser.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace percore::fuzz {

namespace {

using net::chunked_decoder;
using net::chunked_limits;
using net::header_field;
using net::header_limits;
using net::parse_outcome;
using net::parse_result;
using net::request_head;
using net::request_parser;

struct limit_set {
    const char* name;
    header_limits head;
    chunked_limits chunked;
};

const limit_set limit_sets[] = {
    {"default limits", header_limits{}, chunked_limits{}},
    {"tight limits", header_limits{64, 256, 8}, chunked_limits{64, 8, 32}},
};

constexpr std::size_t max_requests = 32;

bool is_tchar(char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool is_ows(char c) { return c == ' ' || c == '\t'; }

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

std::string trim(std::string_view s) {
    while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
    return std::string(s);
}

std::vector<std::string> split_list(std::string_view value) {
    std::vector<std::string> out;
    for (;;) {
        const std::size_t comma = value.find(',');
        out.push_back(trim(value.substr(0, comma)));
        if (comma == std::string_view::npos) return out;
        value.remove_prefix(comma + 1);
    }
}

net::method method_of(std::string_view m) {
    if (m == "GET") return net::method::get;
    if (m == "HEAD") return net::method::head;
    if (m == "PUT") return net::method::put;
    if (m == "DELETE") return net::method::del;
    if (m == "POST") return net::method::post;
    if (m == "OPTIONS") return net::method::options;
    if (m == "PATCH") return net::method::patch;
    return net::method::other;
}

std::string describe(const request_head& h) {
    std::string out = "head method=" + printable(h.method_text) + " verb=" + std::to_string(static_cast<int>(h.verb)) +
                      " target=" + printable(h.target, 10000) + " minor=" + std::to_string(h.version_minor) +
                      " cl=" + (h.has_content_length ? std::to_string(h.content_length) : std::string("-")) +
                      " chunked=" + std::to_string(h.chunked) +
                      " connection=" + std::to_string(static_cast<int>(h.connection)) +
                      " expect=" + std::to_string(h.expect_continue) + std::to_string(h.expect_unsupported) +
                      " host=" + (h.has_host ? printable(h.host, 10000) : std::string("-")) +
                      " head_bytes=" + std::to_string(h.head_bytes) + " fields=" + std::to_string(h.fields.size());
    for (const header_field& f : h.fields) out += "\n  " + printable(f.name, 10000) + ": " + printable(f.value, 10000);
    return out + "\n";
}

std::string describe(const parse_result& r) {
    if (r.outcome == parse_outcome::incomplete) return "incomplete";
    if (r.outcome == parse_outcome::error) return "error " + std::to_string(r.status) + " " + r.reason;
    return "complete";
}

// The rules every complete head keeps (request_parser.hpp, docs/decisions.md "Server").
void check_head(const request_head& h, std::string_view buffered, const header_limits& limits) {
    const std::string what = describe(h);
    FUZZ_CHECK(h.head_bytes > 0 && h.head_bytes <= buffered.size(), what);
    FUZZ_CHECK(buffered[h.head_bytes - 1] == '\n', what);
    const std::string_view head_text = buffered.substr(0, h.head_bytes);
    const auto inside = [&](std::string_view v) {
        return v.empty() || (v.data() >= head_text.data() && v.data() + v.size() <= head_text.data() + head_text.size());
    };

    // The request line: after blank lines, up to its LF (blank lines count against its limit).
    std::size_t line_start = 0;
    for (;;) {
        if (line_start < head_text.size() && head_text[line_start] == '\n') {
            ++line_start;
        } else if (line_start + 1 < head_text.size() && head_text[line_start] == '\r' && head_text[line_start + 1] == '\n') {
            line_start += 2;
        } else {
            break;
        }
    }
    const std::size_t lf = head_text.find('\n', line_start);
    FUZZ_CHECK(lf != std::string_view::npos, what);
    std::size_t line_end = lf;
    if (line_end > line_start && head_text[line_end - 1] == '\r') --line_end;
    FUZZ_CHECK(line_end <= limits.max_request_line_bytes, what);
    FUZZ_CHECK(h.head_bytes - (lf + 1) <= limits.max_header_section_bytes, what);
    const std::string_view line = head_text.substr(line_start, line_end - line_start);
    FUZZ_CHECK(line.starts_with(h.method_text) && h.method_text.data() == line.data(), what);
    FUZZ_CHECK(!h.method_text.empty(), what);
    for (char c : h.method_text) FUZZ_CHECK(is_tchar(c), what);
    FUZZ_CHECK(h.verb == method_of(h.method_text), what);
    FUZZ_CHECK(!h.target.empty() && inside(h.target), what);
    for (char c : h.target) FUZZ_CHECK(c > 0x20 && c < 0x7f, what);
    FUZZ_CHECK(line.size() == h.method_text.size() + 1 + h.target.size() + 9, what);
    FUZZ_CHECK(line.substr(line.size() - 8, 5) == "HTTP/" && line[line.size() - 8 + 5] == '1', what);
    FUZZ_CHECK(h.version_minor == (line.back() == '0' ? 0 : 1), what);

    FUZZ_CHECK(h.fields.size() <= limits.max_header_fields, what);
    bool saw_te = false;
    bool saw_close = false;
    std::size_t hosts = 0;
    for (const header_field& f : h.fields) {
        FUZZ_CHECK(!f.name.empty() && inside(f.name) && inside(f.value), what);
        FUZZ_CHECK(f.name.data() > line.data(), what);
        for (char c : f.name) FUZZ_CHECK(is_tchar(c), what);
        for (char c : f.value) FUZZ_CHECK(c != '\r' && c != '\n' && c != '\0', what);
        FUZZ_CHECK(f.value.empty() || (!is_ows(f.value.front()) && !is_ows(f.value.back())), what);
        const std::string name = lower(f.name);
        if (name == "content-length") {
            FUZZ_CHECK(h.has_content_length, what);
            for (const std::string& element : split_list(f.value)) {
                const std::size_t nonzero = element.find_first_not_of('0');
                const std::string digits = nonzero == std::string::npos ? std::string("0") : element.substr(nonzero);
                FUZZ_CHECK(digits == std::to_string(h.content_length), what);
            }
        } else if (name == "transfer-encoding") {
            saw_te = true;
        } else if (name == "connection") {
            for (const std::string& option : split_list(f.value))
                if (lower(option) == "close") saw_close = true;
        } else if (name == "host") {
            ++hosts;
            FUZZ_CHECK(h.has_host && h.host == f.value && h.host.data() == f.value.data(), what);
            // An accepted Host is empty or an authority: only reg-name, IP-literal and port bytes.
            FUZZ_CHECK(f.value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                 "-._~!$&'()*+,;=%:[]") == std::string_view::npos,
                       what);
        }
    }
    FUZZ_CHECK(hosts <= 1 && h.has_host == (hosts == 1), what);
    if (h.version_minor == 1) FUZZ_CHECK(h.has_host, what);
    FUZZ_CHECK(h.chunked == saw_te, what);  // a Transfer-Encoding the parser accepts ends in chunked
    if (h.chunked) FUZZ_CHECK(!h.has_content_length && h.version_minor == 1, what);
    FUZZ_CHECK((h.connection == net::connection_option::close) == saw_close, what);
    std::string_view host;
    FUZZ_CHECK(h.find("HOST", host) == h.has_host && (!h.has_host || host == h.host), what);
}

bool same_head(const request_head& a, const request_head& b) {
    if (a.verb != b.verb || a.method_text != b.method_text || a.target != b.target ||
        a.version_minor != b.version_minor || a.has_content_length != b.has_content_length ||
        a.content_length != b.content_length || a.chunked != b.chunked || a.connection != b.connection ||
        a.expect_continue != b.expect_continue || a.expect_unsupported != b.expect_unsupported ||
        a.has_host != b.has_host || a.host != b.host || a.head_bytes != b.head_bytes ||
        a.fields.size() != b.fields.size())
        return false;
    for (std::size_t i = 0; i < a.fields.size(); ++i)
        if (a.fields[i].name != b.fields[i].name || a.fields[i].value != b.fields[i].value) return false;
    return true;
}

// One connection: bytes arrive with feed(); the transcript says what the server made of them.
class connection_model {
public:
    explicit connection_model(const limit_set& limits)
        : limits_(limits), parser_(limits.head), decoder_(limits.chunked), fields_(limits.head.max_header_fields),
          fresh_fields_(limits.head.max_header_fields) {}

    void feed(std::string_view bytes) {
        buffered_.append(bytes);
        run();
    }

    std::string finish() {
        static const char* const names[] = {"head", "content-length body", "chunked body", "closed"};
        transcript_ += std::string("end in ") + names[static_cast<int>(state_)] + ", " +
                       std::to_string(buffered_.size()) + " bytes buffered: " + printable(buffered_) + ", body so far " +
                       std::to_string(body_.size()) + ": " + printable(body_) + "\n";
        return transcript_;
    }

private:
    enum class state : std::uint8_t { head, body, chunked, closed };

    static void sink(void* context, const char* data, std::size_t size) {
        auto* self = static_cast<connection_model*>(context);
        FUZZ_CHECK(size <= self->decoder_input_, "the decoder handed out bytes it was not given");
        self->body_.append(data, size);
    }

    void run() {
        for (;;) {
            switch (state_) {
            case state::head:
                if (!parse_head()) return;
                break;
            case state::body: {
                const std::size_t take = remaining_ < buffered_.size() ? static_cast<std::size_t>(remaining_) : buffered_.size();
                body_.append(buffered_, 0, take);
                buffered_.erase(0, take);
                remaining_ -= take;
                if (remaining_ != 0) return;
                transcript_ += "body " + std::to_string(body_.size()) + ": " + printable(body_, 100000) + "\n";
                body_.clear();
                state_ = state::head;
                break;
            }
            case state::chunked:
                if (!decode_chunked()) return;
                break;
            case state::closed:
                return;
            }
        }
    }

    // False when the parser needs more bytes or the connection closed.
    bool parse_head() {
        if (requests_ == max_requests) {
            state_ = state::closed;
            return false;
        }
        request_head head;
        const parse_result r = parser_.parse(buffered_, head, fields_);

        // The incremental parser keeps nothing that a fresh one on the same bytes would not find.
        request_parser fresh(limits_.head);
        request_head fresh_head;
        const parse_result f = fresh.parse(buffered_, fresh_head, fresh_fields_);
        FUZZ_CHECK(r.outcome == f.outcome && r.status == f.status && std::strcmp(r.reason, f.reason) == 0,
                   std::string(limits_.name) + ": incremental " + describe(r) + ", fresh " + describe(f) + " on " +
                       printable(buffered_));
        if (r.outcome == parse_outcome::complete)
            FUZZ_CHECK(same_head(head, fresh_head), std::string(limits_.name) + ": incremental " + describe(head) +
                                                        "fresh " + describe(fresh_head));

        switch (r.outcome) {
        case parse_outcome::incomplete:
            return false;
        case parse_outcome::error:
            FUZZ_CHECK(r.status == 400 || r.status == 414 || r.status == 431 || r.status == 501 || r.status == 505,
                       describe(r));
            FUZZ_CHECK(r.reason != nullptr && r.reason[0] != '\0', describe(r));
            transcript_ += describe(r) + "\n";
            state_ = state::closed;
            return false;
        case parse_outcome::complete:
            break;
        }
        check_head(head, buffered_, limits_.head);
        transcript_ += describe(head);
        ++requests_;
        const bool chunked = head.chunked;
        const std::uint64_t length = head.has_content_length ? head.content_length : 0;
        buffered_.erase(0, head.head_bytes);  // the head's views die here
        parser_.reset();
        body_.clear();
        if (chunked) {
            decoder_.reset();
            state_ = state::chunked;
        } else if (length > 0) {
            remaining_ = length;
            state_ = state::body;
        } else {
            transcript_ += "body 0\n";
        }
        return true;
    }

    // False when the decoder needs more bytes or the connection closed.
    bool decode_chunked() {
        if (buffered_.empty()) return false;
        decoder_input_ = buffered_.size();
        const std::size_t before = body_.size();
        const chunked_decoder::result r = decoder_.decode(buffered_, &connection_model::sink, this);
        FUZZ_CHECK(r.consumed <= buffered_.size(), "consumed " + std::to_string(r.consumed));
        FUZZ_CHECK(body_.size() - before <= r.consumed, "more data than bytes consumed");
        FUZZ_CHECK(decoder_.body_bytes() == body_.size(),
                   "body_bytes() " + std::to_string(decoder_.body_bytes()) + ", sink got " + std::to_string(body_.size()));
        FUZZ_CHECK(body_.size() <= limits_.chunked.max_body_bytes, "body past max_body_bytes");
        buffered_.erase(0, r.consumed);
        switch (r.state) {
        case chunked_decoder::status::need_more:
            FUZZ_CHECK(buffered_.empty(), "need_more left " + std::to_string(buffered_.size()) + " bytes unconsumed");
            return false;
        case chunked_decoder::status::done: {
            FUZZ_CHECK(r.consumed > 0, "done without consuming the final CRLF");
            // Done stays done.
            const chunked_decoder::result again = decoder_.decode("0\r\n\r\n", &connection_model::sink, this);
            FUZZ_CHECK(again.state == chunked_decoder::status::done && again.consumed == 0, "done did not stay done");
            transcript_ += "chunked body " + std::to_string(body_.size()) + ": " + printable(body_, 100000) + "\n";
            body_.clear();
            state_ = state::head;
            return true;
        }
        case chunked_decoder::status::error:
            FUZZ_CHECK(r.http_status == 400 || r.http_status == 413, "decoder status " + std::to_string(r.http_status));
            FUZZ_CHECK(r.reason != nullptr && r.reason[0] != '\0', "decoder error without a reason");
            transcript_ += "chunked error " + std::to_string(r.http_status) + " " + r.reason + " after " +
                           std::to_string(body_.size()) + " data bytes\n";
            state_ = state::closed;
            return false;
        }
        return false;
    }

    const limit_set& limits_;
    request_parser parser_;
    chunked_decoder decoder_;
    std::vector<header_field> fields_;
    std::vector<header_field> fresh_fields_;
    std::string buffered_;
    std::string body_;
    std::string transcript_;
    std::uint64_t remaining_ = 0;
    std::size_t decoder_input_ = 0;
    std::size_t requests_ = 0;
    state state_ = state::head;
};

std::string run_pieces(const limit_set& limits, std::string_view input, const std::vector<std::size_t>& cuts) {
    connection_model c(limits);
    std::size_t from = 0;
    for (std::size_t cut : cuts) {
        c.feed(input.substr(from, cut - from));
        from = cut;
    }
    c.feed(input.substr(from));
    return c.finish();
}

std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 14695981039346656037ull) {
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return h;
}

}  // namespace

int request_parser_one_input(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::uint64_t h = fnv1a(input);
    const std::size_t n = input.size();
    const std::size_t cut = static_cast<std::size_t>(h % (n + 1));
    const std::size_t first = static_cast<std::size_t>((h >> 20) % (n + 1));
    const std::size_t second = first + static_cast<std::size_t>((h >> 40) % (n - first + 1));
    for (const limit_set& limits : limit_sets) {
        const std::string whole = run_pieces(limits, input, {});
        const auto compare = [&](const std::string& how, const std::string& split) {
            FUZZ_CHECK(split == whole, std::string(limits.name) + ": fed " + how + ":\n" + split + "\nfed whole:\n" + whole);
        };
        compare("in two pieces cut at " + std::to_string(cut), run_pieces(limits, input, {cut}));
        compare("in three pieces cut at " + std::to_string(first) + " and " + std::to_string(second),
                run_pieces(limits, input, {first, second}));
        if (n <= 512) {
            std::vector<std::size_t> every;
            for (std::size_t i = 1; i < n; ++i) every.push_back(i);
            compare("one byte at a time", run_pieces(limits, input, every));
        }
    }
    return 0;
}

}  // namespace percore::fuzz

#ifdef PERCORE_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return percore::fuzz::request_parser_one_input(data, size);
}
#endif
