#include "shards/deliveries/delivery_schedule.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {
std::chrono::nanoseconds scaled(std::chrono::nanoseconds d, double factor) {
    return std::chrono::nanoseconds(static_cast<std::int64_t>(static_cast<double>(d.count()) * factor));
}
}  // namespace

std::chrono::nanoseconds delivery_timing::attempt_timeout() const {
    return std::max<std::chrono::nanoseconds>(scaled(delivery_attempt_timeout, scale), min_scaled_attempt_timeout);
}

std::optional<std::chrono::nanoseconds> delivery_timing::next_attempt(unsigned failures, double draw) const {
    PERCORE_REQUIRES(failures >= 1 && draw >= 0.0 && draw <= 1.0);
    if (failures >= delivery_max_attempts) return std::nullopt;
    const double jitter = 1.0 - delivery_retry_jitter + 2.0 * delivery_retry_jitter * draw;
    return scaled(delivery_retry_delays[failures - 1], scale * jitter);
}

// strtod, not std::from_chars: libstdc++'s floating from_chars object calls fesetround, which made
// the linker keep libm.so.6 as a needed library (decided before --gc-sections dropped the call):
// 324 KiB of idle RSS for nothing (docs/perf/issue32.md). Only a plain decimal is taken: no sign,
// no spaces, no hex, no inf/nan (strtod's extras), as from_chars took.
std::optional<delivery_timing> delivery_timing_from(const char* scale_text) {
    if (!scale_text) return delivery_timing{};
    if (*scale_text < '0' || *scale_text > '9') return std::nullopt;
    char* at = nullptr;
    const double scale = std::strtod(scale_text, &at);
    if (*at != '\0' || std::strpbrk(scale_text, "xXpPeE") || !(scale > 0.0) || scale > 1.0) return std::nullopt;
    return delivery_timing{scale};
}

}  // namespace percore::shards
