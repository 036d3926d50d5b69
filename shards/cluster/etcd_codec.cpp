#include "shards/cluster/etcd_codec.hpp"

#include <optional>
#include <utility>

#include "shards/base/encoding.hpp"
#include "shards/base/json_text.hpp"
#include "shards/base/json_value.hpp"
#include "shards/cluster/limits.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {

using kind = json_value::kind;

// ---- writing -------------------------------------------------------------------------------------

void append_field_base64(std::string& out, std::string_view name, std::string_view bytes) {
    out.push_back('"');
    out.append(name);
    out.append("\":\"");
    append_base64(out, bytes_of(bytes));
    out.push_back('"');
}

// An int64 as the gateway writes one: a JSON string of digits.
void append_field_int64(std::string& out, std::string_view name, std::int64_t v) {
    PERCORE_REQUIRES(v >= 0);
    out.push_back('"');
    out.append(name);
    out.append("\":\"");
    append_uint(out, static_cast<std::uint64_t>(v));
    out.push_back('"');
}

void require_key(std::string_view key) { PERCORE_REQUIRES(!key.empty() && key.size() <= max_etcd_key_bytes); }

// {"request_put":{"key":…,"value":…[,"lease":…]}}
void append_put_op(std::string& out, std::string_view key, std::string_view value, std::int64_t lease) {
    out.append("{\"request_put\":{");
    append_field_base64(out, "key", key);
    out.push_back(',');
    append_field_base64(out, "value", value);
    if (lease != 0) {
        out.push_back(',');
        append_field_int64(out, "lease", lease);
    }
    out.append("}}");
}

void append_range_op(std::string& out, std::string_view key) {
    out.append("{\"request_range\":{");
    append_field_base64(out, "key", key);
    out.append("}}");
}

// {"key":…,"target":"CREATE","result":"EQUAL","create_revision":…}: KEY's create revision is R.
void append_created_at_compare(std::string& out, std::string_view key, std::int64_t create_revision) {
    out.append("{");
    append_field_base64(out, "key", key);
    out.append(",\"target\":\"CREATE\",\"result\":\"EQUAL\",");
    append_field_int64(out, "create_revision", create_revision);
    out.append("}");
}

// ---- reading -------------------------------------------------------------------------------------

std::unexpected<problem> malformed(std::string_view why) {
    return std::unexpected(problem(std::string("etcd answer: ") + std::string(why)));
}

// An int64 field: absent (protobuf leaves zeros out) is 0; a string of 1..19 digits or a JSON
// number, at most 2^63-1. A sign, a fraction, an exponent or another type is refused.
result<std::int64_t> int64_field(const json_value& object, std::string_view name) {
    const json_value* v = object.find(name);
    if (!v) return 0;
    std::optional<std::uint64_t> n;
    if (v->what == kind::number) {
        n = v->as_count();
    } else if (v->what == kind::string) {
        json_value as_number;
        as_number.what = kind::number;
        as_number.text = v->text;
        n = as_number.as_count();
    }
    if (!n) return malformed(std::string(name) + " is not an int64 of digits");
    return static_cast<std::int64_t>(*n);
}

result<bool> bool_field(const json_value& object, std::string_view name) {
    const json_value* v = object.find(name);
    if (!v) return false;
    if (v->what != kind::boolean) return malformed(std::string(name) + " is not a boolean");
    return v->flag;
}

// A bytes field: absent is empty; else padded base64.
result<std::string> bytes_field(const json_value& object, std::string_view name) {
    const json_value* v = object.find(name);
    if (!v) return std::string();
    if (v->what != kind::string) return malformed(std::string(name) + " is not a string");
    auto bytes = decode_base64(v->text);
    if (!bytes) return malformed(std::string(name) + " is not base64");
    return std::string(bytes->begin(), bytes->end());
}

result<json_value> parse_object(std::string_view body) {
    if (body.size() > max_etcd_answer_bytes) return malformed("larger than 256 KiB");
    auto root = parse_json(body, max_etcd_answer_bytes);
    if (!root) return malformed(root.error().reason);
    if (root->what != kind::object) return malformed("not a JSON object");
    return root;
}

// The answer's "header": required, an object, with its revision (at least 1: etcd's store starts at 1).
result<etcd_header> header_of(const json_value& answer) {
    const json_value* header = answer.find("header");
    if (!header || header->what != kind::object) return malformed("no header");
    auto revision = int64_field(*header, "revision");
    if (!revision) return std::unexpected(revision.error());
    if (*revision < 1) return malformed("header revision below 1");
    return etcd_header{*revision, 0};
}

result<etcd_kv> kv_of(const json_value& v) {
    if (v.what != kind::object) return malformed("a kv is not an object");
    etcd_kv kv;
    auto key = bytes_field(v, "key");
    auto value = bytes_field(v, "value");
    auto created = int64_field(v, "create_revision");
    auto modified = int64_field(v, "mod_revision");
    auto version = int64_field(v, "version");
    auto lease = int64_field(v, "lease");
    if (!key) return std::unexpected(key.error());
    if (!value) return std::unexpected(value.error());
    for (auto* n : {&created, &modified, &version, &lease})
        if (!*n) return std::unexpected(n->error());
    if (key->empty()) return malformed("a kv without a key");
    if (*created < 1 || *modified < *created || *version < 1) return malformed("a kv's revisions are inconsistent");
    kv.key = std::move(*key);
    kv.value = std::move(*value);
    kv.create_revision = *created;
    kv.mod_revision = *modified;
    kv.version = *version;
    kv.lease = *lease;
    return kv;
}

// A range's body (an answer, or a transaction's response_range): its kvs and "more".
result<range_answer> range_of(const json_value& range) {
    range_answer out;
    const json_value* kvs = range.find("kvs");
    if (kvs && kvs->what != kind::array) return malformed("kvs is not an array");
    if (kvs && kvs->items.size() > static_cast<std::size_t>(max_etcd_range_kvs)) return malformed("more kvs than asked for");
    if (kvs) {
        for (const json_value& item : kvs->items) {
            auto kv = kv_of(item);
            if (!kv) return std::unexpected(kv.error());
            out.kvs.push_back(std::move(*kv));
        }
    }
    auto more = bool_field(range, "more");
    if (!more) return std::unexpected(more.error());
    out.more = *more;
    return out;
}

// A transaction's responses[index].{name}: an object.
result<const json_value*> txn_response(const json_value& answer, std::size_t index, std::string_view name) {
    const json_value* responses = answer.find("responses");
    if (!responses || responses->what != kind::array || responses->items.size() <= index)
        return malformed("a transaction without its responses");
    const json_value* op = responses->items[index].find(name);
    if (!op || op->what != kind::object) return malformed(std::string("a transaction's response is not ") + std::string(name));
    return op;
}

}  // namespace

// ---- requests ----------------------------------------------------------------------------------

std::string grant_request(std::int64_t ttl_seconds) {
    PERCORE_REQUIRES(ttl_seconds >= min_etcd_lease_ttl_seconds && ttl_seconds <= max_etcd_lease_ttl_seconds);
    std::string out = "{";
    append_field_int64(out, "TTL", ttl_seconds);
    out.append("}");
    return out;
}

std::string keepalive_request(std::int64_t lease) {
    PERCORE_REQUIRES(lease > 0);
    std::string out = "{";
    append_field_int64(out, "ID", lease);
    out.append("}");
    return out;
}

std::string revoke_request(std::int64_t lease) { return keepalive_request(lease); }

std::string create_if_absent_request(std::string_view key, std::string_view value, std::int64_t lease) {
    require_key(key);
    PERCORE_REQUIRES(value.size() <= max_etcd_value_bytes && lease > 0);
    std::string out = "{\"compare\":[";
    append_created_at_compare(out, key, 0);   // create_revision 0: the key does not exist
    out.append("],\"success\":[");
    append_put_op(out, key, value, lease);
    out.push_back(',');
    append_range_op(out, key);                // a transaction's later op sees its earlier ones
    out.append("],\"failure\":[");
    append_range_op(out, key);
    out.append("]}");
    return out;
}

std::string put_request(std::string_view key, std::string_view value, std::int64_t lease) {
    require_key(key);
    PERCORE_REQUIRES(value.size() <= max_etcd_value_bytes && lease >= 0);
    std::string op;
    append_put_op(op, key, value, lease);
    // the op is {"request_put":{…}}: the put request is its inner object
    constexpr std::string_view wrapper = "{\"request_put\":";
    return op.substr(wrapper.size(), op.size() - wrapper.size() - 1);
}

std::string range_request(std::string_view key, std::string_view range_end) {
    require_key(key);
    PERCORE_REQUIRES(range_end.size() <= max_etcd_key_bytes);
    std::string out = "{";
    append_field_base64(out, "key", key);
    if (!range_end.empty()) {
        out.push_back(',');
        append_field_base64(out, "range_end", range_end);
    }
    out.push_back(',');
    append_field_int64(out, "limit", max_etcd_range_kvs);
    out.append("}");
    return out;
}

std::string delete_if_created_request(std::string_view key, std::int64_t create_revision) {
    require_key(key);
    PERCORE_REQUIRES(create_revision > 0);
    std::string out = "{\"compare\":[";
    append_created_at_compare(out, key, create_revision);
    out.append("],\"success\":[{\"request_delete_range\":{");
    append_field_base64(out, "key", key);
    out.append("}}]}");
    return out;
}

std::string prefix_range_end(std::string_view prefix) {
    PERCORE_REQUIRES(!prefix.empty());
    std::string end(prefix);
    while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
    PERCORE_REQUIRES(!end.empty());
    end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
    return end;
}

// ---- answers -----------------------------------------------------------------------------------

result<lease_granted> parse_grant_answer(std::string_view body) {
    auto answer = parse_object(body);
    if (!answer) return std::unexpected(answer.error());
    auto header = header_of(*answer);
    if (!header) return std::unexpected(header.error());
    auto id = int64_field(*answer, "ID");
    auto ttl = int64_field(*answer, "TTL");
    if (!id) return std::unexpected(id.error());
    if (!ttl) return std::unexpected(ttl.error());
    if (*id < 1) return malformed("a granted lease without an ID");
    if (*ttl < 1) return malformed("a granted lease without a TTL");
    return lease_granted{*header, *id, *ttl};
}

// One line {"result":{"header":…,"ID":…,"TTL":…}} (TTL absent: the lease is gone), or
// {"error":{"grpc_code":…,"http_code":…,"message":…}}: a stream's error, a problem.
result<lease_kept> parse_keepalive_answer(std::string_view body) {
    auto answer = parse_object(body);
    if (!answer) return std::unexpected(answer.error());
    if (answer->find("error") != nullptr)
        return malformed("keepalive stream error: " + etcd_error_text(body));
    const json_value* inner = answer->find("result");
    if (!inner || inner->what != kind::object) return malformed("a keepalive answer without its result");
    auto header = header_of(*inner);
    if (!header) return std::unexpected(header.error());
    auto ttl = int64_field(*inner, "TTL");
    if (!ttl) return std::unexpected(ttl.error());
    return lease_kept{*header, *ttl};
}

result<write_answer> parse_write_answer(std::string_view body) {
    auto answer = parse_object(body);
    if (!answer) return std::unexpected(answer.error());
    auto header = header_of(*answer);
    if (!header) return std::unexpected(header.error());
    return write_answer{*header};
}

result<range_answer> parse_range_answer(std::string_view body) {
    auto answer = parse_object(body);
    if (!answer) return std::unexpected(answer.error());
    auto header = header_of(*answer);
    if (!header) return std::unexpected(header.error());
    auto range = range_of(*answer);
    if (!range) return std::unexpected(range.error());
    range->header = *header;
    for (const etcd_kv& kv : range->kvs)
        if (kv.mod_revision > header->revision) return malformed("a kv newer than the answer's revision");
    return range;
}

result<create_answer> parse_create_answer(std::string_view body, std::string_view key) {
    auto answer = parse_object(body);
    if (!answer) return std::unexpected(answer.error());
    auto header = header_of(*answer);
    auto succeeded = bool_field(*answer, "succeeded");
    if (!header) return std::unexpected(header.error());
    if (!succeeded) return std::unexpected(succeeded.error());
    // success: [put, range]; failure: [range]
    auto op = txn_response(*answer, *succeeded ? 1 : 0, "response_range");
    if (!op) return std::unexpected(op.error());
    auto range = range_of(**op);
    if (!range) return std::unexpected(range.error());
    if (range->kvs.size() != 1 || range->kvs[0].key != key) return malformed("a transaction's kv is not the key asked for");
    etcd_kv& kv = range->kvs[0];
    if (kv.mod_revision > header->revision) return malformed("a kv newer than the answer's revision");
    // the key this transaction created was created by it: at the transaction's revision
    if (*succeeded && kv.create_revision != header->revision) return malformed("a created key of another revision");
    return create_answer{*header, *succeeded, std::move(kv)};
}

result<delete_answer> parse_delete_answer(std::string_view body) {
    auto answer = parse_object(body);
    if (!answer) return std::unexpected(answer.error());
    auto header = header_of(*answer);
    auto succeeded = bool_field(*answer, "succeeded");
    if (!header) return std::unexpected(header.error());
    if (!succeeded) return std::unexpected(succeeded.error());
    if (*succeeded) {
        auto op = txn_response(*answer, 0, "response_delete_range");
        if (!op) return std::unexpected(op.error());
        auto deleted = int64_field(**op, "deleted");
        if (!deleted) return std::unexpected(deleted.error());
        if (*deleted != 1) return malformed("a conditional delete that deleted no key");
    }
    return delete_answer{*header, *succeeded};
}

// {"error":"…","message":"…","code":N} (unary calls) or {"error":{"message":"…",…}} (streams).
std::string etcd_error_text(std::string_view body) {
    std::string text;
    if (auto root = parse_json(body, max_etcd_answer_bytes); root && root->what == kind::object) {
        const json_value* error = root->find("error");
        const json_value* message = root->find("message");
        if (error && error->what == kind::object) message = error->find("message");
        if (message && message->what == kind::string) text = message->text;
        else if (error && error->what == kind::string) text = error->text;
    }
    if (text.empty()) text = "(no error message)";
    if (text.size() > max_etcd_error_text_bytes) text.resize(max_etcd_error_text_bytes);
    for (char& c : text)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return text;
}

}  // namespace percore::shards
