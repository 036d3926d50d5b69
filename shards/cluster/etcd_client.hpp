// etcd_client: percore's client of an etcd cluster (SPEC §12), spoken over etcd's v3 HTTP/JSON
// gateway (etcd 3.4+: POST /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke, /v3/kv/txn,
// /v3/kv/range, /v3/kv/put) with percore's own HTTP client (net/client_connection.hpp): no gRPC
// library (docs/decisions.md, "etcd through its gateway"). The coordinator (leadership, fencing,
// takeover) is built on it; this layer knows nothing of leaders, only of leases, keys and
// transactions.
//
// Contract
// - One client per owner, on one shard's loop thread (runtime::loop), like a follower. Time is the
//   loop's round clock (loop.clock()); a call's deadline is a time of that clock.
// - One call at a time: every operation REQUIRES !busy(). Its `done` runs exactly once, later, on
//   the loop's thread inside a round (from a connection's on_ready(), tick(), or a posted handler),
//   never from within the operation; it may start the next call. stop() (and the destructor) drop
//   the call in flight without running its `done`. An owner that needs two things at once (a lease
//   renewed while a key is polled) makes two clients: each keeps its own connections.
// - The owner calls tick() at least every loop tick (250 ms) and, for a finer deadline, lets the
//   loop wake by wake_by() (loop_owner::wake_by): a try's timeout and the pause between rounds of
//   tries are checked there.
// - Endpoints (--cluster URL[,URL…], parse_cluster_endpoints): each is http://HOST:PORT, with its
//   own keep-alive connection, opened on first use. A try that fails — connect refused, a try's
//   timeout (etcd_try_timeout), a reset, a 5xx (etcd's Unavailable, "no leader", deadline
//   exceeded), an answer too large or unparsable (etcd_codec.hpp) — is retried on the next
//   endpoint, round robin, until the call's deadline; after every endpoint failed once the next
//   round waits etcd_round_pause. The endpoint that answered last is where the next call begins.
//   Each answer says which endpoint answered (header.endpoint, an index into endpoints()).
// - Answers: a 200 answer parsed and checked by etcd_codec is the call's value. Any other 4xx is
//   etcd's refusal, final (not retried): a problem whose status is the HTTP status and whose
//   reason is etcd's message ("etcd: etcdserver: requested lease not found"). A call whose deadline
//   passes ends with a problem of status 0 naming the last failure of every endpoint tried.
// - Logs: one line per change of state, not per try: the first answer, an answer through another
//   endpoint than the last, a call that found no endpoint answering, the first answer after that.
// - Bounds: limits.hpp (keys, values, answers, endpoints, times).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/client_connection.hpp"
#include "net/resolver.hpp"
#include "shards/base/result.hpp"
#include "shards/cluster/etcd_codec.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

namespace percore::net {
class client_socket;
}

namespace percore::shards {

struct etcd_endpoint {
    std::string url;          // as given: http://HOST:PORT
    std::string host;         // as written (brackets kept for an IPv6 literal)
    std::uint16_t port = 0;
    std::string host_field;   // the Host field: HOST:PORT
};

// "http://127.0.0.1:2379,http://etcd-2:2379": 1..max_etcd_endpoints URLs, each http (the gateway
// without TLS), a host, a port and no path; the same URL twice is refused. A problem names the URL.
result<std::vector<etcd_endpoint>> parse_cluster_endpoints(std::string_view list);

class etcd_client final {
public:
    using time_point = runtime::clock_type::time_point;
    template <class T>
    using done = std::function<void(result<T>)>;

    // REQUIRES: 1..max_etcd_endpoints endpoints. On the loop's thread from here on.
    etcd_client(runtime::loop& loop, runtime::poller& poller, std::vector<etcd_endpoint> endpoints);
    ~etcd_client();
    etcd_client(const etcd_client&) = delete;
    etcd_client& operator=(const etcd_client&) = delete;

    // A lease of ttl_seconds (min..max_etcd_lease_ttl_seconds): its ID and granted TTL.
    void grant(std::int64_t ttl_seconds, time_point deadline, done<lease_granted> done);
    // One keepalive exchange: the TTL the lease was renewed to, 0 when it is gone (expired, revoked).
    void keep_alive(std::int64_t lease, time_point deadline, done<lease_kept> done);
    // Revokes the lease (its keys are deleted with it). A lease already gone is revoked too: success
    // with header.revision 0.
    void revoke(std::int64_t lease, time_point deadline, done<write_answer> done);
    // Creates KEY=VALUE under LEASE only if KEY does not exist (create_revision == 0); either way
    // the answer holds the key as it stands (SPEC §12: its create_revision is the group's epoch).
    void create_if_absent(std::string key, std::string value, std::int64_t lease, time_point deadline,
                          done<create_answer> done);
    // KEY=VALUE, under LEASE (0: none).
    void put(std::string key, std::string value, std::int64_t lease, time_point deadline, done<write_answer> done);
    // The key, or every key starting with the prefix (not empty): at most max_etcd_range_kvs.
    void range(std::string key, time_point deadline, done<range_answer> done);
    void range_prefix(std::string prefix, time_point deadline, done<range_answer> done);
    // Deletes KEY only if its create revision is still `create_revision` (> 0): a leader's release
    // that never deletes a successor's key. deleted is false when the key is gone or another's.
    void delete_if_created(std::string key, std::int64_t create_revision, time_point deadline,
                           done<delete_answer> done);

    void tick();
    // When the next try's timeout or round pause is due (max(): nothing to wait for).
    time_point wake_by() const;
    bool busy() const { return call_ != nullptr; }
    // The loop's round clock: deadlines are times of it.
    time_point now() const { return loop_.clock().now(); }
    // Drops the call in flight (its done never runs) and closes the connections.
    void stop();

    const std::vector<etcd_endpoint>& endpoints() const { return endpoints_; }
    // Calls that ended with no endpoint answering; tries that failed (each a failover).
    std::uint64_t failed_calls() const { return failed_calls_; }
    std::uint64_t failed_tries() const { return failed_tries_; }

private:
    struct call;
    struct connection_slot;

    template <class T>
    void start(std::string_view target, std::string body, time_point deadline,
               std::function<result<T>(std::string_view)> parse, done<T> done);
    void begin(std::unique_ptr<call> c);
    void try_next();
    void send_to(connection_slot& slot);
    [[nodiscard]] bool ensure_address(connection_slot& slot);
    void exchange_done(connection_slot& slot, const net::client_outcome& outcome);
    void try_failed(std::string why);
    void finish(std::optional<problem> failure);
    void note_state(std::string state, std::string_view line);

    runtime::loop& loop_;
    runtime::poller& poller_;
    std::vector<etcd_endpoint> endpoints_;
    std::vector<std::unique_ptr<connection_slot>> slots_;
    std::unique_ptr<call> call_;
    std::size_t current_ = 0;              // the endpoint tried next (the last that answered)
    std::string logged_state_;             // what the last log line said (one line per change)
    std::uint64_t calls_started_ = 0;      // a call's id: posted handlers of an earlier call do nothing
    std::uint64_t failed_calls_ = 0;
    std::uint64_t failed_tries_ = 0;
    std::shared_ptr<etcd_client*> alive_;  // posted handlers hold it weakly
};

}  // namespace percore::shards
