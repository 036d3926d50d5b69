// tls_client: HTTPS to a receiver (SPEC §9: deliveries and webhooks), as an owning C++ handle over
// the crypto module's table. The receiver's certificate chain is verified against the system's CA
// certificates (or one PEM file, ca_file), and its name against the host the caller connects to;
// TLS 1.2 or 1.3 with the server's suites (crypto/module_abi.h, "TLS"), ALPN http/1.1 offered.
//
// Contract
// - What: a tls_client owns one module client (percore_tls_client): one trust configuration, made
//   once per distinct ca_file or PEM text. connect() starts the client side of a tls_connection (crypto/tls.hpp)
//   over a caller's socket; the connection then works exactly as a server's does: handshake() runs
//   the client handshake (want_read / want_write as there), then read / write / flush / shutdown.
// - Who owns what: the tls_client owns its module client (move-only); every tls_connection made
//   from it must be gone before it. The caller owns the socket (connected, or still connecting,
//   non-blocking TCP) and closes it after the tls_connection is destroyed. The module outlives all.
// - Thread: a tls_client is immutable once made; any number of shard threads may connect() from
//   one at once. A tls_connection is one thread's at a time (crypto/tls.hpp).
// - Errors: make_tls_client() and create() answer a result (crypto/result.hpp): errc::unusable_file
//   when ca_file is missing, unreadable or holds no certificate (the message names the path),
//   errc::out_of_memory, or the loader's errors (make_tls_client loads the module on first use).
//   connect() fails only when out of memory (errc::out_of_memory). A receiver that is not trusted,
//   or whose certificate is not for `host`, is no error of connect(): the handshake answers
//   tls_status::error and last_error() says why, e.g.
//   "certificate verify failed: hostname mismatch (wanted example.com)" or
//   "certificate verify failed: unable to get local issuer certificate".
// - host: a DNS name (sent as SNI and verified against the certificate's DNS names, wildcards in
//   the leftmost label only), or an IP literal (IPv4, or IPv6 without brackets: verified against the
//   certificate's IP addresses, no SNI).
//
// REQUIRES (PERCORE_REQUIRES, always checked): the tls_client was not moved from; connect(fd, host):
// fd >= 0, host is not empty, holds no NUL byte and is at most 253 bytes (the caller has parsed
// the receiver's URL). ca_file is operator input, not a precondition: a bad one is an error.
//
// Wiring sketch (the delivery side of one shard):
//     auto client = make_tls_client(ca_file);        // at start, per distinct ca_file; on error exit 1
//     int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0); connect(fd, ...);  // EINPROGRESS
//     tls_connection tls = *client->connect(fd, "hooks.example.com");
//     switch (tls.handshake()) { want_write: wait writable ... error: log tls.last_error() ... }
#pragma once

#include <cstddef>
#include <string_view>

#include "crypto/loader.hpp"
#include "crypto/module_handle.hpp"
#include "crypto/result.hpp"
#include "crypto/tls.hpp"

namespace percore::crypto {

// The longest host connect() takes: a DNS name's most bytes (RFC 1035).
inline constexpr std::size_t tls_client_longest_host = 253;

// One trust configuration: the system CA store (ca_file empty), the PEM file ca_file (the
// operator's), or the CA certificates of PEM text held in memory (a tenant's: create_from_pem
// reads no file). Shared by every shard thread (immutable after creation).
class tls_client : public module_handle<percore_tls_client, &crypto_api::tls_client_free> {
public:
    static result<tls_client> create(const crypto_api& api, std::string_view ca_file);
    // Trusting only the certificates in `pem` (not the system's): errc::unusable_file when it holds
    // none or a block is malformed (the message says which), errc::out_of_memory.
    static result<tls_client> create_from_pem(const crypto_api& api, std::string_view pem);

    // The client side of a TLS connection over `fd` to `host`. Any thread.
    result<tls_connection> connect(int fd, std::string_view host) const;

private:
    tls_client(const crypto_api& api, percore_tls_client* client) : module_handle(api, client) {}
};

// load_crypto_module() and tls_client::create() in one step: the error is one line for the operator.
result<tls_client> make_tls_client(std::string_view ca_file);
// load_crypto_module() and tls_client::create_from_pem() in one step.
result<tls_client> make_tls_client_from_pem(std::string_view pem);

// The certificates in `pem` (PEM text; text around the blocks is dropped) written again as PEM
// alone (64-character lines, "\n" line ends), if that takes at most `max_bytes`: what a tenant's
// CA text is checked and stored as. errc::unusable_file with the reason when it holds no
// certificate, a block is malformed, or they take more than max_bytes; the loader's errors.
result<std::string> ca_certificates_pem(std::string_view pem, std::size_t max_bytes);

}  // namespace percore::crypto
