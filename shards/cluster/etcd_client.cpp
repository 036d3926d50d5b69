#include "shards/cluster/etcd_client.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "net/client_socket.hpp"
#include "net/resolve.hpp"
#include "shards/base/log_line.hpp"
#include "shards/cluster/limits.hpp"
#include "shards/deliveries/delivery_record.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {

std::int64_t nanoseconds(runtime::clock_type::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// An answer is read whole up to max_etcd_answer_bytes of body; its head and chunk framing are
// bounded as every client exchange's (net/limits.hpp), on top.
net::client_limits answer_limits() {
    net::client_limits l;
    l.max_kept_body_bytes = max_etcd_answer_bytes;
    l.max_response_bytes = max_etcd_answer_bytes + l.max_head_bytes + l.max_trailer_bytes;
    return l;
}

const net::header_field json_fields[] = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};

// Whether the authority of "http://AUTHORITY[/]" names a port: a ':' after the host (after the
// ']' of an IPv6 literal).
bool names_port(std::string_view url) {
    std::string_view authority = url.substr(url.find("://") + 3);
    authority = authority.substr(0, authority.find('/'));
    const std::size_t host_end = authority.starts_with('[') ? authority.find(']') : 0;
    return host_end != std::string_view::npos && authority.find(':', host_end) != std::string_view::npos;
}

result<etcd_endpoint> parse_endpoint(std::string_view url) {
    auto parsed = parse_delivery_url(url);
    if (!parsed) return std::unexpected("--cluster " + std::string(url) + ": " + parsed.error().reason);
    if (parsed->https) return std::unexpected("--cluster " + std::string(url) + ": only http:// (etcd's gateway without TLS)");
    if (parsed->target != "/") return std::unexpected("--cluster " + std::string(url) + ": no path, only http://HOST:PORT");
    if (!names_port(url)) return std::unexpected("--cluster " + std::string(url) + ": a port is needed (etcd's is 2379)");
    etcd_endpoint e;
    e.url = std::string(url);
    e.host = parsed->host;
    e.port = parsed->port;
    e.host_field = parsed->host + ":" + std::to_string(parsed->port);
    return e;
}

}  // namespace

result<std::vector<etcd_endpoint>> parse_cluster_endpoints(std::string_view list) {
    std::vector<etcd_endpoint> out;
    while (!list.empty() || out.empty()) {
        const std::size_t comma = list.find(',');
        auto e = parse_endpoint(list.substr(0, comma));
        if (!e) return std::unexpected(e.error());
        for (const etcd_endpoint& seen : out)
            if (seen.host_field == e->host_field) return std::unexpected("--cluster " + e->url + ": given twice");
        out.push_back(std::move(*e));
        if (out.size() > max_etcd_endpoints) return std::unexpected("--cluster: more than 9 endpoints");
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
        if (list.empty()) return std::unexpected("--cluster: an empty URL after a ','");
    }
    return out;
}

// The call in flight: its request, its deadline, and how it ends.
struct etcd_client::call {
    std::uint64_t id = 0;
    std::string target;
    std::string body;                       // borrowed by the connection until the exchange ends
    time_point deadline{};
    time_point paused_until{};              // waiting between rounds of tries (time_point{}: not)
    std::size_t failed_in_round = 0;        // endpoints failed since the last pause
    std::vector<std::string> failures;      // by endpoint: why its last try failed
    // Parses a 200 answer's body and keeps its value: a problem when the body is refused.
    std::function<std::optional<problem>(std::string_view body, std::size_t endpoint)> accept;
    // Runs the caller's done with the kept value, or with the problem.
    std::function<void(std::optional<problem>)> deliver;
};

// One endpoint's connection (kept alive between calls) and its address.
struct etcd_client::connection_slot final : net::client_events {
    etcd_client& owner;
    std::size_t index;
    std::optional<net::socket_address> address;
    bool forget_address = false;            // a named host that failed to connect: resolve it again
    net::resolve_handle resolving;
    std::unique_ptr<net::client_socket> transport;
    std::unique_ptr<net::client_connection> connection;
    time_point try_deadline{};

    connection_slot(etcd_client& o, std::size_t i) : owner(o), index(i) {}
    void on_exchange_done(const net::client_outcome& outcome) override { owner.exchange_done(*this, outcome); }
    bool busy() const { return connection && connection->busy(); }
};

etcd_client::etcd_client(runtime::loop& loop, runtime::poller& poller, std::vector<etcd_endpoint> endpoints)
    : loop_(loop), poller_(poller), endpoints_(std::move(endpoints)), alive_(std::make_shared<etcd_client*>(this)) {
    PERCORE_REQUIRES(!endpoints_.empty() && endpoints_.size() <= max_etcd_endpoints);
    for (std::size_t i = 0; i < endpoints_.size(); ++i) slots_.push_back(std::make_unique<connection_slot>(*this, i));
}

etcd_client::~etcd_client() { stop(); }

void etcd_client::stop() {
    call_.reset();
    for (auto& slot : slots_) {
        slot->resolving.cancel();
        slot->connection.reset();   // before the transport it uses
        slot->transport.reset();
    }
}

template <class T>
void etcd_client::start(std::string_view target, std::string body, time_point deadline,
                        std::function<result<T>(std::string_view)> parse, done<T> done) {
    PERCORE_REQUIRES(!busy() && done);
    auto c = std::make_unique<call>();
    c->target = std::string(target);
    c->body = std::move(body);
    c->deadline = deadline;
    c->failures.resize(slots_.size());
    auto value = std::make_shared<std::optional<T>>();
    c->accept = [parse = std::move(parse), value](std::string_view answer, std::size_t endpoint) -> std::optional<problem> {
        result<T> parsed = parse(answer);
        if (!parsed) return std::move(parsed.error());
        parsed->header.endpoint = endpoint;
        *value = std::move(*parsed);
        return std::nullopt;
    };
    c->deliver = [value, done = std::move(done)](std::optional<problem> failure) {
        if (failure) done(std::unexpected(std::move(*failure)));
        else done(std::move(**value));
    };
    begin(std::move(c));
}

// The first try runs from a posted handler: done never runs from within the operation.
void etcd_client::begin(std::unique_ptr<call> c) {
    c->id = ++calls_started_;
    const std::uint64_t id = c->id;
    call_ = std::move(c);
    loop_.post([alive = std::weak_ptr<etcd_client*>(alive_), id] {
        auto self = alive.lock();
        if (self && (*self)->call_ && (*self)->call_->id == id) (*self)->try_next();
    });
}

void etcd_client::grant(std::int64_t ttl_seconds, time_point deadline, done<lease_granted> done) {
    PERCORE_REQUIRES(ttl_seconds >= min_etcd_lease_ttl_seconds && ttl_seconds <= max_etcd_lease_ttl_seconds);
    start<lease_granted>("/v3/lease/grant", grant_request(ttl_seconds), deadline, parse_grant_answer, std::move(done));
}

void etcd_client::keep_alive(std::int64_t lease, time_point deadline, done<lease_kept> done) {
    PERCORE_REQUIRES(lease > 0);
    start<lease_kept>("/v3/lease/keepalive", keepalive_request(lease), deadline, parse_keepalive_answer, std::move(done));
}

void etcd_client::revoke(std::int64_t lease, time_point deadline, done<write_answer> done) {
    PERCORE_REQUIRES(lease > 0);
    // 404 "requested lease not found": gone already, which is what revoking asks for
    auto gone_is_revoked = [done = std::move(done)](result<write_answer> r) {
        if (!r && r.error().status == 404) done(write_answer{});
        else done(std::move(r));
    };
    start<write_answer>("/v3/lease/revoke", revoke_request(lease), deadline, parse_write_answer, std::move(gone_is_revoked));
}

void etcd_client::create_if_absent(std::string key, std::string value, std::int64_t lease, time_point deadline,
                                   done<create_answer> done) {
    PERCORE_REQUIRES(!key.empty() && key.size() <= max_etcd_key_bytes && value.size() <= max_etcd_value_bytes);
    std::string body = create_if_absent_request(key, value, lease);
    auto parse = [key = std::move(key)](std::string_view answer) { return parse_create_answer(answer, key); };
    start<create_answer>("/v3/kv/txn", std::move(body), deadline, std::move(parse), std::move(done));
}

void etcd_client::put(std::string key, std::string value, std::int64_t lease, time_point deadline,
                      done<write_answer> done) {
    PERCORE_REQUIRES(!key.empty() && key.size() <= max_etcd_key_bytes && value.size() <= max_etcd_value_bytes);
    start<write_answer>("/v3/kv/put", put_request(key, value, lease), deadline, parse_write_answer, std::move(done));
}

void etcd_client::range(std::string key, time_point deadline, done<range_answer> done) {
    PERCORE_REQUIRES(!key.empty() && key.size() <= max_etcd_key_bytes);
    start<range_answer>("/v3/kv/range", range_request(key, {}), deadline, parse_range_answer, std::move(done));
}

void etcd_client::range_prefix(std::string prefix, time_point deadline, done<range_answer> done) {
    PERCORE_REQUIRES(!prefix.empty() && prefix.size() <= max_etcd_key_bytes);
    start<range_answer>("/v3/kv/range", range_request(prefix, prefix_range_end(prefix)), deadline,
                        parse_range_answer, std::move(done));
}

void etcd_client::delete_if_created(std::string key, std::int64_t create_revision, time_point deadline,
                                    done<delete_answer> done) {
    PERCORE_REQUIRES(!key.empty() && key.size() <= max_etcd_key_bytes && create_revision > 0);
    start<delete_answer>("/v3/kv/txn", delete_if_created_request(key, create_revision), deadline,
                         parse_delete_answer, std::move(done));
}

// The next try of the call in flight, on endpoint current_: or its end when the deadline passed,
// or a pause once every endpoint failed in this round (tick() resumes it).
void etcd_client::try_next() {
    PERCORE_REQUIRES(call_ != nullptr);
    const time_point now = loop_.clock().now();
    if (now >= call_->deadline) {
        std::string why = "etcd: no endpoint answered within the call's deadline";
        const char* sep = " (";
        for (std::size_t i = 0; i < slots_.size(); ++i) {
            if (call_->failures[i].empty()) continue;
            why += sep + endpoints_[i].url + ": " + call_->failures[i];
            sep = "; ";
        }
        if (*sep == ';') why += ")";
        finish(problem(std::move(why)));
        return;
    }
    if (call_->failed_in_round >= slots_.size()) {
        call_->failed_in_round = 0;
        call_->paused_until = now + etcd_round_pause;
        return;
    }
    connection_slot& slot = *slots_[current_];
    PERCORE_ASSERT(!slot.busy());
    if (ensure_address(slot)) send_to(slot);
}

// Whether the slot has an address now; false: it is being resolved (the try goes on from the
// resolver's answer, on this loop).
bool etcd_client::ensure_address(connection_slot& slot) {
    if (slot.forget_address) {
        slot.forget_address = false;
        slot.address.reset();
        slot.connection.reset();
        slot.transport.reset();
    }
    if (slot.address) return true;
    const etcd_endpoint& where = endpoints_[slot.index];
    if (auto numeric = net::resolve_numeric(where.host, where.port)) {
        slot.address = *numeric;
        return true;
    }
    const std::uint64_t id = call_->id;
    slot.resolving = net::resolver::shared().resolve(loop_, where.host, where.port, [this, &slot, id](net::resolve_result r) {
        if (!call_ || call_->id != id) return;
        if (r) {
            slot.address = *r;
            try_next();
        } else {
            try_failed(r.error());
        }
    });
    return false;
}

void etcd_client::send_to(connection_slot& slot) {
    PERCORE_REQUIRES(call_ != nullptr && slot.address.has_value());
    if (!slot.connection) {
        slot.transport = std::make_unique<net::client_socket>(loop_, poller_, *slot.address);
        slot.connection = std::make_unique<net::client_connection>(*slot.transport, slot, answer_limits());
    }
    net::client_request req;
    req.method = "POST";
    req.target = call_->target;
    req.host = endpoints_[slot.index].host_field;
    req.headers = json_fields;
    req.body = call_->body;
    slot.try_deadline = std::min(loop_.clock().now() + etcd_try_timeout, call_->deadline);
    slot.connection->send(req, nanoseconds(slot.try_deadline));
}

void etcd_client::exchange_done(connection_slot& slot, const net::client_outcome& outcome) {
    PERCORE_REQUIRES(call_ != nullptr && slot.index == current_);
    if (!outcome.ok()) {
        if (outcome.error == net::client_error::connect_failed &&
            !net::resolve_numeric(endpoints_[slot.index].host, endpoints_[slot.index].port))
            slot.forget_address = true;
        std::string why = net::to_string(outcome.error);
        if (outcome.system_error != 0) why += std::string(": ") + std::strerror(outcome.system_error);
        else if (*outcome.text) why += std::string(": ") + outcome.text;
        try_failed(std::move(why));
        return;
    }
    if (outcome.body_bytes > outcome.body.size()) return try_failed("an answer larger than 256 KiB");
    if (outcome.status >= 500)
        return try_failed("HTTP " + std::to_string(outcome.status) + ": " + etcd_error_text(outcome.body));
    const std::string& url = endpoints_[slot.index].url;
    if (outcome.status != 200) {
        note_state("up " + url, "etcd: answering through " + url);
        return finish(problem(static_cast<std::uint16_t>(outcome.status), "etcd: " + etcd_error_text(outcome.body)));
    }
    if (std::optional<problem> refused = call_->accept(outcome.body, slot.index)) return try_failed(refused->reason);
    note_state("up " + url, "etcd: answering through " + url);
    finish(std::nullopt);
}

void etcd_client::try_failed(std::string why) {
    PERCORE_REQUIRES(call_ != nullptr);
    ++failed_tries_;
    call_->failures[current_] = std::move(why);
    ++call_->failed_in_round;
    current_ = (current_ + 1) % slots_.size();
    try_next();
}

void etcd_client::finish(std::optional<problem> failure) {
    PERCORE_REQUIRES(call_ != nullptr);
    std::unique_ptr<call> ended = std::move(call_);
    for (auto& slot : slots_) slot->resolving.cancel();
    if (failure && failure->status == 0) {
        ++failed_calls_;
        note_state("down", failure->reason);
    }
    ended->deliver(std::move(failure));
}

void etcd_client::note_state(std::string state, std::string_view line) {
    if (state == logged_state_) return;
    logged_state_ = std::move(state);
    log_line(line);
}

void etcd_client::tick() {
    const time_point now = loop_.clock().now();
    for (auto& slot : slots_)
        if (slot->busy()) slot->connection->tick(nanoseconds(now));   // a try past its deadline ends (timed_out)
    if (!call_) return;
    const bool in_flight = std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy(); });
    if (in_flight) return;
    const bool paused = call_->paused_until != time_point{};
    if ((paused && now >= call_->paused_until) || now >= call_->deadline) {   // a pause, or a resolution, outlived
        call_->paused_until = {};
        try_next();
    }
}

etcd_client::time_point etcd_client::wake_by() const {
    if (!call_) return time_point::max();
    time_point by = call_->deadline;
    if (call_->paused_until != time_point{}) by = std::min(by, call_->paused_until);
    for (const auto& slot : slots_)
        if (slot->busy()) by = std::min(by, slot->try_deadline);
    return by;
}

}  // namespace percore::shards
