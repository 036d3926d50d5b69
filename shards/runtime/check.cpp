#include "shards/runtime/check.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace percore::runtime {

thread_local constinit unsigned detail::current_shard = no_shard;

void set_this_shard(unsigned id) { detail::current_shard = id; }

// One write(2) of one line, no allocation: the process may be out of memory or mid-corruption.
void check_failed(const char* file, int line, const char* condition) {
    char text[512];
    int n;
    if (detail::current_shard == no_shard)
        n = std::snprintf(text, sizeof text, "percore: assertion failed on main at %s:%d: %s\n", file, line, condition);
    else
        n = std::snprintf(text, sizeof text, "percore: assertion failed on shard %u at %s:%d: %s\n", detail::current_shard, file,
                          line, condition);
    if (n > 0) {
        ssize_t w = ::write(STDERR_FILENO, text, static_cast<std::size_t>(n) < sizeof text ? static_cast<std::size_t>(n) : sizeof text - 1);
        (void)w;
    }
    std::abort();
}

}  // namespace percore::runtime
