// Helpers for the crypto tests: the production module (api(): found through PERCORE_CRYPTO_MODULE,
// which meson sets), the test build of the module (test_api() and test_entries(): found through
// PERCORE_TEST_CRYPTO_MODULE, or beside the crypto_tests binary), temporary folders, certificates
// made with the openssl command, non-blocking socket pairs, and drivers that run both ends of a TLS
// connection in one thread.
//
// Two modules: the production one holds only what the server uses, so the test-only entries
// (tests/crypto/test_module_abi.h) come from percore-crypto-test.so, the same objects plus
// test_entries.cpp. A handle must go back to the module that made it: a client from
// test_entries().test_tls_client_new is wrapped with test_api(), a key or server that a test entry
// is given must have been made through test_api(). The two ends of a connection may come from
// different modules (they only share a socket): servers under test are the production module's.
//
// Why the client side comes from a module rather than from OpenSSL linked into the tests: nothing
// but the modules may link OpenSSL. One test also talks to `openssl s_client`, an independent
// client, over loopback.
#pragma once

#include <doctest.h>

#include <dlfcn.h>
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
#include "tests/crypto/test_module_abi.h"

namespace percore::crypto::testing {

// An error's message as a std::string (what doctest prints and compares).
inline std::string text(const error& e) { return std::string(e.message()); }

// The production module, as the server loads it.
inline const crypto_api& api() {
    auto loaded = load_crypto_module();
    if (!loaded) FAIL(text(loaded.error()));
    return **loaded;
}

// The test build of the module: its production table and its test table.
struct test_module_tables {
    const crypto_api* api = nullptr;
    const percore_crypto_test_v1* test = nullptr;
};

inline std::string test_module_path() {
    if (const char* set = std::getenv("PERCORE_TEST_CRYPTO_MODULE"); set != nullptr && *set != '\0') return set;
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    return self.substr(0, self.rfind('/') + 1) + "percore-crypto-test.so";
}

inline const test_module_tables& test_module() {
    static const test_module_tables tables = [] {
        const std::string path = test_module_path();
        auto loaded = load_crypto_module_from({path});  // checks the production table as the server would
        if (!loaded) FAIL("test crypto module: " << text(loaded.error()));
        void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);  // already open
        if (handle == nullptr) FAIL("test crypto module " << path << " is not loaded");
        auto get = reinterpret_cast<percore_crypto_test_v1_get_fn>(::dlsym(handle, PERCORE_CRYPTO_TEST_ENTRY_SYMBOL));
        if (get == nullptr) FAIL(path << " has no " PERCORE_CRYPTO_TEST_ENTRY_SYMBOL);
        const percore_crypto_test_v1* test = get();
        if (test == nullptr || test->abi_version != PERCORE_CRYPTO_TEST_ABI_VERSION ||
            test->struct_size < sizeof(percore_crypto_test_v1))
            FAIL(path << ": its test table is of another version");
        return test_module_tables{*loaded, test};
    }();
    return tables;
}

inline const crypto_api& test_api() { return *test_module().api; }
inline const percore_crypto_test_v1& test_entries() { return *test_module().test; }

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

// A test certificate authority and a certificate for localhost and 127.0.0.1 that it signed (the
// server serves `leaf`; a client that trusts `ca.cert` accepts it).
struct certificate_authority {
    certificate ca;
    certificate leaf;
};

inline certificate_authority make_certificate_authority(const temp_dir& dir, const std::string& name) {
    const std::string ec_key = "ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    certificate_authority made{{dir.file(name + "-ca.crt"), dir.file(name + "-ca.key")},
                               {dir.file(name + ".crt"), dir.file(name + ".key")}};
    const std::string request = dir.file(name + ".csr"), extensions = dir.file(name + ".ext");
    write_file(extensions, "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n"
                           "extendedKeyUsage=serverAuth\n");
    const std::string commands[] = {
        "openssl req -x509 -newkey " + ec_key + " -days 2 -subj '/CN=percore test CA'"
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign"
        " -keyout " + made.ca.key + " -out " + made.ca.cert,
        "openssl req -new -newkey " + ec_key + " -subj /CN=localhost -keyout " + made.leaf.key + " -out " + request,
        "openssl x509 -req -in " + request + " -CA " + made.ca.cert + " -CAkey " + made.ca.key +
        " -set_serial 2 -days 2 -extfile " + extensions + " -out " + made.leaf.cert,
    };
    for (const std::string& command : commands)
        REQUIRE_MESSAGE(std::system((command + " >/dev/null 2>&1").c_str()) == 0, command);
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
    percore_tls_conn* conn = test_entries().test_tls_client_new(fd, &options, err, sizeof err);
    if (conn == nullptr) FAIL(err);
    return tls_connection(test_api(), conn);
}

inline percore_tls_client_options client_options(int max_version = 0, const char* alpn = "http/1.1") {
    percore_tls_client_options o{};
    o.max_version = max_version;
    o.alpn = alpn;
    return o;
}

// A server from the production module, or from `from` (test_api() when a test entry needs it).
inline tls_server make_server(const certificate& c, const crypto_api& from = api()) {
    auto server = tls_server::create(from, c.cert, c.key);
    if (!server) FAIL(text(server.error()));
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
