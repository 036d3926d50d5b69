// shard: one core's server — its thread's event loop, listening socket, connections, store and
// its ends of the cross-shard queues.
//
// The loop, one round at a time (one clock read each):
//   1. run every ready I/O handler (accept, read + parse + answer reads from snapshots, write);
//   2. drain the queues from other shards: writes for keys it owns, answers to writes it sent;
//   3. apply the batch of writes gathered this round to its store and publish the new snapshot,
//      then send each write's answer to the shard that holds its connection;
//   4. push what waits in its outgoing backlogs and wake receivers that are asleep;
//   5. free snapshots no shard can still be reading;
//   6. if the round did nothing, sleep in the reactor until I/O, a timer or a wakeup.
// Thread: everything here runs on the shard's own thread, except wake() (any thread) and the
// read-only accessors used by other shards (store().current(), metrics(), connection_stats()).
//
// Start: run() recovers the store (on the shard's thread), then accepts and loops. A shard that
// cannot start reports it with shard_group::fail(), which aborts the group's start. Recovery reads
// its files through an env that fails them with ECANCELED once the group stops, so a shard still
// recovering gives up within one read when another shard failed or SIGTERM came; it then counts as
// given up (fail() with no reason), not as a failure of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "crypto/tls.hpp"
#include "net/connection_pool.hpp"
#include "shards/document_api.hpp"
#include "shards/metrics.hpp"
#include "shards/shard_message.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

class shard_group;
class recovery_env;

inline constexpr std::size_t drain_batch_messages = 256;
inline constexpr std::chrono::milliseconds tick_interval{250};
inline constexpr std::chrono::milliseconds stop_grace{3000};

class shard {
public:
    shard(shard_group& group, unsigned id, const net::connection_limits& limits, std::uint64_t first_version);
    ~shard();

    unsigned id() const { return id_; }
    void listen(const boost::asio::ip::tcp::endpoint& endpoint);  // main thread, before run(); throws system_error
    std::uint16_t local_port() const { return acceptor_.local_endpoint().port(); }
    // HTTPS beside HTTP: main thread, before run(); `tls` is shared by every shard and outlives them.
    void listen_tls(const boost::asio::ip::tcp::endpoint& endpoint, crypto::tls_server& tls);
    std::uint16_t local_tls_port() const { return tls_acceptor_.local_endpoint().port(); }

    void run();
    void wake();

    const store::shard_store& store() const { return store_; }
    const shard_metrics& metrics() const { return metrics_; }
    shard_metrics& metrics() { return metrics_; }
    const net::connection_stats& connection_stats() const { return pool_.stats(); }

    // Own thread only.
    void enter_round();
    void submit(unsigned owner, store::write_op op);

private:
    std::size_t drain_inbound();
    std::size_t commit_writes();
    std::size_t flush_outbound();
    void send(unsigned to, const shard_message& m);
    void deliver(std::uint64_t tag, store::write_outcome outcome, std::uint64_t version, bool current_exists);
    void idle_wait();
    void on_tick();
    void arm_wake();
    void check_stop();
    bool has_inbound() const;
    bool start_up();
    bool recover_store();

    shard_group& group_;
    unsigned id_;
    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::ip::tcp::acceptor tls_acceptor_;
    crypto::tls_server* tls_ = nullptr;
    int wake_fd_ = -1;
    boost::asio::posix::stream_descriptor wake_descriptor_;
    boost::asio::steady_timer tick_;
    std::unique_ptr<recovery_env> files_;  // the store's env (see Start); outlives store_
    store::shard_store store_;
    shard_metrics metrics_;
    document_api api_;
    net::connection_pool pool_;

    std::vector<store::write_result> results_;
    std::vector<std::deque<shard_message>> backlog_;  // per destination, when its queue is full
    std::vector<std::uint8_t> sent_to_;                // destinations pushed to this round
    std::uint64_t outstanding_remote_ = 0;             // writes sent to owners, not yet answered
    bool in_round_ = false;
    bool exit_ = false;
    bool stop_started_ = false;
    bool drained_ = false;
    net::clock_type::time_point stop_deadline_{};

public:
    alignas(64) std::atomic<bool> sleeping{false};
};

}  // namespace percore::shards
