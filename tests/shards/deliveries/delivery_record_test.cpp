#include <doctest.h>

#include <string>

#include "shards/deliveries/deliveries_admin.hpp"
#include "shards/deliveries/delivery_record.hpp"
#include "shards/base/encoding.hpp"
#include "shards/base/limits.hpp"
#include "store/limits.hpp"

using namespace percore::shards;

namespace {

delivery_record full_record() {
    delivery_record d;
    d.url = "https://hooks.example.com:8443/in?x=1";
    d.prefix = "notes/\"quoted\"";
    d.seal = true;
    d.seal_key_shown = true;
    d.ca_pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    d.secrets = make_delivery_secrets();
    d.cursor = "1a-0-5.6.7-abcd";
    d.cursor_moved_unix_ms = 1700000000123;
    d.state = delivery_state::retrying;
    d.attempts = 3;
    d.last_status = 503;
    d.last_error = "receiver answered 503";
    d.next_attempt_unix_ms = 1700000300000;
    d.batch_id = make_batch_id();
    d.created_unix_ms = 1690000000000;
    d.updated_unix_ms = 1700000000999;
    return d;
}

void check_same(const delivery_record& a, const delivery_record& b) {
    CHECK(a.url == b.url);
    CHECK(a.prefix == b.prefix);
    CHECK(a.seal == b.seal);
    CHECK(a.seal_key_shown == b.seal_key_shown);
    CHECK(a.ca_pem == b.ca_pem);
    CHECK(a.ca_file == b.ca_file);
    CHECK(a.secrets.signing_secret == b.secrets.signing_secret);
    CHECK(a.secrets.seal_key == b.secrets.seal_key);
    CHECK(a.cursor == b.cursor);
    CHECK(a.cursor_moved_unix_ms == b.cursor_moved_unix_ms);
    CHECK(a.state == b.state);
    CHECK(a.attempts == b.attempts);
    CHECK(a.last_status == b.last_status);
    CHECK(a.last_error == b.last_error);
    CHECK(a.next_attempt_unix_ms == b.next_attempt_unix_ms);
    CHECK(a.batch_id == b.batch_id);
    CHECK(a.created_unix_ms == b.created_unix_ms);
    CHECK(a.updated_unix_ms == b.updated_unix_ms);
}

}  // namespace

TEST_CASE("an http url without a port goes to port 80 and an empty path to /") {
    auto u = parse_delivery_url("http://example.com");
    REQUIRE(u);
    CHECK(!u->https);
    CHECK(u->host == "example.com");
    CHECK(u->port == 80);
    CHECK(u->target == "/");
}

TEST_CASE("an https url without a port goes to port 443 and keeps its path and query") {
    auto u = parse_delivery_url("HTTPS://hooks.example.com/in/x?a=1&b=2");
    REQUIRE(u);
    CHECK(u->https);
    CHECK(u->port == 443);
    CHECK(u->target == "/in/x?a=1&b=2");
}

TEST_CASE("a url's explicit port, an IP literal and a query without a path are read") {
    auto u = parse_delivery_url("http://[::1]:8080?q=1");
    REQUIRE(u);
    CHECK(u->host == "[::1]");
    CHECK(u->port == 8080);
    CHECK(u->target == "/?q=1");
    auto v = parse_delivery_url("http://127.0.0.1:65535/");
    REQUIRE(v);
    CHECK(v->port == 65535);
}

TEST_CASE("a url with user information, a fragment or a bad port is refused with a reason") {
    for (const char* url : {"http://user:pw@example.com/", "http://example.com/#frag", "http://example.com:http/",
                            "http://example.com:0/", "http://example.com:65536/", "http://example.com:/",
                            "http://example.com:123456/", "http://[::1]x/", "http://[::1/"}) {
        auto u = parse_delivery_url(url);
        CHECK_MESSAGE(!u, url);
        if (!u) CHECK(!u.error().reason.empty());
    }
}

TEST_CASE("a url of another scheme, without a host or with spaces is refused") {
    for (const char* url : {"ftp://example.com/", "example.com/hook", "http:///path", "http://exa mple.com/",
                            "http://ex%41mple.com/", "http://example.com/a b", "", "http://h\xc3\xa9.com/"}) {
        CHECK_MESSAGE(!parse_delivery_url(url), url);
    }
}

TEST_CASE("a url longer than 2048 bytes is refused") {
    CHECK(parse_delivery_url("http://h/" + std::string(2039, 'a')));
    CHECK(!parse_delivery_url("http://h/" + std::string(2040, 'a')));
}

TEST_CASE("a signing secret is whsec_ and the base64 of 32 random bytes") {
    delivery_secrets a = make_delivery_secrets(), b = make_delivery_secrets();
    CHECK(a.signing_secret.starts_with("whsec_"));
    CHECK(a.signing_secret.size() == 6 + base64_size(32));
    auto key = signing_key_of(a.signing_secret);
    REQUIRE(key);
    CHECK(key->size() == 32);
    CHECK(a.signing_secret != b.signing_secret);
    CHECK(a.seal_key != b.seal_key);
}

TEST_CASE("a batch id is msg_ and 32 hex digits, different each time") {
    std::string id = make_batch_id();
    CHECK(id.size() == 36);
    CHECK(id.starts_with("msg_"));
    CHECK(is_lower_hex(id.substr(4)));
    CHECK(id != make_batch_id());
}

TEST_CASE("a delivery record with every field set decodes to itself") {
    delivery_record d = full_record();
    auto back = decode_delivery_record(encode_delivery_record(d));
    REQUIRE(back);
    check_same(d, *back);
}

TEST_CASE("a fresh delivery record with null status and error decodes to itself") {
    delivery_record d;
    d.url = "http://localhost:9000/hook";
    d.secrets = make_delivery_secrets();
    d.cursor = "c";
    std::string text = encode_delivery_record(d);
    CHECK(text.find("\"last_status\":null") != std::string::npos);
    CHECK(text.find("\"last_error\":null") != std::string::npos);
    auto back = decode_delivery_record(text);
    REQUIRE(back);
    check_same(d, *back);
}

TEST_CASE("a delivery record with a field missing, an unknown state or a short seal key is malformed") {
    delivery_record d = full_record();
    std::string text = encode_delivery_record(d);
    std::string no_url = text;
    no_url.replace(no_url.find("\"url\""), 5, "\"uri\"");
    CHECK(!decode_delivery_record(no_url));
    std::string bad_state = text;
    bad_state.replace(bad_state.find("\"retrying\""), 10, "\"sleeping\"");
    CHECK(!decode_delivery_record(bad_state));
    std::string short_key = text;
    std::size_t key = short_key.find("\"seal_key\":\"") + 12;
    short_key.erase(key, 2);
    CHECK(!decode_delivery_record(short_key));
    CHECK(!decode_delivery_record("[]"));
    CHECK(!decode_delivery_record("{"));
}

TEST_CASE("a delivery body with only a url takes since now, no prefix and no seal") {
    auto r = parse_delivery_request(R"({"url":"http://localhost:1/h"})");
    REQUIRE(r);
    CHECK(r->since == "now");
    CHECK(r->prefix.empty());
    CHECK(!r->seal);
    CHECK(r->parsed.port == 1);
}

TEST_CASE("a delivery body with every field is read") {
    auto r = parse_delivery_request(
        R"({"url":"https://h/x","prefix":"p/","seal":true,"ca_pem":"-----BEGIN CERTIFICATE-----\n","since":"0"})");
    REQUIRE(r);
    CHECK(r->prefix == "p/");
    CHECK(r->seal);
    CHECK(r->ca_pem == "-----BEGIN CERTIFICATE-----\n");
    CHECK(r->since == "0");
}

TEST_CASE("a delivery body with an unknown field, no url or a ca_pem for http is refused") {
    CHECK(!parse_delivery_request(R"({"url":"http://h/","secret":"x"})"));
    CHECK(!parse_delivery_request(R"({"prefix":"p"})"));
    CHECK(!parse_delivery_request(R"({"url":"http://h/","ca_pem":"-----BEGIN CERTIFICATE-----"})"));
    CHECK(!parse_delivery_request(R"({"url":"https://h/","ca_pem":7})"));
    CHECK(!parse_delivery_request(R"({"url":"http://h/","seal":"yes"})"));
    CHECK(!parse_delivery_request(R"({"url":"http://h/","since":""})"));
    CHECK(!parse_delivery_request(R"({"url":"http://h/","since":5})"));
    CHECK(!parse_delivery_request(R"("http://h/")"));
    CHECK(!parse_delivery_request("{"));
}

TEST_CASE("a delivery body with a ca_file is refused, whatever its value, and the reason names ca_pem") {
    for (const char* body : {R"({"url":"https://h/","ca_file":"/etc/ssl/certs/ca-certificates.crt"})",
                             R"({"url":"https://h/","ca_file":""})", R"({"url":"https://h/","ca_file":null})"}) {
        auto r = parse_delivery_request(body);
        REQUIRE_FALSE(r);
        CHECK(r.error().reason.find("ca_pem") != std::string::npos);
    }
}

TEST_CASE("a delivery body whose ca_pem is longer than 64 KiB is refused, and one of 64 KiB is read") {
    const std::string at_bound(64 * 1024, 'A'), past(64 * 1024 + 1, 'A');
    CHECK(parse_delivery_request(R"({"url":"https://h/","ca_pem":")" + at_bound + "\"}"));
    auto r = parse_delivery_request(R"({"url":"https://h/","ca_pem":")" + past + "\"}");
    REQUIRE_FALSE(r);
    CHECK(r.error().reason == "ca_pem is longer than 64 KiB");
}

TEST_CASE("a record written before ca_pem keeps its ca_file through a decode and an encode") {
    delivery_record d = full_record();
    std::string old = encode_delivery_record(d);
    const std::string ca_pem_member = ",\"ca_pem\":";
    const std::size_t at = old.find(ca_pem_member);
    REQUIRE(at != std::string::npos);
    const std::size_t end = old.find("\",\"signing_secret\"", at);
    old.replace(at, end + 1 - at, ",\"ca_file\":\"/etc/ca.pem\"");  // what versions before ca_pem wrote
    auto back = decode_delivery_record(old);
    REQUIRE(back);
    CHECK(back->ca_file == "/etc/ca.pem");
    CHECK(back->ca_pem.empty());
    auto again = decode_delivery_record(encode_delivery_record(*back));
    REQUIRE(again);
    CHECK(again->ca_file == "/etc/ca.pem");
}

TEST_CASE("a record with the largest url, prefix and CA stays below the size kept in memory") {
    delivery_record d = full_record();
    d.url = "https://h/" + std::string(max_delivery_url_bytes - 10, '"');
    d.prefix = std::string(percore::net::max_key_bytes, '\x01');
    d.ca_pem.clear();
    while (d.ca_pem.size() + 65 <= max_delivery_ca_stored_bytes) d.ca_pem += std::string(64, 'A') + "\n";
    d.cursor = std::string(256 * 17, '0');  // a cursor of 256 shards
    CHECK(encode_delivery_record(d).size() < percore::store::file_value_min_bytes);
}
