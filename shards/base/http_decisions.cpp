#include "shards/base/http_decisions.hpp"

#include "net/entity_tags.hpp"
#include "net/response.hpp"

namespace percore::shards {

namespace {

// Collects one field's tags into `any` and `versions`. Strong comparison for If-Match (a weak tag
// matches nothing), weak for If-None-Match (RFC 9110 §13.1.1, §13.1.2). A syntactically valid tag
// that is not one of ours matches no version and is dropped.
bool collect(const net::request_head& head, std::string_view name, bool weak_ok, bool& present, bool& any,
             std::vector<std::uint64_t>& versions) {
    return net::for_each_entity_tag(head, name, [&](const net::entity_tag& t) {
        present = true;
        if (t.any) {
            any = true;
            return;
        }
        std::uint64_t v;
        if (t.weak && !weak_ok) return;
        if (net::parse_etag(t.opaque, false, v)) versions.push_back(v);
    });
}

bool has_field(const net::request_head& head, std::string_view name) {
    std::string_view ignored;
    return head.find(name, ignored);
}

// Whether any field could be If-Match or If-None-Match: one pass that looks at a name's length and
// first two bytes. Most requests carry neither, and the four lookups below walk every field with
// a case-insensitive compare (~190 instructions of a ~3,300-instruction pipelined GET, callgrind).
bool may_have_preconditions(const net::request_head& head) {
    for (const net::header_field& f : head.fields) {
        const std::size_t n = f.name.size();
        if ((n == 8 || n == 13) && (f.name[0] | 0x20) == 'i' && (f.name[1] | 0x20) == 'f') return true;
    }
    return false;
}

}  // namespace

std::expected<store::precondition, const char*> preconditions_of(const net::request_head& head) {
    store::precondition pre;
    if (!may_have_preconditions(head)) return pre;
    if (!collect(head, "if-match", false, pre.has_if_match, pre.if_match_any, pre.if_match))
        return std::unexpected("malformed If-Match");
    if (!collect(head, "if-none-match", true, pre.has_if_none_match, pre.if_none_match_any, pre.if_none_match))
        return std::unexpected("malformed If-None-Match");
    // a field present with only empty members ("If-Match: ,") is a list of nothing: matches nothing
    pre.has_if_match = pre.has_if_match || has_field(head, "if-match");
    pre.has_if_none_match = pre.has_if_none_match || has_field(head, "if-none-match");
    return pre;
}

int read_precondition_status(const store::precondition& pre, const store::document* doc) {
    if (pre.empty()) return 0;
    switch (pre.evaluate(doc != nullptr, doc ? doc->etag_version() : 0)) {
    case store::precondition::verdict::holds: return 0;
    case store::precondition::verdict::if_match_failed: return 412;
    case store::precondition::verdict::if_none_match_failed: return 304;
    }
    return 0;
}

net::simple_answer write_answer(store::write_outcome outcome, std::uint64_t version, bool current_exists) {
    net::simple_answer a;
    switch (outcome) {
    case store::write_outcome::created:
        a = {201, true, version, nullptr};
        break;
    case store::write_outcome::replaced:
        a = {204, true, version, nullptr};
        break;
    case store::write_outcome::deleted:
        a = {204, false, 0, nullptr};
        break;
    case store::write_outcome::not_found:
        a = {404, false, 0, "not found"};
        break;
    case store::write_outcome::no_space:
        a = {507, false, 0, "insufficient storage"};
        break;
    case store::write_outcome::unavailable:
        a = {503, false, 0, "the shard cannot write to its log"};
        break;
    case store::write_outcome::precondition_failed:
        a = {412, current_exists, version, "precondition failed"};
        break;
    case store::write_outcome::quota_exceeded:
        a = {507, false, 0, "quota exceeded"};
        break;
    }
    return a;
}

}  // namespace percore::shards
