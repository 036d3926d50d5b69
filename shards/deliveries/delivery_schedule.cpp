#include "shards/deliveries/delivery_schedule.hpp"

#include <algorithm>
#include <charconv>
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

std::optional<delivery_timing> delivery_timing_from(const char* scale_text) {
    if (!scale_text) return delivery_timing{};
    double scale = 0;
    const char* end = scale_text + std::strlen(scale_text);
    auto [at, error] = std::from_chars(scale_text, end, scale);
    if (error != std::errc() || at != end || !(scale > 0.0) || scale > 1.0) return std::nullopt;
    return delivery_timing{scale};
}

}  // namespace percore::shards
