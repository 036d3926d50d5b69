// round_clock: the time of the current loop round — read once when a round begins, so every
// deadline and latency of the round uses one clock read (a syscall-free vDSO read is still ~20 ns,
// and a round may handle hundreds of requests).
//
// Owned by a shard's loop, which set()s it as each round begins; read on that shard's thread only.
// A test owns one and sets it by hand: that is the fake clock of the connection tests.
#pragma once

#include <chrono>

namespace percore::runtime {

using clock_type = std::chrono::steady_clock;

class round_clock {
public:
    clock_type::time_point now() const { return now_; }
    void set(clock_type::time_point t) { now_ = t; }
    void advance(std::chrono::nanoseconds d) { now_ += d; }

private:
    clock_type::time_point now_{};
};

}  // namespace percore::runtime
