// process_stats: what the kernel says about this process (proc(5), sysconf, getrlimit), sampled for
// /_metrics' process_* series — CPU time, memory, start time and descriptors.
//
// Contract
// - Any thread; each call reads /proc afresh (boot_time_seconds() once per process: it does not
//   change). Plain open/read(2): no streams, which would cost the binary and the idle RSS more
//   than the page does.
// - A value that cannot be read is 0 (the metrics page shows 0 rather than failing).
#pragma once

#include <cstdint>

namespace percore::shards {

// Fields of /proc/self/stat.
struct process_stat {
    std::uint64_t cpu_ticks = 0;    // utime + stime
    std::uint64_t start_ticks = 0;  // since boot
    std::uint64_t vsize = 0;        // bytes
    std::uint64_t rss_pages = 0;
};

process_stat read_process_stat();
// Boot time in Unix seconds: the btime line of /proc/stat.
std::uint64_t boot_time_seconds();
// Open descriptors: the entries of /proc/self/fd, less the one this count opens to read it.
std::uint64_t open_fds();
// RLIMIT_NOFILE's soft limit (all ones when unlimited).
std::uint64_t max_open_fds();
// sysconf(_SC_CLK_TCK), 100 when unknown; sysconf(_SC_PAGESIZE), 4096 when unknown.
std::uint64_t clock_ticks_per_second();
std::uint64_t page_bytes();

}  // namespace percore::shards
