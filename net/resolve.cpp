#include "net/resolve.hpp"

#include <netdb.h>

#include <cstring>
#include <string>

namespace percore::net {

std::optional<socket_address> resolve_numeric(std::string_view host, std::uint16_t port) {
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty() || host.find('\0') != std::string_view::npos) return std::nullopt;
    const std::string node(host);
    const std::string service = std::to_string(port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (::getaddrinfo(node.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) return std::nullopt;
    socket_address a;
    std::memcpy(&a.storage, found->ai_addr, found->ai_addrlen);
    a.size = found->ai_addrlen;
    ::freeaddrinfo(found);
    return a;
}

}  // namespace percore::net
