// tls_client: the client side deliveries use to reach HTTPS receivers. The receiver is a tls_server
// (production module) with a certificate from a test CA; the client is the production module's
// tls_client. Both ends run in the test's thread over a non-blocking socket pair.
#include <doctest.h>

#include <fstream>
#include <iterator>
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

// ---- CA certificates given as PEM text (a delivery's ca_pem, SPEC §9): no file is read

namespace {

std::string file_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

tls_client trusting_text(const std::string& pem) {
    auto client = make_tls_client_from_pem(pem);
    if (!client) FAIL(text(client.error()));
    return std::move(*client);
}

}  // namespace

TEST_CASE("a client made from the test CA's PEM text reaches localhost verified by it") {
    receiver r;
    tls_client from_text = trusting_text(file_text(r.authority.ca.cert));
    dialed d = r.dial_from(from_text, "localhost");
    CHECK(d.result.ok());
}

TEST_CASE("a client made from another CA's PEM text refuses the receiver: the system's CAs are not added") {
    receiver r;
    certificate_authority other = make_certificate_authority(r.dir, "other");
    tls_client from_text = trusting_text(file_text(other.ca.cert));
    dialed d = r.dial_from(from_text, "localhost");
    CHECK(d.result.client == tls_status::error);
    CHECK(contains(d.client.last_error(), "certificate verify failed"));
}

TEST_CASE("PEM text with no certificate or a damaged block makes no client and says why") {
    receiver r;
    std::string damaged = file_text(r.authority.ca.cert);
    damaged[damaged.find('\n') + 10] = '*';  // inside the first base64 line
    for (const std::string& pem : {std::string("not a certificate"), std::string(), damaged}) {
        auto client = make_tls_client_from_pem(pem);
        REQUIRE_FALSE(client);
        CHECK(client.error() == errc::unusable_file);
        CHECK(contains(client.error().message(), "TLS CA certificates (PEM text): "));
    }
}

TEST_CASE("the certificates of PEM text are written again alone, the text around them dropped") {
    receiver r;
    certificate_authority other = make_certificate_authority(r.dir, "other");
    const std::string ca = file_text(r.authority.ca.cert), second = file_text(other.ca.cert);
    auto canonical = ca_certificates_pem("a comment\n" + ca + "between\n" + second + "after", 64 * 1024);
    REQUIRE(canonical);
    CHECK(*canonical == ca + second);  // openssl wrote them in this very form
    tls_client from_text = trusting_text(*canonical);
    CHECK(r.dial_from(from_text, "localhost").result.ok());
}

TEST_CASE("the certificates of PEM text that take more than the bound asked are refused with their size") {
    receiver r;
    const std::string ca = file_text(r.authority.ca.cert);
    auto canonical = ca_certificates_pem(ca, ca.size() - 1);
    REQUIRE_FALSE(canonical);
    CHECK(canonical.error() == errc::unusable_file);
    CHECK(contains(canonical.error().message(), "more than"));
    CHECK_FALSE(ca_certificates_pem("no certificate here", 1024));
}
