// Helpers for the crypto tests: the module (found through PERCORE_CRYPTO_MODULE, which meson sets),
// temporary folders, certificates made with the openssl command, non-blocking socket pairs, and
// drivers that run both ends of a TLS connection in one thread.
//
// Why the client side comes from the module (test_tls_client_new) rather than from OpenSSL linked
// into the tests: nothing but the module may link OpenSSL. One test also talks to `openssl s_client`,
// an independent client, over loopback.
#pragma once

#include <doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/loader.hpp"
#include "crypto/seal.hpp"
#include "crypto/tls.hpp"

namespace percore::crypto::testing {

inline const crypto_api& api() {
    auto loaded = load_crypto_module();
    if (!loaded) FAIL(loaded.error());
    return **loaded;
}

class temp_dir {
public:
    temp_dir() {
        char pattern[] = "/tmp/percore-crypto-XXXXXX";
        REQUIRE(::mkdtemp(pattern) != nullptr);
        path_ = pattern;
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    ~temp_dir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    const std::string& path() const { return path_; }
    std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

private:
    std::string path_;
};

inline void write_file(const std::string& path, std::string_view content) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    REQUIRE(out.good());
}

inline std::string run_command(const std::string& command) {
    std::string output;
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
    ::pclose(pipe);
    return output;
}

struct certificate {
    std::string cert;
    std::string key;
};

// A self-signed certificate for localhost and 127.0.0.1; `key_spec` is openssl req's -newkey.
inline certificate make_certificate(const temp_dir& dir, const std::string& name,
                                    const std::string& key_spec = "ec -pkeyopt ec_paramgen_curve:P-256") {
    certificate made{dir.file(name + ".crt"), dir.file(name + ".key")};
    std::string command = "openssl req -x509 -newkey " + key_spec + " -nodes -days 2 -subj /CN=localhost"
                          " -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + made.key +
                          " -out " + made.cert + " >/dev/null 2>&1";
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
    return made;
}

// The SHA-256 fingerprint of a PEM certificate, as the openssl command computes it.
inline std::array<std::uint8_t, 32> fingerprint(const std::string& cert_path) {
    std::string out = run_command("openssl x509 -noout -fingerprint -sha256 -in " + cert_path);
    std::size_t eq = out.find('=');
    REQUIRE(eq != std::string::npos);
    std::array<std::uint8_t, 32> bytes{};
    std::size_t at = eq + 1;
    for (std::uint8_t& b : bytes) {
        REQUIRE(at + 2 <= out.size());
        b = static_cast<std::uint8_t>(std::stoi(out.substr(at, 2), nullptr, 16));
        at += 3;
    }
    return bytes;
}

struct socket_pair {
    int client = -1;
    int server = -1;
    socket_pair() {
        int fds[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
        client = fds[0];
        server = fds[1];
    }
    socket_pair(const socket_pair&) = delete;
    socket_pair& operator=(const socket_pair&) = delete;
    ~socket_pair() {
        close_client();
        if (server >= 0) ::close(server);
    }
    void close_client() {
        if (client >= 0) ::close(client);
        client = -1;
    }
};

inline tls_connection make_client(int fd, const percore_tls_client_options& options = {}) {
    char err[512] = {};
    percore_tls_conn* conn = api().test_tls_client_new(fd, &options, err, sizeof err);
    if (conn == nullptr) FAIL(err);
    return tls_connection(api(), conn);
}

inline percore_tls_client_options client_options(int max_version = 0, const char* alpn = "http/1.1") {
    percore_tls_client_options o{};
    o.max_version = max_version;
    o.alpn = alpn;
    return o;
}

inline tls_server make_server(const certificate& c) {
    auto server = tls_server::create(api(), c.cert, c.key);
    if (!server) FAIL(server.error());
    return std::move(*server);
}

inline bool final_status(tls_status s) { return s == tls_status::ok || s == tls_status::error || s == tls_status::closed; }

struct handshake_result {
    tls_status client = tls_status::want_write;
    tls_status server = tls_status::want_read;
    bool ok() const { return client == tls_status::ok && server == tls_status::ok; }
};

// Runs both handshakes to their end in this thread (the sockets are non-blocking).
inline handshake_result handshake(tls_connection& client, tls_connection& server) {
    handshake_result r;
    constexpr int max_rounds = 1000;
    for (int round = 0; round < max_rounds && !(final_status(r.client) && final_status(r.server)); ++round) {
        if (!final_status(r.client)) r.client = client.handshake();
        if (!final_status(r.server)) r.server = server.handshake();
        // A side that failed sent its alert; the other side may still be waiting for bytes that
        // never come: stop once one failed and the other has nothing left to read.
        if ((r.client == tls_status::error && !final_status(r.server) && round > 10) ||
            (r.server == tls_status::error && !final_status(r.client) && round > 10))
            break;
    }
    return r;
}

// Sends `text` from one end and reads it at the other, both driven here; returns what arrived.
inline std::string transfer(tls_connection& from, tls_connection& to, std::string_view text) {
    std::string got;
    std::size_t taken = 0;
    bool sent = text.empty();
    std::vector<char> buf(64 * 1024);
    constexpr int max_rounds = 200000;
    for (int round = 0; round < max_rounds && !(sent && got.size() >= text.size()); ++round) {
        if (!sent) {
            tls_io io = taken < text.size() ? from.write(std::span<const char>(text.data() + taken, text.size() - taken))
                                            : tls_io{from.flush(), 0};
            taken += io.bytes;
            REQUIRE_MESSAGE(!(io.status == tls_status::error || io.status == tls_status::closed), from.last_error());
            sent = io.status == tls_status::ok && taken == text.size();
        }
        tls_io in = to.read(buf);
        if (in.status == tls_status::ok) got.append(buf.data(), in.bytes);
        else REQUIRE_MESSAGE((in.status == tls_status::want_read || in.status == tls_status::want_write), to.last_error());
    }
    return got;
}

// Reads from `conn` until it says something other than ok with bytes; returns the last status.
inline tls_status read_until_blocked(tls_connection& conn, std::string& into) {
    char buf[4096];
    for (;;) {
        tls_io in = conn.read(buf);
        if (in.status != tls_status::ok) return in.status;
        into.append(buf, in.bytes);
    }
}

// Sets PERCORE_SEAL_SUITE for the life of the object (unset when `value` is null).
class seal_suite_override {
public:
    explicit seal_suite_override(const char* value) {
        if (const char* old = std::getenv("PERCORE_SEAL_SUITE")) {
            had_ = true;
            old_ = old;
        }
        if (value != nullptr) ::setenv("PERCORE_SEAL_SUITE", value, 1);
        else ::unsetenv("PERCORE_SEAL_SUITE");
    }
    ~seal_suite_override() {
        if (had_) ::setenv("PERCORE_SEAL_SUITE", old_.c_str(), 1);
        else ::unsetenv("PERCORE_SEAL_SUITE");
    }

private:
    bool had_ = false;
    std::string old_;
};

}  // namespace percore::crypto::testing
