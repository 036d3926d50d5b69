#include "shards/base/log_line.hpp"

#include <unistd.h>

#include <string>

namespace percore::shards {

void log_line(std::string_view text) {
    std::string line;
    line.reserve(text.size() + 10);
    line.append("percore: ").append(text).push_back('\n');
    ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    (void)n;  // stderr gone: nothing to tell anyone
}

}  // namespace percore::shards
