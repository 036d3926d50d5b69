#include "net/entity_tags.hpp"

namespace percore::net {

namespace detail {

namespace {
bool ows(char c) { return c == ' ' || c == '\t'; }
// etagc = %x21 / %x23-7E / obs-text
bool etagc(unsigned char c) { return c == 0x21 || (c >= 0x23 && c != 0x7f); }
}  // namespace

// One list member and the whitespace around it, up to (not past) the next comma or the end.
bool next_entity_tag(std::string_view v, std::size_t& i, entity_tag& out, bool& empty_member) {
    while (i < v.size() && ows(v[i])) ++i;
    if (i == v.size() || v[i] == ',') {
        empty_member = true;
        return true;
    }
    if (v[i] == '*') {
        out.any = true;
        ++i;
    } else {
        if (v.substr(i, 2) == "W/") {
            out.weak = true;
            i += 2;
        }
        if (i >= v.size() || v[i] != '"') return false;
        std::size_t open = i++;
        while (i < v.size() && v[i] != '"') {
            if (!etagc(static_cast<unsigned char>(v[i]))) return false;
            ++i;
        }
        if (i >= v.size()) return false;   // unterminated
        ++i;
        out.opaque = v.substr(open, i - open);
    }
    while (i < v.size() && ows(v[i])) ++i;
    return i == v.size() || v[i] == ',';
}

}  // namespace detail

}  // namespace percore::net
