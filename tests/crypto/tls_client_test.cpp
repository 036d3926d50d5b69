// tls_client: the client side deliveries use to reach HTTPS receivers. The receiver is a tls_server
// (production module) with a certificate from a test CA; the client is the production module's
// tls_client. Both ends run in the test's thread over a non-blocking socket pair.
#include <doctest.h>

#include <memory>
#include <string>
#include <string_view>

#include "crypto/tls_client.hpp"
#include "crypto_test_support.hpp"

using namespace percore::crypto;
using namespace percore::crypto::testing;

namespace {

tls_client trusting(const std::string& ca_file) {
    auto client = make_tls_client(ca_file);
    if (!client) FAIL(text(client.error()));
    return std::move(*client);
}

// A client connection to `host` and the server's end, handshakes run to their end.
struct dialed {
    std::unique_ptr<socket_pair> sockets = std::make_unique<socket_pair>();
    tls_connection client;
    tls_connection server;
    handshake_result result;
};

dialed dial_with(const tls_client& client, tls_server& server, std::string_view host) {
    dialed d;
    auto connected = client.connect(d.sockets->client, host);
    if (!connected) FAIL(text(connected.error()));
    d.client = std::move(*connected);
    auto accepted = server.accept(d.sockets->server);
    REQUIRE(accepted.has_value());
    d.server = std::move(*accepted);
    d.result = handshake(d.client, d.server);
    return d;
}

// A receiver (a tls_server whose certificate a test CA signed for localhost and 127.0.0.1) and a
// client that trusts that CA.
struct receiver {
    temp_dir dir;
    certificate_authority authority = make_certificate_authority(dir, "receiver");
    tls_server server = make_server(authority.leaf);
    tls_client client = trusting(authority.ca.cert);

    dialed dial(std::string_view host) { return dial_with(client, server, host); }
    dialed dial_from(const tls_client& other, std::string_view host) { return dial_with(other, server, host); }
};

bool contains(std::string_view haystack, std::string_view needle) { return haystack.find(needle) != std::string_view::npos; }

}  // namespace

TEST_CASE("a client that trusts the test CA reaches localhost over TLS and carries data both ways") {
    receiver r;
    dialed d = r.dial("localhost");
    REQUIRE(d.result.ok());
    tls_info info = d.client.info();
    CHECK(info.alpn == "http/1.1");
    CHECK(info.peer_certificate_sha256 == fingerprint(r.authority.leaf.cert));
    CHECK(transfer(d.client, d.server, "POST /hook HTTP/1.1\r\nHost: localhost\r\n\r\n") ==
          "POST /hook HTTP/1.1\r\nHost: localhost\r\n\r\n");
    CHECK(transfer(d.server, d.client, "HTTP/1.1 204 No Content\r\n\r\n") == "HTTP/1.1 204 No Content\r\n\r\n");
}

TEST_CASE("a certificate for another host name is refused, and the error names the wanted name") {
    receiver r;
    dialed d = r.dial("hooks.example.com");
    CHECK(d.result.client == tls_status::error);
    CHECK(d.client.last_error() == "certificate verify failed: hostname mismatch (wanted hooks.example.com)");
    CHECK(d.result.server == tls_status::error);  // the client's alert ends the server side too
}

TEST_CASE("a client with the system's CA certificates refuses a certificate from the test CA") {
    receiver r;
    tls_client system_store = trusting("");
    dialed d = r.dial_from(system_store, "localhost");
    CHECK(d.result.client == tls_status::error);
    CHECK(d.client.last_error() == "certificate verify failed: unable to get local issuer certificate");
}

TEST_CASE("a client that trusts another CA refuses the certificate") {
    receiver r;
    certificate_authority other = make_certificate_authority(r.dir, "other");
    tls_client other_client = trusting(other.ca.cert);
    dialed d = r.dial_from(other_client, "localhost");
    CHECK(d.result.client == tls_status::error);
    CHECK(contains(d.client.last_error(), "certificate verify failed"));
}

TEST_CASE("a missing ca_file is an unusable file that names its path") {
    temp_dir dir;
    const std::string missing = dir.file("missing-ca.pem");
    auto client = make_tls_client(missing);
    REQUIRE_FALSE(client.has_value());
    CHECK(client.error() == errc::unusable_file);
    CHECK(text(client.error()) == "cannot read TLS CA file " + missing + ": No such file or directory");
}

TEST_CASE("a ca_file that holds no certificate is an unusable file that names its path") {
    temp_dir dir;
    const std::string empty = dir.file("empty-ca.pem");
    write_file(empty, "not a certificate\n");
    auto client = make_tls_client(empty);
    REQUIRE_FALSE(client.has_value());
    CHECK(client.error() == errc::unusable_file);
    CHECK(text(client.error()) == "TLS CA file " + empty + " holds no PEM certificate");
}

TEST_CASE("a folder given as ca_file is an unusable file that names its path") {
    temp_dir dir;
    auto client = make_tls_client(dir.path());
    REQUIRE_FALSE(client.has_value());
    CHECK(client.error() == errc::unusable_file);
    CHECK(text(client.error()) == "TLS CA file " + dir.path() + " is not a regular file");
}

TEST_CASE("an IP literal host is verified against the certificate's IP addresses") {
    receiver r;
    dialed d = r.dial("127.0.0.1");
    REQUIRE(d.result.ok());
    CHECK(transfer(d.client, d.server, "by address") == "by address");
}

TEST_CASE("an IP literal the certificate does not hold is refused, and the error names it") {
    receiver r;
    dialed d = r.dial("127.0.0.2");
    CHECK(d.result.client == tls_status::error);
    CHECK(d.client.last_error() == "certificate verify failed: IP address mismatch (wanted 127.0.0.2)");
}

TEST_CASE("one client makes several connections, each verified for its own host") {
    receiver r;
    dialed first = r.dial("localhost");
    dialed second = r.dial("127.0.0.1");
    CHECK(first.result.ok());
    CHECK(second.result.ok());
    CHECK_FALSE(second.client.info().resumed);  // no client-side session cache: each is a full handshake
}
