// sync_overlap: what a second sync in flight would buy a quiet writer beside a flooded one.
//
// Writer A floods: it appends batches of a_batch_bytes and fdatasyncs each, back to back. Writer
// B writes b_record_bytes b_rate times a second (fixed times, latency from each intended time).
// Three ways for B, measured in rotated rounds:
//   shared     B's record joins A's next batch (one log, one sync at a time: percore today):
//              B waits for the sync in flight, then for the one that carries it
//   overlap    B writes its record at the log's end at once and fdatasyncs it on its own thread,
//              while A's sync may be in flight (one log, two syncs in flight)
//   own-file   B appends to a file of its own and syncs it (two processes, two logs)
// Prints B's p50 / p99 / p99.9 and A's syncs a second for each. Usage:
//   sync_overlap DIRECTORY [seconds_per_round] [rounds]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::size_t a_batch_bytes = 6 << 10;  // a batch of 64 connections' 16 B PUTs
constexpr std::size_t b_record_bytes = 96;      // one 16 B PUT's record
constexpr int b_rate = 200;                     // perf/apps.py's B, writes

enum class mode { shared, overlap, own_file };
const char* name(mode m) { return m == mode::shared ? "shared" : m == mode::overlap ? "overlap" : "own-file"; }

int open_file(const std::string& path) {
    ::unlink(path.c_str());
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        std::perror(path.c_str());
        std::exit(1);
    }
    return fd;
}

void must(bool ok, const char* what) {
    if (!ok) {
        std::perror(what);
        std::exit(1);
    }
}

struct log_file {  // one file, appended at `end` under `mutex` (write position only)
    int fd = -1;
    std::mutex mutex;
    off_t end = 0;
    void append(const char* data, std::size_t n) {
        std::lock_guard lock(mutex);
        must(::pwrite(fd, data, n, end) == static_cast<ssize_t>(n), "pwrite");
        end += static_cast<off_t>(n);
    }
};

struct round_result {
    std::vector<double> b_latency_us;
    double a_syncs_per_s = 0;
};

round_result run(const std::string& dir, mode m, double seconds) {
    log_file a_log;
    a_log.fd = open_file(dir + "/a.log");
    log_file b_log;
    b_log.fd = m == mode::own_file ? open_file(dir + "/b.log") : -1;
    std::vector<char> a_batch(a_batch_bytes, 'a'), b_record(b_record_bytes, 'b');

    // shared: B's waiting records (their intended times), taken into A's next batch
    std::mutex pending_mutex;
    std::vector<clock_type::time_point> pending;
    std::vector<double> latencies;
    std::atomic<bool> stop{false};
    std::uint64_t a_syncs = 0;
    const auto start = clock_type::now();
    const auto until = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));

    std::thread a([&] {
        std::vector<clock_type::time_point> carried;
        while (!stop.load()) {
            carried.clear();
            if (m == mode::shared) {
                std::lock_guard lock(pending_mutex);
                carried.swap(pending);
            }
            for (std::size_t i = 0; i < carried.size(); ++i) a_log.append(b_record.data(), b_record.size());
            a_log.append(a_batch.data(), a_batch.size());
            must(::fdatasync(a_log.fd) == 0, "fdatasync");
            ++a_syncs;
            const auto done = clock_type::now();
            std::lock_guard lock(pending_mutex);
            for (auto t : carried) latencies.push_back(std::chrono::duration<double, std::micro>(done - t).count());
        }
    });
    const auto period = std::chrono::microseconds(1'000'000 / b_rate);
    for (auto next = start + std::chrono::milliseconds(100); next < until; next += period) {
        std::this_thread::sleep_until(next);
        if (m == mode::shared) {
            std::lock_guard lock(pending_mutex);
            pending.push_back(next);
            continue;
        }
        log_file& target = m == mode::overlap ? a_log : b_log;
        target.append(b_record.data(), b_record.size());
        must(::fdatasync(target.fd) == 0, "fdatasync");
        const auto done = clock_type::now();
        std::lock_guard lock(pending_mutex);
        latencies.push_back(std::chrono::duration<double, std::micro>(done - next).count());
    }
    stop.store(true);
    a.join();
    const double wall = std::chrono::duration<double>(clock_type::now() - start).count();
    ::close(a_log.fd);
    if (b_log.fd >= 0) ::close(b_log.fd);
    return {std::move(latencies), static_cast<double>(a_syncs) / wall};
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: sync_overlap DIRECTORY [seconds_per_round] [rounds]\n");
        return 2;
    }
    const std::string dir = argv[1];
    const double seconds = argc > 2 ? std::atof(argv[2]) : 3.0;
    const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
    const mode modes[] = {mode::shared, mode::overlap, mode::own_file};
    std::vector<double> all[3];
    std::vector<double> syncs[3];
    for (int r = 0; r < rounds; ++r)
        for (int i = 0; i < 3; ++i) {
            const int k = (i + r) % 3;
            round_result res = run(dir, modes[k], seconds);
            std::printf("round %d %-8s B p50 %7.0f us  p99 %7.0f us  A %6.0f syncs/s\n", r, name(modes[k]),
                        percentile(res.b_latency_us, 0.5), percentile(res.b_latency_us, 0.99), res.a_syncs_per_s);
            all[k].insert(all[k].end(), res.b_latency_us.begin(), res.b_latency_us.end());
            syncs[k].push_back(res.a_syncs_per_s);
        }
    for (int k = 0; k < 3; ++k)
        std::printf("all      %-8s B p50 %7.0f us  p99 %7.0f us  p99.9 %7.0f us  A %6.0f syncs/s (median)\n",
                    name(modes[k]), percentile(all[k], 0.5), percentile(all[k], 0.99), percentile(all[k], 0.999),
                    percentile(syncs[k], 0.5));
    ::unlink((dir + "/a.log").c_str());
    ::unlink((dir + "/b.log").c_str());
    return 0;
}
