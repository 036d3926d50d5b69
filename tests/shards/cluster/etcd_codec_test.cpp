// The etcd gateway's JSON (shards/cluster/etcd_codec.hpp): the requests percore writes, read back
// with the strict JSON reader, and answers as etcd 3.4's gateway writes them (copied from curl
// against a real etcd: int64s as strings, zero fields left out), plus answers no etcd writes.
#include <doctest.h>

#include <string>

#include "shards/base/encoding.hpp"
#include "shards/base/json_value.hpp"
#include "shards/cluster/etcd_codec.hpp"
#include "shards/cluster/limits.hpp"

using namespace percore::shards;

namespace {

std::string b64(std::string_view s) {
    std::string out;
    append_base64(out, bytes_of(s));
    return out;
}

json_value parsed(const std::string& text) {
    auto v = parse_json(text);
    REQUIRE(v.has_value());
    return *v;
}

const std::string header = R"("header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"7","raft_term":"2"})";

std::string kv_json(std::string_view key, std::string_view value, int created, int modified, std::string_view lease = "") {
    std::string out = R"({"key":")" + b64(key) + R"(","create_revision":")" + std::to_string(created) +
                      R"(","mod_revision":")" + std::to_string(modified) + R"(","version":"1","value":")" + b64(value) + "\"";
    if (!lease.empty()) out += R"(,"lease":")" + std::string(lease) + "\"";
    return out + "}";
}

}  // namespace

TEST_CASE("a grant request carries the TTL as an int64 string") {
    const json_value v = parsed(grant_request(6));
    REQUIRE(v.find("TTL") != nullptr);
    CHECK(v.find("TTL")->text == "6");
    CHECK(v.find("TTL")->what == json_value::kind::string);
}

TEST_CASE("keys and values travel in padded base64") {
    const json_value v = parsed(put_request("/percore/g/leader", "b1 http://x", 0));
    CHECK(v.find("key")->text == b64("/percore/g/leader"));
    CHECK(v.find("value")->text == b64("b1 http://x"));
    CHECK(v.find("lease") == nullptr);
    CHECK(parsed(put_request("k", "", 42)).find("lease")->text == "42");
}

TEST_CASE("create-if-absent compares the create revision with 0, puts under the lease and reads the key back") {
    const json_value v = parsed(create_if_absent_request("/k", "v", 99));
    const json_value& compare = v.find("compare")->items.at(0);
    CHECK(compare.find("target")->text == "CREATE");
    CHECK(compare.find("result")->text == "EQUAL");
    CHECK(compare.find("create_revision")->text == "0");
    const json_value& success = *v.find("success");
    REQUIRE(success.items.size() == 2);
    CHECK(success.items[0].find("request_put")->find("lease")->text == "99");
    CHECK(success.items[1].find("request_range")->find("key")->text == b64("/k"));
    CHECK(v.find("failure")->items.at(0).find("request_range") != nullptr);
}

TEST_CASE("the conditional delete deletes only at the create revision given") {
    const json_value v = parsed(delete_if_created_request("/k", 12));
    CHECK(v.find("compare")->items.at(0).find("create_revision")->text == "12");
    CHECK(v.find("success")->items.at(0).find("request_delete_range")->find("key")->text == b64("/k"));
    CHECK(v.find("failure") == nullptr);
}

TEST_CASE("a prefix range ends at the prefix with its last byte increased") {
    CHECK(prefix_range_end("/percore/g/") == "/percore/g0");
    CHECK(prefix_range_end(std::string("a\xff\xff", 3)) == "b");
    const json_value v = parsed(range_request("/p/", prefix_range_end("/p/")));
    CHECK(v.find("range_end")->text == b64("/p0"));
    CHECK(v.find("limit")->text == std::to_string(max_etcd_range_kvs));
}

TEST_CASE("a grant answer gives the lease ID and TTL from their strings") {
    auto a = parse_grant_answer("{" + header + R"(,"ID":"7587883712351186436","TTL":"6"})");
    REQUIRE(a.has_value());
    CHECK(a->id == 7587883712351186436);
    CHECK(a->ttl_seconds == 6);
    CHECK(a->header.revision == 7);
}

TEST_CASE("an int64 written as a JSON number is read too") {
    auto a = parse_grant_answer(R"({"header":{"revision":3},"ID":12,"TTL":2})");
    REQUIRE(a.has_value());
    CHECK(a->id == 12);
}

TEST_CASE("an int64 with a sign, a fraction, or past 2^63-1 is refused") {
    CHECK_FALSE(parse_grant_answer("{" + header + R"(,"ID":"-5","TTL":"6"})").has_value());
    CHECK_FALSE(parse_grant_answer("{" + header + R"(,"ID":"1.5","TTL":"6"})").has_value());
    CHECK_FALSE(parse_grant_answer("{" + header + R"(,"ID":"9223372036854775808","TTL":"6"})").has_value());
    CHECK_FALSE(parse_grant_answer("{" + header + R"(,"ID":"","TTL":"6"})").has_value());
    CHECK_FALSE(parse_grant_answer("{" + header + R"(,"ID":true,"TTL":"6"})").has_value());
}

TEST_CASE("a keepalive line with a TTL renews; one without says the lease is gone") {
    auto kept = parse_keepalive_answer(R"({"result":{)" + header + R"(,"ID":"5","TTL":"6"}})" "\n");
    REQUIRE(kept.has_value());
    CHECK(kept->ttl_seconds == 6);
    auto gone = parse_keepalive_answer(R"({"result":{)" + header + R"(,"ID":"5"}})" "\n");
    REQUIRE(gone.has_value());
    CHECK(gone->ttl_seconds == 0);
}

TEST_CASE("a keepalive stream's error line is a problem") {
    auto a = parse_keepalive_answer(R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}})");
    REQUIRE_FALSE(a.has_value());
    CHECK(a.error().reason.find("no leader") != std::string::npos);
}

TEST_CASE("a range answer gives each KV decoded, and none when kvs is left out") {
    auto a = parse_range_answer("{" + header + R"(,"kvs":[)" + kv_json("/a", "x", 4, 6, "77") + "," +
                                kv_json("/b", "", 5, 5) + R"(],"more":true,"count":"3"})");
    REQUIRE(a.has_value());
    REQUIRE(a->kvs.size() == 2);
    CHECK(a->kvs[0].key == "/a");
    CHECK(a->kvs[0].value == "x");
    CHECK(a->kvs[0].create_revision == 4);
    CHECK(a->kvs[0].mod_revision == 6);
    CHECK(a->kvs[0].lease == 77);
    CHECK(a->kvs[1].value.empty());
    CHECK(a->more);
    auto none = parse_range_answer("{" + header + "}");
    REQUIRE(none.has_value());
    CHECK(none->kvs.empty());
    CHECK_FALSE(none->more);
}

TEST_CASE("a created key comes back with the transaction's revision as its create revision") {
    const std::string body = "{" + header + R"(,"succeeded":true,"responses":[{"response_put":{"header":{"revision":"7"}}},)" +
                             R"({"response_range":{"header":{"revision":"7"},"kvs":[)" + kv_json("/l", "b1", 7, 7, "9") +
                             R"(],"count":"1"}}]})";
    auto a = parse_create_answer(body, "/l");
    REQUIRE(a.has_value());
    CHECK(a->succeeded);
    CHECK(a->current.create_revision == 7);
    CHECK(a->current.value == "b1");
}

TEST_CASE("a create that found the key gives the key that was there") {
    const std::string body = "{" + header + R"(,"responses":[{"response_range":{"header":{"revision":"7"},"kvs":[)" +
                             kv_json("/l", "b0", 3, 3, "8") + R"(],"count":"1"}}]})";
    auto a = parse_create_answer(body, "/l");
    REQUIRE(a.has_value());
    CHECK_FALSE(a->succeeded);
    CHECK(a->current.create_revision == 3);
    CHECK(a->current.value == "b0");
}

TEST_CASE("a transaction answer about another key, or with no KV, is refused") {
    const std::string other = "{" + header + R"(,"responses":[{"response_range":{"header":{"revision":"7"},"kvs":[)" +
                              kv_json("/x", "b0", 3, 3) + R"(]}}]})";
    CHECK_FALSE(parse_create_answer(other, "/l").has_value());
    const std::string empty = "{" + header + R"(,"responses":[{"response_range":{"header":{"revision":"7"}}}]})";
    CHECK_FALSE(parse_create_answer(empty, "/l").has_value());
}

TEST_CASE("a conditional delete answer says whether it deleted") {
    auto done = parse_delete_answer("{" + header + R"(,"succeeded":true,"responses":[{"response_delete_range":{"header":{"revision":"8"},"deleted":"1"}}]})");
    REQUIRE(done.has_value());
    CHECK(done->deleted);
    auto kept = parse_delete_answer("{" + header + "}");
    REQUIRE(kept.has_value());
    CHECK_FALSE(kept->deleted);
}

TEST_CASE("bad base64, a missing header and wrong types are refused") {
    CHECK_FALSE(parse_range_answer("{" + header + R"(,"kvs":[{"key":"not base64!","create_revision":"1","mod_revision":"1","version":"1"}]})").has_value());
    CHECK_FALSE(parse_range_answer(R"({"kvs":[]})").has_value());
    CHECK_FALSE(parse_range_answer("{" + header + R"(,"kvs":{}})").has_value());
    CHECK_FALSE(parse_range_answer("{" + header + R"(,"more":"yes"})").has_value());
    CHECK_FALSE(parse_write_answer(R"({"header":{"revision":"0"}})").has_value());
}

TEST_CASE("a KV newer than its answer's revision is refused") {
    CHECK_FALSE(parse_range_answer("{" + header + R"(,"kvs":[)" + kv_json("/a", "x", 4, 9) + "]}").has_value());
}

TEST_CASE("malformed and oversized answers are refused") {
    CHECK_FALSE(parse_write_answer("").has_value());
    CHECK_FALSE(parse_write_answer("{").has_value());
    CHECK_FALSE(parse_write_answer("[1]").has_value());
    CHECK_FALSE(parse_write_answer("{" + header + "} trailing").has_value());
    std::string big = "{" + header + R"(,"pad":")" + std::string(max_etcd_answer_bytes, 'a') + "\"}";
    auto a = parse_write_answer(big);
    REQUIRE_FALSE(a.has_value());
    CHECK(a.error().reason.find("etcd answer") == 0);
}

TEST_CASE("etcd's error body gives its message, cut and without control characters") {
    CHECK(etcd_error_text(R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})") ==
          "etcdserver: requested lease not found");
    CHECK(etcd_error_text(R"({"message":"a\nb"})") == "a?b");
    CHECK(etcd_error_text("404 page not found") == "(no error message)");
    CHECK(etcd_error_text(R"({"message":")" + std::string(1000, 'x') + "\"}").size() == max_etcd_error_text_bytes);
}
