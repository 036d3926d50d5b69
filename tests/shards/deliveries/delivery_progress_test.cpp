#include <doctest.h>

#include "shards/deliveries/delivery_progress.hpp"

using namespace percore::shards;

namespace {
delivery_record in_flight() {
    delivery_record d;
    d.cursor = "before";
    d.batch_id = "msg_1";
    return d;
}
constexpr std::int64_t now = 1'000'000;
}  // namespace

TEST_CASE("a 2xx moves the cursor past the batch and starts the next batch afresh") {
    delivery_record d = in_flight();
    d.attempts = 2;
    d.state = delivery_state::retrying;
    d.last_error = "the receiver answered 500";
    auto next = after_attempt(d, {204, ""}, "after", now, delivery_timing{}, 0.5);
    CHECK(next.cursor == "after");
    CHECK(next.cursor_moved_unix_ms == now);
    CHECK(next.batch_id.empty());
    CHECK(next.attempts == 0);
    CHECK(next.state == delivery_state::active);
    CHECK(next.last_status == 204);
    CHECK_FALSE(next.last_error.has_value());
}

TEST_CASE("a failed attempt keeps the cursor and the batch id and schedules the next try") {
    auto next = after_attempt(in_flight(), {500, ""}, "after", now, delivery_timing{}, 0.5);
    CHECK(next.cursor == "before");
    CHECK(next.batch_id == "msg_1");
    CHECK(next.attempts == 1);
    CHECK(next.state == delivery_state::retrying);
    CHECK(next.next_attempt_unix_ms == now + 5000);
    CHECK(next.last_status == 500);
    CHECK(next.last_error == "the receiver answered 500");
}

TEST_CASE("an attempt with no answer keeps the last status and says why") {
    delivery_record d = in_flight();
    d.last_status = 503;
    auto next = after_attempt(d, {0, "timed_out: no answer in time"}, "after", now, delivery_timing{}, 0.5);
    CHECK(next.last_status == 503);
    CHECK(next.last_error == "timed_out: no answer in time");
    CHECK(next.state == delivery_state::retrying);
}

TEST_CASE("a 410 disables the delivery and keeps its cursor") {
    auto next = after_attempt(in_flight(), {410, ""}, "after", now, delivery_timing{}, 0.5);
    CHECK(next.state == delivery_state::disabled);
    CHECK(next.cursor == "before");
}

TEST_CASE("the eighth failed attempt of a batch fails the delivery") {
    delivery_record d = in_flight();
    for (int i = 0; i < 7; ++i) d = after_attempt(d, {500, ""}, "after", now, delivery_timing{}, 0.5);
    CHECK(d.state == delivery_state::retrying);
    d = after_attempt(d, {500, ""}, "after", now, delivery_timing{}, 0.5);
    CHECK(d.state == delivery_state::failed);
    CHECK(d.attempts == 8);
    CHECK(d.cursor == "before");
}

TEST_CASE("a delivery whose cursor the feed no longer holds fails, saying so") {
    auto next = fell_behind(in_flight(), now);
    CHECK(next.state == delivery_state::failed);
    REQUIRE(next.last_error.has_value());
    CHECK(next.last_error->find("--changes-retention") != std::string::npos);
}

TEST_CASE("an answer cut off past its bound keeps the status its head carried, and is a failed attempt") {
    auto next = after_attempt(in_flight(), {0, "too_large: response over max_response_bytes", 200}, "after", now,
                              delivery_timing{}, 0.5);
    CHECK(next.state == delivery_state::retrying);
    CHECK(next.cursor == "before");
    CHECK(next.last_status == 200);
}
