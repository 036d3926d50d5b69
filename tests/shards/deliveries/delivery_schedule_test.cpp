#include <doctest.h>

#include <chrono>

#include "shards/deliveries/delivery_schedule.hpp"

using namespace percore::shards;
using namespace std::chrono_literals;

TEST_CASE("a failed batch is tried again after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h, then given up") {
    const delivery_timing t;
    const std::chrono::nanoseconds expected[] = {5s, 5min, 30min, 2h, 5h, 10h, 10h};
    for (unsigned failures = 1; failures <= 7; ++failures) {
        CAPTURE(failures);
        auto next = t.next_attempt(failures, 0.5);  // the middle of the jitter: the delay itself
        REQUIRE(next.has_value());
        CHECK(*next == expected[failures - 1]);
    }
    CHECK_FALSE(t.next_attempt(8, 0.5).has_value());
    CHECK_FALSE(t.next_attempt(9, 0.5).has_value());
}

TEST_CASE("the jitter spreads a retry over 80% to 120% of its delay") {
    const delivery_timing t;
    CHECK(*t.next_attempt(1, 0.0) == 4s);
    CHECK(*t.next_attempt(1, 1.0) == 6s);
    CHECK(*t.next_attempt(4, 0.0) == std::chrono::duration_cast<std::chrono::nanoseconds>(2h * 0.8));
}

TEST_CASE("an attempt may take 15 s, and the test scale shrinks attempts (to at least 100 ms) and retries alike") {
    CHECK(delivery_timing{}.attempt_timeout() == 15s);
    const auto t = delivery_timing_from("0.001");
    REQUIRE(t.has_value());
    CHECK(t->attempt_timeout() == 100ms);  // 15 ms scaled, raised to the floor
    CHECK(delivery_timing_from("0.01")->attempt_timeout() == 150ms);
    CHECK(*t->next_attempt(1, 0.5) == 5ms);
    CHECK(*t->next_attempt(2, 0.5) == 300ms);
}

TEST_CASE("the scale variable unset is production timing, and one that is not a factor in (0, 1] is refused") {
    REQUIRE(delivery_timing_from(nullptr).has_value());
    CHECK(delivery_timing_from(nullptr)->scale == 1.0);
    CHECK(delivery_timing_from("1")->scale == 1.0);
    for (const char* bad : {"", "0", "-0.5", "2", "fast", "0.5x", "nan", " 0.5", "+0.5", "0x0.8", "5e-1", "inf"}) {
        CAPTURE(bad);
        CHECK_FALSE(delivery_timing_from(bad).has_value());
    }
}
