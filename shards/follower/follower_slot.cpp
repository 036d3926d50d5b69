#include "shards/follower/follower_slot.hpp"

#include "shards/apps/admin_token.hpp"
#include "shards/base/log_line.hpp"
#include "shards/base/write_ticket.hpp"
#include "shards/follower/diverged_capture.hpp"

namespace percore::shards {

follower_slot::follower_slot(store_client& stores, app_registry& apps, const server_view& server,
                             delivery_transports& transports, runtime::loop& loop, const board_role& role,
                             follow_credentials credentials, follower_status& status, bool auth_on)
    : stores_(stores), apps_(apps), server_(server), transports_(transports), loop_(loop), role_(role),
      credentials_(std::move(credentials)), status_(status), auth_on_(auth_on) {}

// The role asks for no copy while one runs, or for a copy of another primary than the running one's,
// or for a copy while none runs.
bool follower_slot::wants_change() const {
    const bool follows = role_.kind() == board_kind::follower;
    if (!current_) return follows && !stopping_;
    return retiring_ || !follows || role_.leader_changes() != made_for_;
}

bool follower_slot::retire() {
    PERCORE_REQUIRES(current_ != nullptr);
    if (!retiring_) {
        current_->begin_stop();
        retiring_ = true;
    }
    if (!current_->quiet()) return false;
    current_.reset();
    retiring_ = false;
    status_.connected.store(false, std::memory_order_relaxed);
    return true;
}

bool follower_slot::refresh_token() {
    PERCORE_REQUIRES(!current_);
    if (credentials_.token_file.empty()) return true;
    const std::int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    runtime::clock_type::now().time_since_epoch()).count();
    if (now_ns < token_retry_at_ns_) return false;
    std::string why;
    auto token = read_token_file(credentials_.token_file, "--follow-token-file", [&why](const std::string& line) { why = line; });
    if (token && !token->starts_with("pca_")) {
        credentials_.token = std::move(*token);
        token_failure_.clear();
        return true;
    }
    why = token ? "--follow-token-file holds the admin token; the group needs a replication token"
                : token.error().reason;
    if (why != token_failure_) log_line("follower: no token to copy with: " + why + " (read again every 4 s)");
    token_failure_ = std::move(why);
    token_retry_at_ns_ = now_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(max_follow_retry).count();
    return false;
}

bool follower_slot::record_led_epoch(std::uint64_t epoch) {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()) && settled() && epoch != 0);
    if (led_recorded_ == epoch) return true;
    if (led_recording_ != 0) return false;  // one write at a time; asked again after it answered
    store::write_op op;
    op.kind = store::write_kind::put;
    op.doc = store::copy_document(led_epoch_key, "text/plain", encode_led_epoch(epoch));
    op.tag = write_ticket::background(stores_.self(), issuer::follower, ++led_sequence_).encode();
    led_recording_ = epoch;
    stores_.submit(stores_.owner_of(led_epoch_key), std::move(op));
    return false;
}

std::size_t follower_slot::step(time_point now) {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    if (led_recording_ != 0) return 0;  // no follower before the led-epoch record's write answered
    if (wants_change()) {
        if (current_ && !retire()) return 0;
        if (role_.kind() == board_kind::follower && !stopping_) {
            if (!refresh_token()) return 0;
            made_for_ = role_.leader_changes();  // before the URL: a move in between makes another change
            std::string url = role_.leader_url();
            PERCORE_ASSERT(!url.empty());
            log_line("follower: copying " + url);
            led_recorded_ = 0;  // the follower may erase the record (follower.hpp)
            current_ = std::make_unique<follower>(
                stores_, apps_, server_, transports_, loop_,
                follow_config{std::move(url), credentials_.token, credentials_.ca_pem, role_.epoch(), credentials_.data_root,
                              credentials_.board},
                status_, auth_on_);
        }
    }
    return current_ ? current_->step(now) : 0;
}

bool follower_slot::has_work(time_point now) const {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    if (led_recording_ != 0) return false;
    if (current_ && current_->has_work(now)) return true;
    return wants_change() && (!current_ || current_->quiet());
}

void follower_slot::begin_stop() {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    stopping_ = true;
    if (current_) current_->begin_stop();
}

void follower_slot::write_done(const store::write_result& result) {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    if (led_recording_ != 0) {  // no follower runs while it is in flight (step)
        PERCORE_ASSERT(current_ == nullptr);
        const bool ok = result.outcome == store::write_outcome::created || result.outcome == store::write_outcome::replaced;
        if (ok) led_recorded_ = led_recording_;
        else log_line("follower: the led-epoch record was not written; written again");
        led_recording_ = 0;
        return;
    }
    PERCORE_ASSERT(current_ != nullptr);  // a follower is dropped only once its writes are settled
    current_->write_done(result);
}

}  // namespace percore::shards
