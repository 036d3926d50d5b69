#include "net/address_policy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>

namespace percore::net {

namespace {

using bytes16 = std::array<std::uint8_t, 16>;

constexpr std::size_t max_cidr_text = INET6_ADDRSTRLEN + 4;  // "address/128"

// An IPv4 range as a 32-bit number and its prefix length.
struct v4_range {
    std::uint32_t network;
    unsigned bits;
};

constexpr std::uint32_t v4(unsigned a, unsigned b, unsigned c, unsigned d) { return a << 24 | b << 16 | c << 8 | d; }

// SPEC §9's refused IPv4 ranges.
constexpr v4_range refused_v4[] = {
    {v4(0, 0, 0, 0), 8},        // "this network", 0.0.0.0 unspecified
    {v4(10, 0, 0, 0), 8},       // private
    {v4(100, 64, 0, 0), 10},    // shared (carrier-grade NAT)
    {v4(127, 0, 0, 0), 8},      // loopback
    {v4(169, 254, 0, 0), 16},   // link-local (cloud metadata 169.254.169.254)
    {v4(172, 16, 0, 0), 12},    // private
    {v4(192, 168, 0, 0), 16},   // private
    {v4(224, 0, 0, 0), 4},      // multicast
    {v4(240, 0, 0, 0), 4},      // reserved, and the broadcast 255.255.255.255
};

// SPEC §9's refused IPv6 ranges (mapped and translated IPv4 are looked at as IPv4).
struct v6_range {
    bytes16 network;
    unsigned bits;
};
constexpr v6_range refused_v6[] = {
    {{}, 96},                                                  // ::/96: ::, ::1, IPv4-compatible (deprecated)
    {{0xfc}, 7},                                               // unique local (private)
    {{0xfe, 0x80}, 10},                                        // link-local
    {{0xfe, 0xc0}, 10},                                        // site-local (deprecated)
    {{0xff}, 8},                                               // multicast
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48},                // NAT64 local-use (RFC 8215)
};
constexpr bytes16 mapped_prefix{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};   // ::ffff:0:0/96
constexpr bytes16 nat64_prefix{0x00, 0x64, 0xff, 0x9b};                       // 64:ff9b::/96

bool prefix_matches(const std::uint8_t* a, const std::uint8_t* network, unsigned bits) {
    const unsigned whole = bits / 8;
    if (std::memcmp(a, network, whole) != 0) return false;
    const unsigned rest = bits % 8;
    if (rest == 0) return true;
    const std::uint8_t mask = static_cast<std::uint8_t>(0xff << (8 - rest));
    return (a[whole] & mask) == (network[whole] & mask);
}

std::uint32_t v4_number(const std::uint8_t* b) {
    return static_cast<std::uint32_t>(b[0]) << 24 | b[1] << 16 | b[2] << 8 | b[3];
}

bool refused_ipv4(std::uint32_t a) {
    return std::any_of(std::begin(refused_v4), std::end(refused_v4), [a](const v4_range& r) {
        const std::uint32_t mask = r.bits == 0 ? 0 : ~std::uint32_t{0} << (ipv4_bits - r.bits);
        return (a & mask) == (r.network & mask);
    });
}

// The address's bytes: 4 for IPv4, 16 for IPv6; nullopt for another family.
struct raw_address {
    bool v6 = false;
    bytes16 bytes{};
};

std::optional<raw_address> raw_of(const socket_address& a) {
    raw_address out;
    if (a.family() == AF_INET && a.size >= sizeof(sockaddr_in)) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&a.storage);
        std::memcpy(out.bytes.data(), &in->sin_addr, 4);
        return out;
    }
    if (a.family() == AF_INET6 && a.size >= sizeof(sockaddr_in6)) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
        out.v6 = true;
        std::memcpy(out.bytes.data(), &in6->sin6_addr, 16);
        return out;
    }
    return std::nullopt;
}

// The IPv4 address an IPv6 one stands for: IPv4-mapped ::ffff:a.b.c.d or NAT64 64:ff9b::a.b.c.d.
std::optional<std::uint32_t> embedded_ipv4(const bytes16& b) {
    if (prefix_matches(b.data(), mapped_prefix.data(), 96) || prefix_matches(b.data(), nat64_prefix.data(), 96))
        return v4_number(b.data() + 12);
    return std::nullopt;
}

bool in_cidr(const raw_address& a, const cidr& c) {
    return a.v6 == c.v6 && prefix_matches(a.bytes.data(), c.address.data(), c.bits);
}

bool in_allow(const raw_address& a, const cidr_list& allow) {
    std::optional<raw_address> as_v4;
    if (a.v6) {
        if (auto e = embedded_ipv4(a.bytes)) {
            as_v4 = raw_address{};
            const std::uint32_t n = htonl(*e);
            std::memcpy(as_v4->bytes.data(), &n, 4);
        }
    }
    return std::any_of(allow.begin(), allow.end(),
                       [&](const cidr& c) { return in_cidr(a, c) || (as_v4 && in_cidr(*as_v4, c)); });
}

}  // namespace

std::expected<cidr, std::string> parse_cidr(std::string_view text) {
    const std::string shown = "'" + std::string(text) + "'";
    const std::size_t slash = text.find('/');
    if (slash == std::string_view::npos) return std::unexpected(shown + ": expects ADDRESS/PREFIX");
    if (text.size() > max_cidr_text) return std::unexpected(shown + ": too long for a CIDR");
    const std::string address(text.substr(0, slash));
    const std::string_view prefix = text.substr(slash + 1);
    cidr c;
    if (inet_pton(AF_INET, address.c_str(), c.address.data()) != 1) {
        if (inet_pton(AF_INET6, address.c_str(), c.address.data()) != 1)
            return std::unexpected(shown + ": not an IPv4 or IPv6 address before the '/'");
        c.v6 = true;
    }
    const unsigned most = c.v6 ? ipv6_bits : ipv4_bits;
    auto [end, ec] = std::from_chars(prefix.data(), prefix.data() + prefix.size(), c.bits);
    if (prefix.empty() || ec != std::errc() || end != prefix.data() + prefix.size() || c.bits > most)
        return std::unexpected(shown + ": expects a prefix length from 0 to " + std::to_string(most));
    bytes16 network{};
    for (unsigned i = 0; i < most / 8; ++i) {
        const unsigned keep = c.bits >= (i + 1) * 8 ? 8 : (c.bits > i * 8 ? c.bits - i * 8 : 0);
        network[i] = keep == 0 ? 0 : static_cast<std::uint8_t>(c.address[i] & (0xff << (8 - keep)));
    }
    if (network != c.address) return std::unexpected(shown + ": address bits set past the prefix length");
    return c;
}

std::expected<cidr_list, std::string> parse_cidr_list(std::string_view text) {
    cidr_list out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        auto c = parse_cidr(text.substr(start, comma - start));
        if (!c) return std::unexpected(c.error());
        out.push_back(*c);
        if (comma == text.size()) return out;
        start = comma + 1;
    }
}

bool refused_range(const socket_address& a) {
    const auto raw = raw_of(a);
    if (!raw) return true;
    if (!raw->v6) return refused_ipv4(v4_number(raw->bytes.data()));
    if (auto e = embedded_ipv4(raw->bytes)) return refused_ipv4(*e);
    return std::any_of(std::begin(refused_v6), std::end(refused_v6), [&](const v6_range& r) {
        return prefix_matches(raw->bytes.data(), r.network.data(), r.bits);
    });
}

bool allowed(const socket_address& a, const cidr_list& allow) {
    const auto raw = raw_of(a);
    if (!raw) return false;
    return !refused_range(a) || in_allow(*raw, allow);
}

bool is_loopback(const socket_address& a) {
    static const cidr_list loopback = *parse_cidr_list("127.0.0.0/8,::1/128");
    const auto raw = raw_of(a);
    return raw && in_allow(*raw, loopback);
}

namespace {

// "127.a.b.c" with each part a decimal number of at most 3 digits and at most 255.
bool loopback_ipv4_text(std::string_view h) {
    if (!h.starts_with("127.")) return false;
    h.remove_prefix(4);
    for (int part = 0; part < 3; ++part) {
        std::size_t n = 0;
        unsigned value = 0;
        while (n < h.size() && n < 4 && h[n] >= '0' && h[n] <= '9') value = value * 10 + static_cast<unsigned>(h[n++] - '0');
        if (n == 0 || n > 3 || value > 255) return false;
        h.remove_prefix(n);
        if (part < 2) {
            if (h.empty() || h[0] != '.') return false;
            h.remove_prefix(1);
        }
    }
    return h.empty();
}

bool iequals_ascii(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != b[i]) return false;
    }
    return true;
}

}  // namespace

bool loopback_authority(std::string_view host) {
    std::string_view name = host;
    if (std::size_t colon = host.rfind(':'); colon != std::string_view::npos && host.find(']', colon) == std::string_view::npos) {
        std::string_view port = host.substr(colon + 1);
        for (char c : port)
            if (c < '0' || c > '9') return false;
        name = host.substr(0, colon);
    }
    if (iequals_ascii(name, "localhost") || loopback_ipv4_text(name)) return true;
    if (name.size() < 3 || name.front() != '[' || name.back() != ']') return false;
    if (name == "[::1]") return true;
    auto numeric = resolve_numeric(name.substr(1, name.size() - 2), 0);  // a rare form: inet_pton
    return numeric && is_loopback(*numeric);
}

bool loopback_origin(std::string_view origin) {
    std::size_t scheme_end = origin.find("://");
    if (scheme_end == std::string_view::npos) return false;
    std::string_view scheme = origin.substr(0, scheme_end);
    if (!iequals_ascii(scheme, "http") && !iequals_ascii(scheme, "https")) return false;
    std::string_view authority = origin.substr(scheme_end + 3);
    if (authority.empty() || authority.find('/') != std::string_view::npos) return false;
    return loopback_authority(authority);
}

}  // namespace percore::net
