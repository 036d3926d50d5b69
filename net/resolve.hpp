// resolve: a receiver's address from a URL's host and port, for client_socket.
//
// Contract
// - resolve_numeric(): numeric hosts only — an IPv4 literal ("192.0.2.7") or an IPv6 literal,
//   bracketed as in a URL ("[2001:db8::1]") or not — through getaddrinfo(AI_NUMERICHOST |
//   AI_NUMERICSERV), which never touches DNS, so it is safe on a shard's loop. nullopt for anything
//   else, a name included.
// - Names ("hooks.example.com") are NOT resolved here: getaddrinfo() on a name blocks for as long
//   as DNS takes (seconds), which would stall the whole shard. They need an asynchronous resolver
//   (a resolver thread answering through the shard's mailbox, or c-ares on the loop): built in net/resolver.hpp.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace percore::net {

struct socket_address {
    sockaddr_storage storage{};
    socklen_t size = 0;

    int family() const { return storage.ss_family; }
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

std::optional<socket_address> resolve_numeric(std::string_view host, std::uint16_t port);

}  // namespace percore::net
