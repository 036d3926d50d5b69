#include "shards/deliveries/delivery_progress.hpp"

#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {
std::string status_error(int status) { return "the receiver answered " + std::to_string(status); }
}  // namespace

delivery_record with_new_batch(delivery_record d, std::string batch_id) {
    d.batch_id = std::move(batch_id);
    d.attempts = 0;
    return d;
}

delivery_record after_attempt(delivery_record d, const attempt_outcome& outcome, std::string_view batch_end_cursor,
                              std::int64_t now_unix_ms, const delivery_timing& timing, double draw) {
    PERCORE_REQUIRES(!d.batch_id.empty());
    d.updated_unix_ms = now_unix_ms;
    ++d.attempts;
    if (outcome.status != 0) d.last_status = outcome.status;
    else if (outcome.head_status != 0) d.last_status = outcome.head_status;
    if (outcome.status >= 200 && outcome.status < 300) {
        d.cursor = std::string(batch_end_cursor);
        d.cursor_moved_unix_ms = now_unix_ms;
        d.batch_id.clear();
        d.attempts = 0;
        d.state = delivery_state::active;
        d.last_error.reset();
        d.next_attempt_unix_ms = 0;
        return d;
    }
    d.last_error = outcome.status != 0 ? status_error(outcome.status) : outcome.error;
    if (outcome.status == 410) {
        d.state = delivery_state::disabled;
        return d;
    }
    auto next = timing.next_attempt(d.attempts, draw);
    if (!next) {
        d.state = delivery_state::failed;
        d.next_attempt_unix_ms = 0;
        return d;
    }
    d.state = delivery_state::retrying;
    d.next_attempt_unix_ms = now_unix_ms + std::chrono::duration_cast<std::chrono::milliseconds>(*next).count();
    return d;
}

delivery_record fell_behind(delivery_record d, std::int64_t now_unix_ms) {
    d.state = delivery_state::failed;
    d.last_error = "fell behind --changes-retention: the feed no longer holds its cursor";
    d.updated_unix_ms = now_unix_ms;
    d.next_attempt_unix_ms = 0;
    return d;
}

}  // namespace percore::shards
