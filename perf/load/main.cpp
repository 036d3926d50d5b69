// percore-load: an HTTP/1.1 load generator for percore's document API, or for etcd v3's JSON
// gateway with --style etcd (see options.hpp for the command line, http_client_connection.hpp for
// what counts as a wrong answer).
#include "options.hpp"
#include "report.hpp"
#include "worker.hpp"

#include <atomic>
#include <fstream>
#include <iostream>
#include <string_view>
#include <memory>
#include <signal.h>
#include <sys/resource.h>
#include <thread>
#include <vector>

using namespace percore::load;

namespace {

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; }

bool run_all(std::vector<std::unique_ptr<worker>>& workers, const phase_plan& plan) {
    std::vector<std::thread> threads;
    std::atomic<bool> ok{true};
    for (auto& w : workers)
        threads.emplace_back([&w, &plan, &ok] {
            auto r = w->run_phase(plan);
            if (!r) {
                std::cerr << "percore-load: " << r.error() << "\n";
                ok = false;
            }
        });
    for (auto& t : threads) t.join();
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--help" || a == "-h") {
            std::cout << usage_text();
            return 0;
        }
    }
    auto parsed = parse_options(argc, argv);
    if (!parsed) {
        std::cerr << "percore-load: " << parsed.error() << "\n" << usage_text();
        return 2;
    }
    const options& o = *parsed;
    ::signal(SIGPIPE, SIG_IGN);

    std::vector<std::unique_ptr<worker>> workers;
    for (std::uint32_t t = 0; t < o.threads; ++t) {
        std::uint32_t first = static_cast<std::uint32_t>(std::uint64_t{o.connections} * t / o.threads);
        std::uint32_t last = static_cast<std::uint32_t>(std::uint64_t{o.connections} * (t + 1) / o.threads);
        workers.push_back(std::make_unique<worker>(o, first, last - first));
    }

    if (o.prepare) {
        std::atomic<std::uint64_t> next_key{0};
        phase_plan prep;
        prep.prepare = true;
        prep.next_key = &next_key;
        prep.start_ns = now_ns();
        prep.end_ns = prep.start_ns + prepare_limit_ns;
        if (!run_all(workers, prep)) return 1;
        stats p;
        for (auto& w : workers) p.merge(w->result());
        if (p.wrong > 0 || p.answered < o.keys) {
            std::cerr << "percore-load: prepare failed: " << p.answered << " of " << o.keys << " keys written, "
                      << p.wrong << " wrong answers, " << p.connect_errors << " connect errors"
                      << (p.first_wrong.empty() ? "" : " (first: " + p.first_wrong + ")") << "\n";
            return 1;
        }
    }

    phase_plan plan;
    plan.start_ns = now_ns();
    plan.end_ns = plan.start_ns + static_cast<std::int64_t>(o.duration_s * 1e9);
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    if (o.duration_s > 0 && !run_all(workers, plan)) return 1;
    ::getrusage(RUSAGE_SELF, &after);

    run_result result;
    for (auto& w : workers) result.totals.merge(w->result());
    result.duration_s = o.duration_s;
    result.cpu_user_s = seconds(after.ru_utime) - seconds(before.ru_utime);
    result.cpu_system_s = seconds(after.ru_stime) - seconds(before.ru_stime);

    if (o.json_path != "-") write_text(std::cout, o, result);
    if (!o.json_path.empty()) {
        if (o.json_path == "-") {
            write_json(std::cout, o, result);
        } else {
            std::ofstream f(o.json_path);
            write_json(f, o, result);
            if (!f) {
                std::cerr << "percore-load: cannot write " << o.json_path << "\n";
                return 1;
            }
        }
    }
    return 0;
}
