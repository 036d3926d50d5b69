#include "net/resolver.hpp"

#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "net/limits.hpp"
#include "shards/runtime/check.hpp"
#include "shards/runtime/loop.hpp"

namespace percore::net {

namespace detail {

struct resolve_request {
    runtime::loop* loop = nullptr;
    std::string host;
    std::uint16_t port = 0;
    resolve_callback done;   // the loop's thread only
    bool cancelled = false;  // written on the loop's thread under the state's mutex
    bool answered = false;   // the loop's thread only
};

// Shared by the resolver, its handles and its thread. Every field but the options under `mutex`.
struct resolver_state {
    explicit resolver_state(resolver_options o) : options(std::move(o)) {
        if (options.max_pending == 0) options.max_pending = max_pending_resolutions;
        if (!options.lookup) options.lookup = lookup_address;
    }

    resolver_options options;  // set before the thread starts, read-only after
    std::mutex mutex;
    std::condition_variable ready;     // the thread waits for a name or stop
    std::condition_variable finished;  // stop() waits for the lookup in flight
    std::deque<std::shared_ptr<resolve_request>> queue;
    std::size_t pending = 0;  // queued + the one being looked up
    bool resolving = false;
    bool stopping = false;
    bool started = false;
    std::thread thread;
};

}  // namespace detail

namespace {

using detail::resolve_request;
using detail::resolver_state;

// On the loop's thread, inside a round: hands the answer over unless the handle was cancelled.
void deliver(resolve_request& r, resolve_result result) {
    if (r.cancelled || r.answered) return;
    r.answered = true;
    resolve_callback done = std::move(r.done);  // the callback may destroy the handle
    r.done = nullptr;
    done(std::move(result));
}

void post_answer(const std::shared_ptr<resolve_request>& r, resolve_result result) {
    r->loop->post([r, result = std::move(result)]() mutable { deliver(*r, std::move(result)); });
}

// The thread may have been started from a shard's pinned thread and inherited its one CPU: take
// the process's set (the main thread's: the runtime pins shard threads only).
void leave_shard_cpu() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(::getpid(), sizeof set, &set) == 0)
        ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
    ::pthread_setname_np(::pthread_self(), "percore-dns");
}

void run_thread(const std::shared_ptr<resolver_state>& s) {
    leave_shard_cpu();
    std::unique_lock lock(s->mutex);
    for (;;) {
        s->ready.wait(lock, [&] { return s->stopping || !s->queue.empty(); });
        if (s->stopping) return;
        std::shared_ptr<resolve_request> r = std::move(s->queue.front());
        s->queue.pop_front();
        s->resolving = true;
        lock.unlock();
        resolve_result result = s->options.lookup(r->host, r->port);  // blocks: no lock held
        lock.lock();
        s->resolving = false;
        --s->pending;
        // Under the mutex: a cancel() that returned has been seen; one that comes later is
        // seen by deliver() on the loop's thread.
        if (!s->stopping && !r->cancelled) post_answer(r, std::move(result));
        if (s->stopping) s->finished.notify_all();
    }
}

// Queues a name, starting the thread on the first. An error text when refused.
std::optional<std::string> enqueue(const std::shared_ptr<resolver_state>& s, std::shared_ptr<resolve_request> r) {
    std::lock_guard lock(s->mutex);
    if (s->stopping) return "resolver stopped";
    if (s->pending >= s->options.max_pending) return "resolver busy";
    if (!s->started) {
        try {
            s->thread = std::thread([s] { run_thread(s); });
        } catch (const std::system_error& e) {
            return std::string("resolver thread could not start: ") + e.what();
        }
        s->started = true;
    }
    s->queue.push_back(std::move(r));
    ++s->pending;
    s->ready.notify_one();
    return std::nullopt;
}

bool valid_host(const std::string& host) {
    return !host.empty() && host.size() <= max_host_bytes && host.find('\0') == std::string::npos;
}

}  // namespace

resolve_result lookup_address(const std::string& host, std::uint16_t port) {
    const std::string service = std::to_string(port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    if (rc != 0 || found == nullptr) {
        const int error = errno;
        std::string reason = rc == 0 ? "no address" : ::gai_strerror(rc);  // static strings
        if (rc == EAI_SYSTEM) reason = std::generic_category().message(error);
        return std::unexpected("cannot resolve " + host + ": " + reason);
    }
    socket_address a;
    PERCORE_ASSERT(found->ai_addrlen <= sizeof a.storage);
    std::memcpy(&a.storage, found->ai_addr, found->ai_addrlen);
    a.size = found->ai_addrlen;
    ::freeaddrinfo(found);
    return a;
}

resolver& resolver::shared() {
    static resolver instance;
    return instance;
}

resolver::resolver(resolver_options options) : state_(std::make_shared<resolver_state>(std::move(options))) {}

resolver::~resolver() { stop(); }

resolve_handle resolver::resolve(runtime::loop& loop, std::string host, std::uint16_t port, resolve_callback done) {
    PERCORE_REQUIRES(done != nullptr);
    PERCORE_REQUIRES(runtime::this_shard() == runtime::no_shard || runtime::this_shard() == loop.shard());
    auto r = std::make_shared<resolve_request>();
    r->loop = &loop;
    r->port = port;
    r->done = std::move(done);
    std::optional<std::string> refused;
    if (!valid_host(host)) {
        refused = "invalid host name";
    } else if (std::optional<socket_address> numeric = resolve_numeric(host, port)) {
        post_answer(r, *numeric);
        return resolve_handle(state_, std::move(r));
    } else {
        r->host = std::move(host);
        refused = enqueue(state_, r);
    }
    if (refused) post_answer(r, std::unexpected(std::move(*refused)));
    return resolve_handle(state_, std::move(r));
}

void resolver::stop() {
    std::deque<std::shared_ptr<resolve_request>> dropped;
    std::thread thread;
    bool stuck = false;
    {
        std::unique_lock lock(state_->mutex);
        state_->stopping = true;
        dropped.swap(state_->queue);
        state_->pending -= dropped.size();
        state_->ready.notify_all();
        stuck = !state_->finished.wait_for(lock, resolver_stop_grace, [&] { return !state_->resolving; });
        thread = std::move(state_->thread);
    }
    if (!thread.joinable()) return;
    if (stuck) {
        thread.detach();  // it holds the state; it posts nothing now and ends when its lookup does
    } else {
        thread.join();
    }
}

bool resolver::thread_started() const {
    std::lock_guard lock(state_->mutex);
    return state_->started;
}

std::size_t resolver::pending() const {
    std::lock_guard lock(state_->mutex);
    return state_->pending;
}

resolve_handle& resolve_handle::operator=(resolve_handle&& other) noexcept {
    if (this != &other) {
        cancel();
        state_ = std::move(other.state_);
        request_ = std::move(other.request_);
    }
    return *this;
}

void resolve_handle::cancel() {
    if (!request_) return;
    {
        std::lock_guard lock(state_->mutex);
        request_->cancelled = true;
        auto& q = state_->queue;
        const auto at = std::find(q.begin(), q.end(), request_);
        if (at != q.end()) {
            q.erase(at);
            --state_->pending;
        }
    }
    request_->done = nullptr;  // on the loop's thread, as the callback was made
    request_.reset();
    state_.reset();
}

bool resolve_handle::pending() const { return request_ && !request_->cancelled && !request_->answered; }

}  // namespace percore::net
