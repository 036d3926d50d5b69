// cpu_pin: pins the calling thread to one CPU, for perf/'s two-thread measurements (queue_cost,
// shared_writes). Any thread; a CPU that does not exist leaves the thread where it was.
#pragma once

#include <pthread.h>
#include <sched.h>

namespace percore::perf {

inline void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace percore::perf
