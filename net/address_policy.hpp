// address_policy: which receiver addresses a delivery may connect to (SPEC §9 "Receivers' addresses").
//
// Contract
// - refused_range(a): true when `a` lies in a range SPEC §9 refuses by default: loopback
//   (127/8, ::1), private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16,
//   fe80::/10), shared (100.64/10), unspecified and "this network" (0/8, ::), multicast (224/4,
//   ff00::/8), reserved and broadcast (240/4, 255.255.255.255), the deprecated site-local fec0::/10
//   and IPv4-compatible ::/96, NAT64's local-use 64:ff9b:1::/48 whole, and the IPv4-mapped
//   (::ffff:a.b.c.d) and translated (64:ff9b::a.b.c.d) forms of every refused IPv4 range. A family
//   other than AF_INET / AF_INET6 is refused.
// - allowed(a, allow): !refused_range(a), or `a` lies in one of `allow` (the operator's
//   --deliveries-allow). An IPv4 entry also admits the mapped and translated forms of its
//   addresses (127.0.0.0/8 admits ::ffff:127.0.0.1).
// - is_loopback(a): 127/8, ::1 and the mapped and translated forms of 127/8.
// - loopback_authority(host), loopback_origin(origin): whether a Host or Origin field names this
//   machine (SPEC §7's check with auth off).
// - parse_cidr_list("127.0.0.0/8,::1/128"): comma-separated ADDRESS/PREFIX, IPv4 (prefix 0..32) or
//   IPv6 (0..128, unbracketed), no host bits set past the prefix, no spaces, no empty entry. Pure:
//   inet_pton only, never DNS. An error names the entry and what is wrong.
// - Check the address actually connected to (after every resolution), never the name: a name may
//   resolve anywhere, and differently at each lookup (DNS rebinding).
// - Pure functions and value types; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "net/resolve.hpp"

namespace percore::net {

constexpr unsigned ipv4_bits = 32;
constexpr unsigned ipv6_bits = 128;

// An address range: `bits` of `address` (network byte order; IPv4 in the first 4 bytes).
struct cidr {
    bool v6 = false;
    std::array<std::uint8_t, 16> address{};
    unsigned bits = 0;
};

using cidr_list = std::vector<cidr>;

std::expected<cidr, std::string> parse_cidr(std::string_view text);
std::expected<cidr_list, std::string> parse_cidr_list(std::string_view text);

bool refused_range(const socket_address& a);
// 127.0.0.0/8 or ::1, or an IPv4-mapped or translated form of 127/8: this machine (SPEC §10's
// "loopback", where a follower may use http:// without --follow-insecure).
bool is_loopback(const socket_address& a);

// The Host check of SPEC §7 with auth off (a page in a browser must not reach the server through DNS
// rebinding): whether a Host field value (an authority: host, then an optional ":port") names this
// machine — `localhost` (any case), an IPv4 address in 127/8, or `[::1]` (or a bracketed mapped
// form of 127/8). Pure, no DNS, no allocation; the usual `127.0.0.1:PORT` and `localhost:PORT`
// are decided by byte comparisons (this runs on every request with auth off).
bool loopback_authority(std::string_view host);
// The same for an Origin field value: `scheme://authority` with nothing after it. "null" and any
// other form are not loopback.
bool loopback_origin(std::string_view origin);
bool allowed(const socket_address& a, const cidr_list& allow);

}  // namespace percore::net
