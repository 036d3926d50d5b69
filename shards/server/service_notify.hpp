// service_notify: the systemd notify protocol (SPEC §11; sd_notify(3)) without libsystemd —
// `percore serve` tells its service manager how its start goes (STATUS=), that it serves
// (READY=1), that it stops (STOPPING=1) and, while every shard's loop turns, that it lives
// (WATCHDOG=1).
//
// The protocol, which systemd documents as stable: one datagram per message, sent on an AF_UNIX
// SOCK_DGRAM socket to the address in $NOTIFY_SOCKET — an absolute path, or an abstract name
// written with a leading '@' (in the address that '@' is a NUL byte, and no NUL ends the name).
// A message is VARIABLE=value assignments, one a line:
//
//   "READY=1\nSTATUS=serving 3 shards on 127.0.0.1:8080"
//    └ one ┘   └──────────── another ─────────────┘      (no newline after the last, no NUL)
//
// What is sent, in order: STATUS=binding HOST:PORT; STATUS=recovering N shards; STATUS=recovered
// K of N shards as each shard's store recovers; READY=1 with STATUS=serving N shards on
// HOST:PORT once every shard recovered and accepts (when main prints its ready line);
// WATCHDOG=1 while every loop turns; STOPPING=1 with STATUS=stopping on SIGTERM/SIGINT.
//
// Contract
// - Unset or empty NOTIFY_SOCKET: nothing is sent, no socket is made, no probe posted. A
//   NOTIFY_SOCKET that cannot be used (neither absolute nor '@', too long for an address) or a
//   socket that cannot be made: one log line at start, then as when unset. Never fatal; nothing in
//   the environment is changed (no unsetenv).
// - notify_socket::send(): any thread (shards report their recovery from their own threads);
//   never blocks (MSG_DONTWAIT: a service manager that does not read must not stall a shard or
//   the stop). A failed send is one log line; later failures are silent until a send succeeds.
// - Watchdog (WATCHDOG_USEC set; WATCHDOG_PID unset or our pid; else it is another process's):
//   after ready(), the main thread's wait_signal() checks every WATCHDOG_USEC /
//   watchdog_checks_per_timeout (shards/base/limits.hpp) and sends WATCHDOG=1 only when every shard's
//   loop ran a probe since the last ping. A probe is a handler posted to the shard's loop
//   (runtime::loop::post) that writes its number into the shard's heartbeat; a loop stuck in one
//   round runs none, so the pings stop and systemd restarts the service after WatchdogSec. Each
//   shard has at most one probe outstanding. stopping() ends the checks: from then on the stop's
//   own bound (SPEC §1: 5 s) and systemd's TimeoutStopSec apply.
// - Test hook, for tests only: PERCORE_TEST_STALL_SHARD=<n> read at start makes SIGUSR1 block
//   shard n's loop for test_stall_duration (shards/base/limits.hpp) — one handler posted to it sleeps
//   — so a test can watch the pings stop. Without the variable SIGUSR1 is not waited for and
//   keeps its default action (the process ends), as before this module.
// - Every member of service_notify but shard_recovered() is for the main thread.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shards/base/result.hpp"
#include "shards/server/options.hpp"

namespace percore::shards {

inline constexpr std::string_view notify_socket_variable = "NOTIFY_SOCKET";
inline constexpr std::string_view watchdog_usec_variable = "WATCHDOG_USEC";
inline constexpr std::string_view watchdog_pid_variable = "WATCHDOG_PID";
inline constexpr std::string_view test_stall_shard_variable = "PERCORE_TEST_STALL_SHARD";

// Where the service manager listens: the socket address and the length to pass to sendto().
struct notify_address {
    sockaddr_un address{};
    socklen_t size = 0;
};

// $NOTIFY_SOCKET: none when unset or empty; the reason (for one log line) when unusable.
result<std::optional<notify_address>> notify_address_from(const char* value);

// $WATCHDOG_USEC and $WATCHDOG_PID: the watchdog's timeout, none when it is off or not ours
// (WATCHDOG_PID names another process), the reason when a value is not a number.
result<std::optional<std::chrono::microseconds>> watchdog_timeout_from(
    const char* usec, const char* pid, pid_t self);
// How often the main thread checks the heartbeats for that timeout.
[[nodiscard]] std::chrono::microseconds watchdog_check_interval(std::chrono::microseconds timeout);

// $PERCORE_TEST_STALL_SHARD: the shard SIGUSR1 stalls; none when unset; the reason when it is
// not a shard of `shards`.
result<std::optional<unsigned>> test_stall_shard_from(const char* value,
                                                                                       unsigned shards);

// The messages (the format is drawn above). A status is one line: a newline in it becomes a space.
[[nodiscard]] std::string status_message(std::string_view status);
[[nodiscard]] std::string ready_message(std::string_view status);
[[nodiscard]] std::string stopping_message();
inline constexpr std::string_view watchdog_message = "WATCHDOG=1";
// "serving 3 shards on 127.0.0.1:8080" (`where`: HOST:PORT as the ready line prints it).
[[nodiscard]] std::string serving_status(unsigned shards, std::string_view where);

// The watchdog's decision, apart from threads and clocks. Shard i's heartbeat holds the number
// of the last probe its loop ran; probe numbers start at 1 and grow by one a shard.
class heartbeat_check {
public:
    explicit heartbeat_check(unsigned shards) : sent_(shards, 0), turned_(shards, false) {}

    // One check. `beats`: every shard's heartbeat now. Calls probe(i, n) for every shard that
    // ran the last probe sent to it (at the first check: every shard), to send it probe n.
    // Returns true — ping — when every shard ran a probe since the last check that returned true
    // (the first check never does: no probe was sent before it). REQUIRES: one beat a shard.
    bool check(std::span<const std::uint64_t> beats, const std::function<void(unsigned shard, std::uint64_t n)>& probe);

private:
    std::vector<std::uint64_t> sent_;  // the number of the last probe sent to each shard (0: none)
    std::vector<bool> turned_;         // the shard ran a probe since the last ping
};

// The socket to the service manager; disabled when there is none.
class notify_socket {
public:
    using log_fn = std::function<void(const std::string&)>;
    notify_socket(std::optional<notify_address> to, log_fn log);
    ~notify_socket();
    notify_socket(const notify_socket&) = delete;
    notify_socket& operator=(const notify_socket&) = delete;

    bool enabled() const { return fd_ >= 0; }
    // Any thread; see the contract.
    void send(std::string_view message);

private:
    notify_address to_{};
    log_fn log_;
    int fd_ = -1;
    std::atomic<bool> failing_{false};
};

// `percore serve`'s side of the protocol.
class service_notify {
public:
    // Runs f on shard i's loop, inside a round, soon (runtime::group::run_on_shard).
    using run_on_shard_fn = std::function<void(unsigned shard, std::function<void()> f)>;

    // Reads the variables above; a value it cannot use is one line to `log`.
    service_notify(const env_lookup& env, unsigned shards, notify_socket::log_fn log);

    bool enabled() const { return socket_.enabled(); }
    // The test hook is on: main adds SIGUSR1 to the signals it blocks and waits for.
    bool stall_hook() const { return stall_shard_.has_value(); }

    void status(std::string_view text);
    // STATUS=recovering N shards; then shard_recovered() from each shard's thread as its store
    // recovers (STATUS=recovered K of N shards, K in order).
    void recovering();
    void shard_recovered();
    // READY=1 with `status`; starts the watchdog's checks (and arms the stall hook) on `run`.
    void ready(std::string_view status, run_on_shard_fn run);
    // STOPPING=1; ends the watchdog's checks.
    void stopping();

    // The main thread's wait: one of `signals` (sigwait), checking the watchdog when due between
    // them; SIGUSR1 (in `signals` only with the test hook) stalls the hook's shard and waits on.
    int wait_signal(const sigset_t& signals);

private:
    void check_watchdog();
    void stall_test_shard();

    notify_socket socket_;
    notify_socket::log_fn log_;
    unsigned shards_;
    std::optional<std::chrono::microseconds> watchdog_timeout_;
    std::optional<unsigned> stall_shard_;
    std::mutex recovery_mutex_;
    unsigned recovered_ = 0;  // under recovery_mutex_
    // The watchdog, from ready() until stopping().
    run_on_shard_fn run_;
    std::unique_ptr<heartbeat_check> check_;
    std::shared_ptr<std::atomic<std::uint64_t>[]> beats_;  // by shard; shared with the probes in flight
    std::chrono::microseconds check_interval_{0};
    std::chrono::steady_clock::time_point next_check_{};
};

}  // namespace percore::shards
