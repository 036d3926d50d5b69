#include "worker.hpp"

#include "base64.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <sys/epoll.h>
#include <unistd.h>
#include <vector>

namespace percore::load {

namespace {

int wait_events(int epfd, epoll_event* events, std::int64_t timeout_ns) {
    static bool have_pwait2 = true;
    if (have_pwait2) {
        timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
        int n = ::epoll_pwait2(epfd, events, max_events_per_wait, &ts, nullptr);
        if (n >= 0 || errno != ENOSYS) return n;
        have_pwait2 = false;
    }
    int ms = static_cast<int>(std::min<std::int64_t>((timeout_ns + 999'999) / 1'000'000, INT_MAX));
    return ::epoll_wait(epfd, events, max_events_per_wait, ms);
}

}  // namespace

worker::worker(const options& opts, std::uint32_t first_connection, std::uint32_t connection_count)
    : opts_(opts), first_connection_(first_connection), connection_count_(connection_count),
      body_(static_cast<std::size_t>(opts.size), 'x') {
    if (opts.if_match) etags_.resize(opts.keys);
    if (opts.style == request_style::etcd) {
        body_base64_.resize(base64_length(body_.size()));
        base64_encode(body_, body_base64_.data());
    }
}

std::expected<void, std::string> worker::run_phase(const phase_plan& plan) {
    stats_ = stats{};
    int epfd = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return std::unexpected(std::string("epoll_create1: ") + std::strerror(errno));
    worker_context ctx{opts_, plan, stats_, etags_, body_, body_base64_, epfd};

    std::int64_t interval_ns = 0;
    if (opts_.rate > 0 && !plan.prepare)
        interval_ns = std::max<std::int64_t>(1, static_cast<std::int64_t>(1e9 * opts_.connections / opts_.rate));
    std::vector<std::unique_ptr<http_client_connection>> connections;
    connections.reserve(connection_count_);
    for (std::uint32_t i = 0; i < connection_count_; ++i) {
        std::uint32_t global = first_connection_ + i;
        // stagger the schedules so that the total rate is even, not bursts of `connections`
        std::int64_t first_due = plan.start_ns + interval_ns * global / opts_.connections;
        connections.push_back(std::make_unique<http_client_connection>(ctx, global + 1, interval_ns, first_due));
    }

    std::vector<epoll_event> events(max_events_per_wait);
    std::int64_t give_up = plan.prepare ? plan.start_ns + prepare_limit_ns : plan.end_ns + drain_limit_ns;
    for (;;) {
        std::int64_t now = now_ns();
        bool stopping = !plan.prepare && now >= plan.end_ns;
        bool exhausted = plan.prepare && plan.next_key->load(std::memory_order_relaxed) >= opts_.keys;
        std::int64_t wake = INT64_MAX;
        std::size_t in_flight = 0;
        for (auto& c : connections) {
            c->pump(now, stopping);
            wake = std::min(wake, c->next_wakeup());
            in_flight += c->in_flight();
        }
        if ((stopping || exhausted) && in_flight == 0) break;
        if (now >= give_up) break;
        if (!stopping) wake = std::min(wake, plan.end_ns);
        wake = std::min(wake, give_up);
        std::int64_t timeout = std::max<std::int64_t>(0, wake - now);
        int n = wait_events(epfd, events.data(), timeout);
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; i < n; ++i)
            static_cast<http_client_connection*>(events[i].data.ptr)->on_event(events[i].events, stopping);
    }
    for (auto& c : connections) c->finish();
    connections.clear();
    ::close(epfd);
    return {};
}

}  // namespace percore::load
