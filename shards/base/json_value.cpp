#include "shards/base/json_value.hpp"

#include <algorithm>

#include "net/route.hpp"

namespace percore::shards {

namespace {

class reader {
public:
    explicit reader(std::string_view text) : s_(text) {}

    result<json_value> document() {
        json_value v;
        skip_space();
        if (auto r = value(v, 0); !r) return std::unexpected(r.error());
        skip_space();
        if (i_ != s_.size()) return std::unexpected("JSON: unexpected bytes after the value");
        return v;
    }

private:
    using status = std::expected<void, std::string>;

    static status fail(const char* why) { return std::unexpected(std::string("JSON: ") + why); }
    bool at_end() const { return i_ >= s_.size(); }
    char peek() const { return at_end() ? '\0' : s_[i_]; }
    void skip_space() {
        while (!at_end() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
    }
    bool literal(std::string_view word) {
        if (s_.substr(i_, word.size()) != word) return false;
        i_ += word.size();
        return true;
    }

    status value(json_value& v, unsigned depth) {
        if (depth > max_json_depth) return fail("nested too deeply");
        char c = peek();
        if (c == '{') return object(v, depth);
        if (c == '[') return array(v, depth);
        if (c == '"') {
            v.what = json_value::kind::string;
            return string(v.text);
        }
        if (c == '-' || (c >= '0' && c <= '9')) return number(v);
        if (literal("true") || literal("false")) {
            v.what = json_value::kind::boolean;
            v.flag = s_[i_ - 1] == 'e' && s_[i_ - 4] == 't';  // "true" ends 4 bytes back at 't'
            return {};
        }
        if (literal("null")) return {};
        return fail(at_end() ? "unexpected end" : "unexpected character");
    }

    status object(json_value& v, unsigned depth) {
        v.what = json_value::kind::object;
        ++i_;
        skip_space();
        if (peek() == '}') {
            ++i_;
            return {};
        }
        for (;;) {
            skip_space();
            if (peek() != '"') return fail("expected a member name");
            std::string name;
            if (auto r = string(name); !r) return r;
            skip_space();
            if (peek() != ':') return fail("expected ':'");
            ++i_;
            skip_space();
            json_value member;
            if (auto r = value(member, depth + 1); !r) return r;
            v.names.push_back(std::move(name));
            v.items.push_back(std::move(member));
            skip_space();
            if (peek() == ',') {
                ++i_;
                continue;
            }
            if (peek() == '}') {
                ++i_;
                return unique_names(v);
            }
            return fail("expected ',' or '}'");
        }
    }

    // Duplicate member names, once the object is whole: sorted views, O(n log n). A find() per
    // member was O(n^2): a 64 KiB body of ~8,000 three-byte names cost ~32 M compares (review M1).
    static status unique_names(const json_value& v) {
        if (v.names.size() < 2) return {};
        std::vector<std::string_view> sorted(v.names.begin(), v.names.end());
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return fail("duplicate member name");
        return {};
    }

    status array(json_value& v, unsigned depth) {
        v.what = json_value::kind::array;
        ++i_;
        skip_space();
        if (peek() == ']') {
            ++i_;
            return {};
        }
        for (;;) {
            skip_space();
            json_value item;
            if (auto r = value(item, depth + 1); !r) return r;
            v.items.push_back(std::move(item));
            skip_space();
            if (peek() == ',') {
                ++i_;
                continue;
            }
            if (peek() == ']') {
                ++i_;
                return {};
            }
            return fail("expected ',' or ']'");
        }
    }

    status number(json_value& v) {
        std::size_t start = i_;
        if (peek() == '-') ++i_;
        if (peek() == '0') {
            ++i_;
        } else if (peek() >= '1' && peek() <= '9') {
            while (peek() >= '0' && peek() <= '9') ++i_;
        } else {
            return fail("malformed number");
        }
        if (peek() == '.') {
            ++i_;
            if (!(peek() >= '0' && peek() <= '9')) return fail("malformed number");
            while (peek() >= '0' && peek() <= '9') ++i_;
        }
        if (peek() == 'e' || peek() == 'E') {
            ++i_;
            if (peek() == '+' || peek() == '-') ++i_;
            if (!(peek() >= '0' && peek() <= '9')) return fail("malformed number");
            while (peek() >= '0' && peek() <= '9') ++i_;
        }
        v.what = json_value::kind::number;
        v.text.assign(s_.substr(start, i_ - start));
        return {};
    }

    static int hex4(std::string_view h) {
        int v = 0;
        for (char c : h) {
            int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
            if (d < 0) return -1;
            v = v << 4 | d;
        }
        return v;
    }

    static void append_utf8(std::string& out, std::uint32_t cp) {
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xc0 | cp >> 6));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        } else if (cp < 0x10000) {
            out.push_back(static_cast<char>(0xe0 | cp >> 12));
            out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        } else {
            out.push_back(static_cast<char>(0xf0 | cp >> 18));
            out.push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        }
    }

    // \uXXXX (after the backslash and 'u'), with a following low surrogate for a high one.
    status unicode_escape(std::string& out) {
        int hi = hex4(s_.substr(i_, 4));
        if (s_.size() - i_ < 4 || hi < 0) return fail("malformed \\u escape");
        i_ += 4;
        auto cp = static_cast<std::uint32_t>(hi);
        if (cp >= 0xdc00 && cp <= 0xdfff) return fail("lone low surrogate");
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (s_.substr(i_, 2) != "\\u") return fail("lone high surrogate");
            int lo = s_.size() - i_ >= 6 ? hex4(s_.substr(i_ + 2, 4)) : -1;
            if (lo < 0xdc00 || lo > 0xdfff) return fail("lone high surrogate");
            i_ += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (static_cast<std::uint32_t>(lo) - 0xdc00);
        }
        append_utf8(out, cp);
        return {};
    }

    status string(std::string& out) {
        ++i_;  // the opening quote
        for (;;) {
            if (at_end()) return fail("unterminated string");
            char c = s_[i_++];
            if (c == '"') break;
            if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
            if (c != '\\') {
                out.push_back(c);
                continue;
            }
            if (at_end()) return fail("unterminated string");
            char e = s_[i_++];
            switch (e) {
            case '"': case '\\': case '/': out.push_back(e); break;
            case 'b': out.push_back('\b'); break;
            case 'f': out.push_back('\f'); break;
            case 'n': out.push_back('\n'); break;
            case 'r': out.push_back('\r'); break;
            case 't': out.push_back('\t'); break;
            case 'u':
                if (auto r = unicode_escape(out); !r) return r;
                break;
            default: return fail("malformed escape");
            }
        }
        if (!net::valid_utf8(out)) return fail("string is not valid UTF-8");
        return {};
    }

    std::string_view s_;
    std::size_t i_ = 0;
};

}  // namespace

const json_value* json_value::find(std::string_view name) const {
    if (what != kind::object) return nullptr;
    for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return &items[i];
    return nullptr;
}

std::optional<std::uint64_t> json_value::as_count() const {
    if (what != kind::number || text.empty() || text.size() > 19) return std::nullopt;
    std::uint64_t n = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (n > (std::uint64_t{1} << 63) - 1) return std::nullopt;
    return n;
}

result<json_value> parse_json(std::string_view text) {
    if (text.size() > max_json_bytes) return std::unexpected("JSON: body larger than 64 KiB");
    return reader(text).document();
}

result<json_value> parse_json(std::string_view text, std::size_t max_bytes) {
    if (text.size() > max_bytes) return std::unexpected("JSON: text larger than its bound");
    return reader(text).document();
}

}  // namespace percore::shards
