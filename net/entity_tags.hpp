// entity_tags: the members of an If-Match / If-None-Match field (RFC 9110 §13.1.1, §8.8.3), read
// strictly: `*` alone, or a comma-separated list of entity-tags (`"opaque"` or `W/"opaque"`, with
// optional whitespace around commas; empty members are allowed, as §5.6.1 asks of recipients).
// Anything else — text after a tag's closing quote, an unterminated tag, `*` inside a list — makes
// the whole field malformed: the request is answered 400 (SPEC §4), never half-obeyed.
//
// Allocation-free; any thread.
#pragma once

#include <string_view>

#include "net/request_parser.hpp"

namespace percore::net {

struct entity_tag {
    bool any = false;          // `*`
    bool weak = false;         // W/ prefix
    std::string_view opaque;   // between the quotes, quotes included
};

// Calls f(entity_tag) for every member of every field named `name` in order; false (after
// calling f for some members, perhaps) when a field is malformed or `*` is combined with anything.
template <class F>
bool for_each_entity_tag(const request_head& head, std::string_view name, F&& f);

namespace detail {
// Parses one member at v[i...]; advances i past it; false when malformed.
bool next_entity_tag(std::string_view v, std::size_t& i, entity_tag& out, bool& empty_member);
}

template <class F>
bool for_each_entity_tag(const request_head& head, std::string_view name, F&& f) {
    std::size_t members = 0;
    bool saw_any = false;
    for (const header_field& field : head.fields) {
        if (!iequals(field.name, name)) continue;
        std::size_t i = 0;
        while (i <= field.value.size()) {
            entity_tag t;
            bool empty = false;
            if (!detail::next_entity_tag(field.value, i, t, empty)) return false;
            if (!empty) {
                ++members;
                saw_any = saw_any || t.any;
                if (saw_any && members > 1) return false;
                f(t);
            }
            if (i >= field.value.size()) break;
            ++i;   // past the comma
        }
    }
    return true;
}

}  // namespace percore::net
