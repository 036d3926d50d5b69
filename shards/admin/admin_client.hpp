// admin_client: `percore admin`'s one HTTP(S) exchange at a time with a running server, over the
// project's own client (net/client_connection.hpp) on a loop and poller of its own, pumped until
// the answer or the deadline: a blocking call, for a command-line tool, not for a shard.
//
// Contract
// - What: parse_server_url() reads `--server` (http:// or https://, a host — an IP literal, or a
//   name resolved once with getaddrinfo — and an optional port; no path). call() sends one request
//   with the bearer token (when one was given) and returns the final status and the body, or an
//   error line saying why no answer came (refused connection, TLS, timeout, a malformed answer).
// - Who owns what: the client owns its loop, poller, transport and connection; the crypto module
//   is loaded on the first https call only (crypto/tls_client.hpp).
// - Thread: the caller's, which must not be a shard's (it blocks up to `timeout`).
// - Bounds: an answer of at most max_admin_answer_bytes is kept whole (a list of 1,000 tokens is
//   ~150 KiB); a longer one ends the call with an error, never a truncated body. download()
//   streams a 2xx body of any size to a file instead (a backup), bounded by its own deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "shards/base/result.hpp"

namespace percore::shards {

// 16 MiB: a hundred times the largest administration answer (1,000 tokens), far below memory.
inline constexpr std::size_t max_admin_answer_bytes = std::size_t{16} << 20;
inline constexpr std::chrono::seconds default_admin_timeout{10};
// A backup of a board's data (SD card: ~20-40 MB/s; 32 GiB at most on a Pi-class board) within
// an hour; a server that stalls longer is given up on.
inline constexpr std::chrono::hours admin_download_timeout{1};

struct admin_server {
    bool https = false;
    std::string host;        // as written (brackets kept for an IPv6 literal)
    std::uint16_t port = 0;
    std::string url;         // as given, for messages
};

result<admin_server> parse_server_url(std::string_view url);

struct admin_answer {
    int status = 0;
    std::string content_type;
    std::string body;
};

class admin_client {
public:
    // ca_pem: PEM text of the CAs that verify an https server; empty: the system's.
    admin_client(admin_server server, std::string token, std::string ca_pem,
                 std::chrono::milliseconds timeout = default_admin_timeout);
    ~admin_client();
    admin_client(const admin_client&) = delete;
    admin_client& operator=(const admin_client&) = delete;

    // One exchange; an error is one line ("cannot reach http://127.0.0.1:8080: connection refused").
    result<admin_answer> call(std::string_view method, std::string_view target, std::string_view body = {});
    // GET target with a 2xx body written to `out` as it arrives (the answer's body is then empty);
    // another status's body is kept as call() keeps it. An error also when `out` fails a write.
    result<admin_answer> download(std::string_view target, std::FILE* out);

private:
    struct parts;
    [[nodiscard]] result<bool> connect_parts();
    result<admin_answer> exchange(std::string_view method, std::string_view target, std::string_view body,
                                  std::chrono::nanoseconds timeout, bool streamed = false);
    admin_server server_;
    std::string token_;
    std::string ca_pem_;
    std::chrono::milliseconds timeout_;
    std::unique_ptr<parts> parts_;
};

}  // namespace percore::shards
