// delivery_progress: how one attempt's outcome moves a delivery's durable record (SPEC §9) — the
// cursor past a delivered batch, the attempt count, the retry time, the state.
//
// Contract
// - Pure functions over delivery_record values (delivery_record.hpp): no clock, no I/O, any thread.
//   The engine (delivery_engine.hpp) writes the record they return, durably, before it acts on it
//   (the next batch, or the retry's timer).
// - after_attempt(): a 2xx moves the cursor to the batch's end and starts the next batch afresh
//   (attempts 0, no batch id, state active); a 410 disables the delivery (the receiver asked to
//   stop; a PUT makes it active again, keeping its cursor); anything else — another status, or no
//   answer (timeout, refused connection, TLS failure, malformed answer) — counts a failed attempt
//   and schedules the next by delivery_schedule.hpp (state retrying), or fails the delivery after
//   its last attempt. The batch id stays across retries (the receiver's de-duplication key).
// - fell_behind(): the feed no longer holds the delivery's cursor (410): the delivery fails,
//   saying so; a PUT makes it active again, and it resumes from the feed's oldest cursor only if
//   the operator gives it one (since), never silently.
// - REQUIRES: after_attempt(): the record has a batch in flight (batch_id not empty); draw in [0, 1].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shards/deliveries/delivery_record.hpp"
#include "shards/deliveries/delivery_schedule.hpp"

namespace percore::shards {

// What one attempt came to.
struct attempt_outcome {
    int status = 0;      // the receiver's HTTP status; 0: no answer
    std::string error;   // no answer: why (short text, no secret); empty with a status
    int head_status = 0; // no answer, but its head was read (a body past the bound): that status
};

// A new batch starts: its id (the webhook-id of every try of it) and a first attempt.
delivery_record with_new_batch(delivery_record d, std::string batch_id);
delivery_record after_attempt(delivery_record d, const attempt_outcome& outcome, std::string_view batch_end_cursor,
                              std::int64_t now_unix_ms, const delivery_timing& timing, double draw);
delivery_record fell_behind(delivery_record d, std::int64_t now_unix_ms);

}  // namespace percore::shards
