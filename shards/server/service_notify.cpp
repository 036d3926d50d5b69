#include "shards/server/service_notify.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <thread>

#include "shards/base/limits.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {

// A whole decimal number and nothing else (no sign, no spaces, no suffix).
template <class T>
std::optional<T> decimal(std::string_view text) {
    T value{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

std::string ignored(std::string_view variable, const char* value, std::string_view why) {
    return std::string(variable) + "=" + value + " ignored: " + std::string(why);
}

timespec timespec_of(std::chrono::nanoseconds d) {
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(d);
    return timespec{static_cast<std::time_t>(seconds.count()), static_cast<long>((d - seconds).count())};
}

}  // namespace

result<std::optional<notify_address>> notify_address_from(const char* value) {
    if (value == nullptr || *value == '\0') return std::nullopt;
    const std::string_view v(value);
    notify_address a;
    a.address.sun_family = AF_UNIX;
    constexpr std::size_t room = sizeof(a.address.sun_path);  // 108 on Linux
    constexpr std::size_t header = offsetof(sockaddr_un, sun_path);
    if (v.front() == '@') {
        // the '@' becomes the address's leading NUL; the name is not NUL-terminated
        if (v.size() > room)
            return std::unexpected(ignored(notify_socket_variable, value, "an abstract name longer than " +
                                                                          std::to_string(room - 1) + " bytes"));
        a.address.sun_path[0] = '\0';
        std::memcpy(a.address.sun_path + 1, v.data() + 1, v.size() - 1);
        a.size = static_cast<socklen_t>(header + v.size());
        return a;
    }
    if (v.front() != '/')
        return std::unexpected(ignored(notify_socket_variable, value, "neither an absolute path nor an abstract name (@...)"));
    if (v.size() >= room)
        return std::unexpected(ignored(notify_socket_variable, value, "a path longer than " +
                                                                      std::to_string(room - 1) + " bytes"));
    std::memcpy(a.address.sun_path, v.data(), v.size());
    a.address.sun_path[v.size()] = '\0';
    a.size = static_cast<socklen_t>(header + v.size() + 1);
    return a;
}

result<std::optional<std::chrono::microseconds>> watchdog_timeout_from(const char* usec,
                                                                                             const char* pid,
                                                                                             pid_t self) {
    if (usec == nullptr || *usec == '\0') return std::nullopt;
    if (pid != nullptr && *pid != '\0') {
        auto owner = decimal<pid_t>(pid);
        if (!owner || *owner <= 0) return std::unexpected(ignored(watchdog_pid_variable, pid, "not a process id"));
        if (*owner != self) return std::nullopt;  // set for another process (one that started us)
    }
    auto micros = decimal<std::int64_t>(usec);
    if (!micros || *micros <= 0)
        return std::unexpected(ignored(watchdog_usec_variable, usec, "not a positive number of microseconds"));
    return std::chrono::microseconds(*micros);
}

std::chrono::microseconds watchdog_check_interval(std::chrono::microseconds timeout) {
    return std::max<std::chrono::microseconds>(timeout / watchdog_checks_per_timeout, min_watchdog_check_interval);
}

result<std::optional<unsigned>> test_stall_shard_from(const char* value, unsigned shards) {
    if (value == nullptr || *value == '\0') return std::nullopt;
    auto shard = decimal<unsigned>(value);
    if (!shard || *shard >= shards)
        return std::unexpected(ignored(test_stall_shard_variable, value, "not a shard of " + std::to_string(shards)));
    return *shard;
}

std::string status_message(std::string_view status) {
    std::string out = "STATUS=";
    for (char c : status) out += (c == '\n' || c == '\0') ? ' ' : c;
    return out;
}

std::string ready_message(std::string_view status) { return "READY=1\n" + status_message(status); }

std::string stopping_message() { return "STOPPING=1\n" + status_message("stopping"); }

std::string serving_status(unsigned shards, std::string_view where) {
    return "serving " + std::to_string(shards) + (shards == 1 ? " shard" : " shards") + " on " + std::string(where);
}

bool heartbeat_check::check(std::span<const std::uint64_t> beats,
                            const std::function<void(unsigned shard, std::uint64_t n)>& probe) {
    PERCORE_REQUIRES(beats.size() == sent_.size());
    bool all = true;
    for (std::size_t i = 0; i < sent_.size(); ++i) {
        const bool answered = sent_[i] != 0 && beats[i] == sent_[i];
        if (answered) turned_[i] = true;
        if (!turned_[i]) all = false;
        // one probe outstanding a shard: a stuck loop does not pile them up
        if (sent_[i] == 0 || answered) probe(static_cast<unsigned>(i), ++sent_[i]);
    }
    if (all) turned_.assign(turned_.size(), false);
    return all;
}

notify_socket::notify_socket(std::optional<notify_address> to, log_fn log) : log_(std::move(log)) {
    if (!to) return;
    to_ = *to;
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) log_("cannot make a socket to notify the service manager: " + std::string(std::strerror(errno)));
}

notify_socket::~notify_socket() {
    if (fd_ >= 0) ::close(fd_);
}

void notify_socket::send(std::string_view message) {
    if (fd_ < 0) return;
    ssize_t n = ::sendto(fd_, message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                         reinterpret_cast<const sockaddr*>(&to_.address), to_.size);
    if (n >= 0) {
        failing_.store(false, std::memory_order_relaxed);
        return;
    }
    int err = errno;
    if (failing_.exchange(true, std::memory_order_relaxed)) return;  // said once until a send works again
    std::string_view first = message.substr(0, message.find('\n'));
    log_("cannot notify the service manager (" + std::string(first) + " to " + std::string(notify_socket_variable) +
         "): " + std::strerror(err));
}

namespace {

std::optional<notify_address> usable_address(const env_lookup& env, const notify_socket::log_fn& log) {
    auto address = notify_address_from(env(std::string(notify_socket_variable).c_str()));
    if (address) return *address;
    log(address.error().reason);
    return std::nullopt;
}

}  // namespace

service_notify::service_notify(const env_lookup& env, unsigned shards, notify_socket::log_fn log)
    : socket_(usable_address(env, log), log), log_(std::move(log)), shards_(shards) {
    if (auto stall = test_stall_shard_from(env(std::string(test_stall_shard_variable).c_str()), shards); stall)
        stall_shard_ = *stall;
    else
        log_(stall.error().reason);
    if (!socket_.enabled()) return;
    auto timeout = watchdog_timeout_from(env(std::string(watchdog_usec_variable).c_str()),
                                         env(std::string(watchdog_pid_variable).c_str()), ::getpid());
    if (!timeout) log_(timeout.error().reason);
    if (!timeout || !*timeout) return;
    watchdog_timeout_ = **timeout;
    check_interval_ = watchdog_check_interval(**timeout);
    log_("systemd watchdog: WATCHDOG=1 every " + std::to_string(check_interval_.count() / 1000) +
         " ms while every shard's loop turns (WATCHDOG_USEC=" + std::to_string(watchdog_timeout_->count()) + ")");
}

void service_notify::status(std::string_view text) { socket_.send(status_message(text)); }

void service_notify::recovering() {
    status("recovering " + std::to_string(shards_) + (shards_ == 1 ? " shard" : " shards"));
}

// Under the mutex, so that the counts reach the service manager in order.
void service_notify::shard_recovered() {
    if (!socket_.enabled()) return;
    std::lock_guard lock(recovery_mutex_);
    ++recovered_;
    PERCORE_ASSERT(recovered_ <= shards_);
    status("recovered " + std::to_string(recovered_) + " of " + std::to_string(shards_) + " shards");
}

void service_notify::ready(std::string_view status_text, run_on_shard_fn run) {
    PERCORE_REQUIRES(static_cast<bool>(run) && !check_);
    socket_.send(ready_message(status_text));
    run_ = std::move(run);
    if (!watchdog_timeout_) return;
    check_ = std::make_unique<heartbeat_check>(shards_);
    beats_ = std::shared_ptr<std::atomic<std::uint64_t>[]>(new std::atomic<std::uint64_t>[shards_]());
    next_check_ = std::chrono::steady_clock::now();  // the first check sends the first probes
}

void service_notify::stopping() {
    check_.reset();
    socket_.send(stopping_message());
}

void service_notify::check_watchdog() {
    PERCORE_REQUIRES(check_ && beats_ && run_);
    std::vector<std::uint64_t> beats(shards_);
    for (unsigned i = 0; i < shards_; ++i) beats[i] = beats_[i].load(std::memory_order_acquire);
    bool every_loop_turned = check_->check(beats, [this](unsigned shard, std::uint64_t n) {
        run_(shard, [beats = beats_, shard, n] { beats[shard].store(n, std::memory_order_release); });
    });
    if (every_loop_turned) socket_.send(watchdog_message);
}

void service_notify::stall_test_shard() {
    if (!stall_shard_ || !run_) return;
    log_("test hook (" + std::string(test_stall_shard_variable) + "): shard " + std::to_string(*stall_shard_) +
         "'s loop sleeps for " + std::to_string(test_stall_duration.count()) + " ms");
    run_(*stall_shard_, [] { std::this_thread::sleep_for(test_stall_duration); });
}

int service_notify::wait_signal(const sigset_t& signals) {
    for (;;) {
        int sig = 0;
        if (!check_) {
            if (::sigwait(&signals, &sig) != 0) continue;
        } else {
            auto now = std::chrono::steady_clock::now();
            if (now >= next_check_) {
                check_watchdog();
                next_check_ += check_interval_;
                if (next_check_ <= now) next_check_ = now + check_interval_;  // this thread was held up
                continue;
            }
            const timespec left = timespec_of(next_check_ - now);
            sig = ::sigtimedwait(&signals, nullptr, &left);
            if (sig < 0) continue;  // EAGAIN: a check is due; EINTR
        }
        if (sig == SIGUSR1 && stall_shard_) {
            stall_test_shard();
            continue;
        }
        return sig;
    }
}

}  // namespace percore::shards
