#include "response_parser.hpp"

#include <charconv>

namespace percore::load {

namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

bool icontains_token(std::string_view value, std::string_view token) {
    // comma-separated list of tokens, compared case-insensitively
    while (!value.empty()) {
        auto comma = value.find(',');
        std::string_view item = value.substr(0, comma);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
        if (iequals(item, token)) return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

std::string_view trim(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

}  // namespace

head_result parse_response_head(std::string_view bytes, response_head& out) {
    auto end = bytes.find("\r\n\r\n");
    if (end == std::string_view::npos) return head_result::need_more;
    out = response_head{};
    out.head_bytes = end + 4;
    std::string_view head = bytes.substr(0, end + 2);   // every line ends with CRLF

    auto eol = head.find("\r\n");
    std::string_view status_line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    // "HTTP/1.x SSS[ reason]"
    if (status_line.size() < 12 || !status_line.starts_with("HTTP/1.") || status_line[8] != ' ')
        return head_result::malformed;
    int minor = status_line[7] - '0';
    if (minor < 0 || minor > 9) return head_result::malformed;
    auto [p, ec] = std::from_chars(status_line.data() + 9, status_line.data() + 12, out.status);
    if (ec != std::errc{} || p != status_line.data() + 12 || out.status < 100 || out.status > 599)
        return head_result::malformed;
    if (status_line.size() > 12 && status_line[12] != ' ') return head_result::malformed;

    bool keep_alive = false;
    while (!head.empty()) {
        eol = head.find("\r\n");
        std::string_view line = head.substr(0, eol);
        head.remove_prefix(eol + 2);
        auto colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) return head_result::malformed;
        std::string_view name = line.substr(0, colon);
        std::string_view value = trim(line.substr(colon + 1));
        if (iequals(name, "content-length")) {
            std::uint64_t n = 0;
            auto [q, e] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (e != std::errc{} || q != value.data() + value.size() || value.empty())
                return head_result::malformed;
            if (out.has_content_length && n != out.content_length) return head_result::malformed;
            out.has_content_length = true;
            out.content_length = n;
        } else if (iequals(name, "transfer-encoding")) {
            out.chunked = icontains_token(value, "chunked");
        } else if (iequals(name, "connection")) {
            if (icontains_token(value, "close")) out.close = true;
            if (icontains_token(value, "keep-alive")) keep_alive = true;
        } else if (iequals(name, "etag")) {
            out.etag = value;
        }
    }
    if (minor == 0 && !keep_alive) out.close = true;
    return head_result::done;
}

}  // namespace percore::load
