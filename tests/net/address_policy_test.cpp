// address_policy (net/address_policy.hpp): every range SPEC §9 refuses, public addresses allowed, the
// --deliveries-allow list's parser and what it admits. Pure: addresses are made with
// resolve_numeric (no DNS) and nothing ever connects anywhere.
#include <doctest.h>

#include <string>

#include "net/address_policy.hpp"

using namespace percore::net;

namespace {

socket_address at(const std::string& host) {
    auto a = resolve_numeric(host, 80);
    REQUIRE_MESSAGE(a.has_value(), host);
    return *a;
}

bool refused(const std::string& host) { return refused_range(at(host)); }

cidr_list list_of(std::string_view text) {
    auto l = parse_cidr_list(text);
    REQUIRE_MESSAGE(l.has_value(), std::string(text));
    return *l;
}

}  // namespace

TEST_CASE("every IPv4 range of SPEC §9 is refused, at both ends") {
    for (const char* host : {"10.0.0.0", "10.0.0.1", "10.255.255.255",           // 10/8
                             "172.16.0.0", "172.20.1.1", "172.31.255.255",       // 172.16/12
                             "192.168.0.0", "192.168.1.1", "192.168.255.255",    // 192.168/16
                             "127.0.0.1", "127.9.9.9", "127.255.255.255",        // 127/8
                             "169.254.0.1", "169.254.169.254",                   // 169.254/16
                             "100.64.0.0", "100.100.1.1", "100.127.255.255",     // 100.64/10
                             "0.0.0.0", "0.1.2.3",                               // 0/8
                             "224.0.0.1", "239.255.255.255",                     // 224/4
                             "240.0.0.1", "255.255.255.255"})                    // 240/4, broadcast
        CHECK_MESSAGE(refused(host), host);
}

TEST_CASE("the IPv4 ranges' neighbours are allowed") {
    for (const char* host : {"9.255.255.255", "11.0.0.0", "172.15.255.255", "172.32.0.0", "192.167.255.255",
                             "192.169.0.0", "126.255.255.255", "128.0.0.0", "169.253.255.255", "169.255.0.0",
                             "100.63.255.255", "100.128.0.0", "1.0.0.0", "223.255.255.255",
                             "93.184.216.34", "8.8.8.8"})
        CHECK_MESSAGE(!refused(host), host);
}

TEST_CASE("every IPv6 range of SPEC §9 is refused") {
    for (const char* host : {"::1", "::", "fc00::1", "fdff:ffff::1", "fe80::1", "febf::1", "fec0::1",
                             "ff00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
                             "::ffff:0.0.0.0", "64:ff9b::a00:1", "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe",
                             "64:ff9b:1::1", "64:ff9b:1:ffff::8.8.8.8", "::127.0.0.1"})
        CHECK_MESSAGE(refused(host), host);
}

TEST_CASE("public IPv6 addresses and public mapped/translated IPv4 are allowed") {
    for (const char* host : {"2606:4700::1", "2001:4860:4860::8888", "fbff::1", "fe7f::1", "::ffff:93.184.216.34",
                             "64:ff9b::5db8:d822", "[2606:4700::1]"})
        CHECK_MESSAGE(!refused(host), host);
}

TEST_CASE("allowed(): refused ranges only through the allow list") {
    const cidr_list none;
    CHECK(!allowed(at("127.0.0.1"), none));
    CHECK(!allowed(at("::1"), none));
    CHECK(allowed(at("93.184.216.34"), none));
    CHECK(allowed(at("2606:4700::1"), none));

    const cidr_list tests = list_of("127.0.0.0/8,::1/128");
    CHECK(allowed(at("127.0.0.1"), tests));
    CHECK(allowed(at("127.9.9.9"), tests));
    CHECK(allowed(at("::1"), tests));
    CHECK(allowed(at("::ffff:127.0.0.1"), tests));  // an IPv4 entry admits the mapped form
    CHECK(!allowed(at("0.0.0.0"), tests));
    CHECK(!allowed(at("10.0.0.1"), tests));
    CHECK(!allowed(at("::ffff:10.0.0.1"), tests));
    CHECK(!allowed(at("::2"), tests));
    CHECK(!allowed(at("169.254.169.254"), tests));

    const cidr_list lan = list_of("10.1.0.0/16,fd00::/8");
    CHECK(allowed(at("10.1.2.3"), lan));
    CHECK(!allowed(at("10.2.0.1"), lan));
    CHECK(allowed(at("fd12::1"), lan));
    CHECK(!allowed(at("fc00::1"), lan));

    const cidr_list everything = list_of("0.0.0.0/0,::/0");
    CHECK(allowed(at("127.0.0.1"), everything));
    CHECK(allowed(at("ff02::1"), everything));
}

TEST_CASE("a socket address of another family is never allowed") {
    socket_address unix_like;
    unix_like.storage.ss_family = AF_UNIX;
    unix_like.size = sizeof(sockaddr_storage);
    CHECK(refused_range(unix_like));
    CHECK(!allowed(unix_like, list_of("0.0.0.0/0,::/0")));
}

TEST_CASE("parse_cidr_list: valid lists") {
    auto one = parse_cidr_list("127.0.0.0/8");
    REQUIRE(one.has_value());
    REQUIRE(one->size() == 1);
    CHECK(!(*one)[0].v6);
    CHECK((*one)[0].bits == 8);
    CHECK((*one)[0].address[0] == 127);

    auto two = parse_cidr_list("10.0.0.0/8,::1/128");
    REQUIRE(two.has_value());
    REQUIRE(two->size() == 2);
    CHECK((*two)[1].v6);
    CHECK((*two)[1].bits == 128);
    CHECK((*two)[1].address[15] == 1);

    for (const char* ok : {"0.0.0.0/0", "1.2.3.4/32", "192.168.0.0/16", "172.16.0.0/12", "::/0", "fe80::/10",
                           "fc00::/7", "2001:db8::1/128", "::ffff:127.0.0.0/104"})
        CHECK_MESSAGE(parse_cidr_list(ok).has_value(), ok);
}

TEST_CASE("parse_cidr_list: invalid lists name what is wrong") {
    for (const char* bad : {"", ",", "127.0.0.0/8,", ",127.0.0.0/8", "127.0.0.1", "127.0.0.0/", "127.0.0.0/33",
                            "127.0.0.0/-1", "127.0.0.0/8x", "127.0.0.0/ 8", " 127.0.0.0/8", "::1/129", "::/1000",
                            "256.0.0.0/8", "127.0.0/8", "localhost/8", "[::1]/128", "127.0.0.1/8", "11.0.0.0/7",
                            "fe80::1/10", "127.0.0.0/8 ,::1/128", "1.2.3.4/32/1"})
        CHECK_MESSAGE(!parse_cidr_list(bad).has_value(), bad);
    auto e = parse_cidr_list("10.0.0.0/8,127.0.0.1/8");
    REQUIRE(!e.has_value());
    CHECK(e.error().find("'127.0.0.1/8'") != std::string::npos);
}

TEST_CASE("loopback is 127/8 and ::1 with the mapped forms of 127/8, and nothing else") {
    for (const char* host : {"127.0.0.1", "127.9.9.9", "127.255.255.255", "::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1"})
        CHECK_MESSAGE(is_loopback(at(host)), host);
    for (const char* host : {"0.0.0.0", "10.0.0.1", "128.0.0.1", "::", "::2", "::ffff:10.0.0.1", "fe80::1", "192.0.2.7"})
        CHECK_MESSAGE(!is_loopback(at(host)), host);
}

TEST_CASE("a Host names this machine when it is localhost, 127/8 or [::1], with or without a port") {
    for (const char* host : {"localhost", "LocalHost:8080", "127.0.0.1", "127.0.0.1:8080", "127.9.9.9:1", "[::1]",
                             "[::1]:8080", "[::ffff:127.0.0.1]:80", "127.255.255.255:65535"})
        CHECK_MESSAGE(loopback_authority(host), host);
    for (const char* host : {"rebind.attacker.example", "rebind.attacker.example:8080", "localhost.attacker.example",
                             "127.0.0.1.nip.io", "127.0.0.1:80x", "10.0.0.1:8080", "0.0.0.0", "[::2]:80", "[::]",
                             "128.0.0.1", "127.0.0.256", "127.0.0", "127.0.0.1.", "1270.0.0.1", "::1", "", "[::1",
                             "127.00001.0.1"})
        CHECK_MESSAGE(!loopback_authority(host), host);
}

TEST_CASE("an Origin names this machine only as scheme://loopback-authority") {
    for (const char* origin : {"http://localhost", "http://127.0.0.1:8080", "https://[::1]:8443", "HTTP://LOCALHOST:1"})
        CHECK_MESSAGE(loopback_origin(origin), origin);
    for (const char* origin : {"null", "http://rebind.attacker.example", "http://127.0.0.1:8080/", "ftp://localhost",
                               "localhost", "http://", "http://10.0.0.1", "file://"})
        CHECK_MESSAGE(!loopback_origin(origin), origin);
}
