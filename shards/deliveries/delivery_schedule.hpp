// delivery_schedule: when a delivery's batch is tried again, and when it gives up (SPEC §9).
//
// Contract
// - What: a pure function of (the failed attempt's number, a random draw, the timing): no clock,
//   no I/O; the delivery engine owns the clock and the timers. Any thread.
// - The schedule: a batch's first attempt fails → the next after 5 s, then 5 min, 30 min, 2 h, 5 h,
//   10 h and 10 h, each with jitter (a factor drawn in [1 - jitter, 1 + jitter], jitter 0.2: a
//   fleet of deliveries that failed together, after a receiver's outage, do not retry together);
//   the 8th failure (1 + 7 retries) ends the batch: the delivery becomes `failed`.
// - Timing: the schedule and the time allowed to one attempt (15 s to a 2xx) are SPEC's; a test
//   may scale both down through PERCORE_TEST_DELIVERY_TIME_SCALE (a factor in (0, 1], e.g. 0.001
//   turns 5 s into 5 ms and 15 s into 15 ms; for tests only, documented as such in the README).
//   A value that does not parse or is out of range is ignored with one log line (the caller's).
//   Scaled, an attempt still gets at least 100 ms: a loopback exchange with a test receiver takes
//   a few milliseconds, and a test of the schedule's end needs answers, not timeouts.
// - REQUIRES: next_attempt(): failures >= 1; draw in [0, 1].
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace percore::shards {

// SPEC §9: after the 1st, 2nd, ... 7th failure of a batch.
inline constexpr std::array<std::chrono::seconds, 7> delivery_retry_delays = {
    std::chrono::seconds(5),          std::chrono::minutes(5), std::chrono::minutes(30), std::chrono::hours(2),
    std::chrono::hours(5),            std::chrono::hours(10),  std::chrono::hours(10)};
inline constexpr unsigned delivery_max_attempts = delivery_retry_delays.size() + 1;
static_assert(delivery_max_attempts == 8, "SPEC §9: 1 attempt and 7 retries");
// SPEC §9: "A 2xx within 15 s is success".
inline constexpr std::chrono::seconds delivery_attempt_timeout{15};
// ±20% around each delay (the draw's spread).
inline constexpr double delivery_retry_jitter = 0.2;
inline constexpr std::chrono::milliseconds min_scaled_attempt_timeout{100};
inline constexpr std::string_view delivery_time_scale_variable = "PERCORE_TEST_DELIVERY_TIME_SCALE";

struct delivery_timing {
    double scale = 1.0;  // (0, 1]: 1 in production

    // The time one attempt may take, from connect to the end of the answer.
    std::chrono::nanoseconds attempt_timeout() const;
    // After the `failures`-th failed attempt of a batch: how long until the next one, or nothing
    // when the batch has had its last attempt (the delivery is then failed).
    std::optional<std::chrono::nanoseconds> next_attempt(unsigned failures, double draw) const;
};

// The timing from the environment variable's text (null: unset): scale 1 when unset; nothing when
// set but not a number in (0, 1] (the caller logs it and uses scale 1).
std::optional<delivery_timing> delivery_timing_from(const char* scale_text);

}  // namespace percore::shards
