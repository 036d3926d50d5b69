#include "shards/admin/admin_client.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "crypto/tls_client.hpp"
#include "net/client_connection.hpp"
#include "net/client_socket.hpp"
#include "net/resolve.hpp"
#include "net/tls_client_socket.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

namespace percore::shards {

namespace {

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// An IP literal without a lookup, else the name's first address (getaddrinfo may block on DNS:
// fine for a command-line tool, never on a shard).
std::optional<net::socket_address> resolve_host(const admin_server& server) {
    if (auto numeric = net::resolve_numeric(server.host, server.port)) return numeric;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(server.port);
    if (::getaddrinfo(server.host.c_str(), port.c_str(), &hints, &found) != 0 || !found) return std::nullopt;
    net::socket_address a;
    std::memcpy(&a.storage, found->ai_addr, found->ai_addrlen);
    a.size = static_cast<socklen_t>(found->ai_addrlen);
    ::freeaddrinfo(found);
    return a;
}

struct answer_catcher final : net::client_events {
    std::optional<admin_answer> answer;
    std::string error;
    bool done = false;
    bool streamed = false;   // the body went to a body_sink: none is kept here
    void on_exchange_done(const net::client_outcome& o) override {
        done = true;
        if (!o.ok()) {
            error = o.text;
            if (o.system_error) error += std::string(": ") + std::strerror(o.system_error);
            return;
        }
        admin_answer a;
        a.status = o.status;
        for (const auto& f : o.fields)
            if (strcasecmp(f.name.c_str(), "content-type") == 0) a.content_type = f.value;
        a.body.assign(o.body);
        if (!streamed && o.body_bytes > o.body.size()) {
            error = "the answer is longer than " + std::to_string(max_admin_answer_bytes) + " bytes";
            return;
        }
        answer = std::move(a);
    }
};

}  // namespace

result<admin_server> parse_server_url(std::string_view url) {
    admin_server s;
    s.url = std::string(url);
    std::string_view rest;
    if (url.starts_with("http://")) rest = url.substr(7);
    else if (url.starts_with("https://")) s.https = true, rest = url.substr(8);
    else return std::unexpected(problem("--server '" + s.url + "': expected http://HOST[:PORT] or https://HOST[:PORT]"));
    if (rest.ends_with('/')) rest.remove_suffix(1);
    if (rest.empty() || rest.find('/') != std::string_view::npos)
        return std::unexpected(problem("--server '" + s.url + "': expected a host and an optional port, no path"));
    const auto bracket = rest.rfind(']');
    const auto colon = rest.rfind(':');
    s.port = s.https ? 443 : 80;
    if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
        const std::string_view digits = rest.substr(colon + 1);
        unsigned long port = 0;
        for (char c : digits) port = c >= '0' && c <= '9' && port < 65536 ? port * 10 + static_cast<unsigned>(c - '0') : 65536;
        if (digits.empty() || port == 0 || port > 65535)
            return std::unexpected(problem("--server '" + s.url + "': the port is not a number from 1 to 65535"));
        s.port = static_cast<std::uint16_t>(port);
        rest = rest.substr(0, colon);
    }
    if (rest.empty()) return std::unexpected(problem("--server '" + s.url + "': no host"));
    s.host = std::string(rest);
    return s;
}

struct admin_client::parts {
    runtime::loop loop{0};
    runtime::poller poller{loop};
    std::unique_ptr<net::client_transport> transport;
    answer_catcher catcher;
    std::unique_ptr<net::client_connection> connection;
    parts() { loop.enter_round(); }
    ~parts() {
        connection.reset();
        transport.reset();
        loop.end_round();
    }
};

admin_client::admin_client(admin_server server, std::string token, std::string ca_pem, std::chrono::milliseconds timeout)
    : server_(std::move(server)), token_(std::move(token)), ca_pem_(std::move(ca_pem)), timeout_(timeout) {}

admin_client::~admin_client() = default;

result<bool> admin_client::connect_parts() {
    if (parts_) return true;
    auto address = resolve_host(server_);
    if (!address) return std::unexpected(problem("cannot reach " + server_.url + ": cannot resolve " + server_.host));
    auto p = std::make_unique<parts>();
    if (!server_.https) {
        p->transport = std::make_unique<net::client_socket>(p->loop, p->poller, *address);
    } else {
        auto tls = ca_pem_.empty() ? crypto::make_tls_client("") : crypto::make_tls_client_from_pem(ca_pem_);
        if (!tls) return std::unexpected(problem("TLS: " + std::string(tls.error().message())));
        std::string host = server_.host;
        if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
        p->transport = std::make_unique<net::tls_client_socket>(
            p->loop, p->poller, *address, std::make_shared<const crypto::tls_client>(std::move(*tls)), host);
    }
    net::client_limits limits;
    limits.max_kept_body_bytes = max_admin_answer_bytes;
    // a kept answer past max_kept_body_bytes is an error (answer_catcher); a downloaded one has no
    // bound but its deadline
    limits.max_response_bytes = std::numeric_limits<std::uint64_t>::max();
    p->connection = std::make_unique<net::client_connection>(*p->transport, p->catcher, limits);
    parts_ = std::move(p);
    return true;
}

namespace {

// download(): a 2xx body to the file, another status's body kept for its refusal line.
struct file_sink {
    std::FILE* out = nullptr;
    std::string refusal;
    bool write_failed = false;
    static void write(void* self, int status, std::string_view piece) {
        auto* s = static_cast<file_sink*>(self);
        if (status < 200 || status > 299) {
            if (s->refusal.size() < max_admin_answer_bytes) s->refusal.append(piece);
        } else if (!s->write_failed && std::fwrite(piece.data(), 1, piece.size(), s->out) != piece.size()) {
            s->write_failed = true;
        }
    }
};

}  // namespace

result<admin_answer> admin_client::call(std::string_view method, std::string_view target, std::string_view body) {
    return exchange(method, target, body, timeout_);
}

result<admin_answer> admin_client::download(std::string_view target, std::FILE* out) {
    if (auto ready = connect_parts(); !ready) return std::unexpected(ready.error());
    file_sink sink;
    sink.out = out;
    parts_->connection->set_body_sink({&file_sink::write, &sink});
    auto answer = exchange("GET", target, {}, admin_download_timeout, true);
    parts_->connection->set_body_sink({});
    if (!answer) return answer;
    if (sink.write_failed || std::fflush(out) != 0) return std::unexpected(problem("cannot write the answer to the output"));
    answer->body = std::move(sink.refusal);
    return answer;
}

result<admin_answer> admin_client::exchange(std::string_view method, std::string_view target, std::string_view body,
                                            std::chrono::nanoseconds timeout, bool streamed) {
    if (auto ready = connect_parts(); !ready) return std::unexpected(ready.error());
    parts& p = *parts_;
    const std::string authorization = "Bearer " + token_;
    std::vector<net::header_field> fields;
    if (!token_.empty()) fields.push_back({"Authorization", authorization});
    if (!body.empty()) fields.push_back({"Content-Type", "application/json"});
    const std::string host = server_.host + ":" + std::to_string(server_.port);
    net::client_request request{.method = method, .target = target, .host = host, .headers = fields, .body = body};
    p.catcher = answer_catcher{};
    p.catcher.streamed = streamed;
    const std::int64_t deadline = now_ns() + timeout.count();
    p.connection->send(request, deadline);
    while (!p.catcher.done) {  // the loop's rounds by hand: posted turns, then the poller's
        p.loop.run_posted();
        if (p.poller.poll() == 0 && !p.catcher.done) ::usleep(500);
        p.connection->tick(now_ns());
    }
    if (!p.catcher.answer) {
        const char* what = p.transport->open_failure().empty() ? "" : ": ";
        return std::unexpected(problem("cannot reach " + server_.url + ": " + p.catcher.error + what +
                                       std::string(p.transport->open_failure())));
    }
    return std::move(*p.catcher.answer);
}

}  // namespace percore::shards
