#include "shards/cluster/coordinator.hpp"

#include <algorithm>

#include "shards/base/log_line.hpp"
#include "shards/cluster/limits.hpp"

namespace percore::shards {

namespace {

std::int64_t nanoseconds_at(runtime::clock_type::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

status_role status_of(board_kind kind) {
    switch (kind) {
    case board_kind::primary: return status_role::primary;
    case board_kind::follower: return status_role::follower;
    case board_kind::fenced: return status_role::fenced;
    }
    return status_role::fenced;
}

}  // namespace

coordinator::coordinator(runtime::loop& loop, runtime::poller& poller, cluster_config config, board_role& role,
                         follower_slot& copy, const follower_status& copy_status, const server_view& server,
                         std::atomic<bool>& handover_requested, std::atomic<bool>& handed_over)
    : config_(std::move(config)), role_(role), copy_(copy), copy_status_(copy_status), server_(server),
      handover_requested_(handover_requested), handed_over_flag_(handed_over),
      leader_key_(leader_key(config_.group)), status_key_(status_key(config_.group, config_.board)),
      leader_value_(encode_leader({config_.board, config_.advertise})),
      lease_client_(loop, poller, config_.endpoints), poll_client_(loop, poller, config_.endpoints),
      act_client_(loop, poller, config_.endpoints),
      leader_poll_(poll_client_, leader_key_, leader_poll_interval,
                   [this](const std::optional<etcd_kv>& kv) { leader_changed(kv); }),
      lease_ttl_(config_.ttl) {
    PERCORE_REQUIRES(!config_.endpoints.empty() && is_cluster_name(config_.group) && is_cluster_name(config_.board));
}

std::size_t coordinator::step(time_point now) {
    PERCORE_REQUIRES(on_shard_thread(0));
    lease_client_.tick();
    poll_client_.tick();
    act_client_.tick();
    if (stopping_ || handed_over_ || !server_.serving()) return 0;  // recovered stores first: a position to tell
    if (!handing_over_ && handover_requested_.load(std::memory_order_acquire)) begin_handover(now);
    renew(now);
    if (lease_ != 0 && !handing_over_) leader_poll_.tick();
    check_fence(now);
    if (handing_over_) handover(now);
    else act(now);
    return 0;
}

bool coordinator::has_work(time_point) const {
    PERCORE_REQUIRES(on_shard_thread(0));
    return false;  // timed: wake_by()
}

coordinator::time_point coordinator::wake_by() const {
    PERCORE_REQUIRES(on_shard_thread(0));
    time_point at = std::min({lease_client_.wake_by(), poll_client_.wake_by(), act_client_.wake_by(),
                              leader_poll_.wake_by()});
    if (lease_ != 0) at = std::min(at, renewed_sent_ + lease_ttl_ / renewals_per_ttl);
    // the statuses' timers too: without them a status (or, handing over, a read of the others')
    // waited for the next tick, up to 250 ms late (runtime/limits.hpp tick_interval)
    if (lease_ == 0 || stopping_ || handed_over_ || !server_.serving() || act_client_.busy()) return at;
    at = std::min(at, next_statuses_read_);
    if (handing_over_) return at;
    at = std::min(at, next_status_);
    if (position() != published_position_) at = std::min(at, last_status_ + status_interval_moving);
    if (config_.acks && led_epoch_ && role_.kind() == board_kind::primary) at = std::min(at, next_sync_publish_);
    return at;
}

void coordinator::begin_stop() {
    PERCORE_REQUIRES(on_shard_thread(0));
    stopping_ = true;
    lease_client_.stop();
    poll_client_.stop();
    act_client_.stop();
}

// --- the lease ----------------------------------------------------------------------------------

void coordinator::renew(time_point now) {
    PERCORE_REQUIRES(!stopping_);
    if (lease_client_.busy() || release_step_ >= release_stage::revoking) return;
    const time_point deadline = now + 2 * etcd_try_timeout;
    if (lease_ == 0) {
        lease_client_.grant(lease_ttl_.count(), deadline,
                            [this, now](result<lease_granted> granted) { lease_answered(now, std::move(granted)); });
        return;
    }
    if (now - renewed_sent_ < lease_ttl_ / renewals_per_ttl) return;
    lease_client_.keep_alive(lease_, deadline,
                             [this, now](result<lease_kept> kept) { renewal_answered(now, std::move(kept)); });
}

void coordinator::lease_answered(time_point sent, result<lease_granted> granted) {
    PERCORE_REQUIRES(on_shard_thread(0));
    if (!granted) {
        log_once("cluster: no lease from etcd: " + granted.error().reason);
        return;
    }
    lease_ = granted->id;
    lease_ttl_ = std::chrono::seconds(granted->ttl_seconds);
    renewed_sent_ = sent;
    log_once("cluster: board " + config_.board + " of group " + config_.group + " holds a lease of " +
             std::to_string(granted->ttl_seconds) + " s");
}

void coordinator::renewal_answered(time_point sent, result<lease_kept> kept) {
    PERCORE_REQUIRES(on_shard_thread(0));
    if (!kept) {
        log_once("cluster: the lease was not renewed: " + kept.error().reason);
        return;
    }
    if (kept->ttl_seconds <= 0) {  // expired or revoked: whatever it held is gone with it
        lease_ = 0;
        if (role_.kind() == board_kind::primary) role_.fence();
        log_once("cluster: etcd says the lease is gone; fenced until a new one is held");
        return;
    }
    renewed_sent_ = sent;
    if (role_.kind() == board_kind::primary) role_.extend(fence_deadline_ns());
    else if (holds_leader_key() && !handing_over_) promoting_ = true;  // fenced, and the lease outlived it
}

// The leader key, as last read, is this board's under its current lease: the board leads, whether
// or not it may acknowledge now. A fenced leader whose lease etcd renewed again (quorum back before
// the TTL ran out: etcd keeps leases across its own elections) takes writes again: no other board
// can have held the key meanwhile.
bool coordinator::holds_leader_key() const {
    PERCORE_REQUIRES(on_shard_thread(0));
    if (!leader_ || lease_ == 0 || leader_->lease != lease_) return false;
    auto value = decode_leader(leader_->value);
    return value && value->board == config_.board;
}

std::int64_t coordinator::fence_deadline_ns() const {
    PERCORE_REQUIRES(lease_ttl_ > fence_margin);
    return nanoseconds_at(renewed_sent_ + lease_ttl_ - fence_margin);
}

void coordinator::check_fence(time_point now) {
    PERCORE_REQUIRES(on_shard_thread(0));
    if (role_.kind() != board_kind::primary || handing_over_) return;
    if (lease_ != 0 && nanoseconds_at(now) < fence_deadline_ns()) return;
    role_.fence();  // the shards stopped acknowledging by themselves already (board_role.hpp)
    log_once("cluster: the lease was not renewed in time: fenced, writes are refused");
}

// --- the leader key -----------------------------------------------------------------------------

void coordinator::leader_changed(const std::optional<etcd_kv>& kv) {
    PERCORE_REQUIRES(on_shard_thread(0));
    leader_known_ = true;
    leader_ = kv;
    if (!kv) {
        if (role_.kind() == board_kind::primary) {
            role_.fence();
            log_once("cluster: the leader key is gone: fenced");
        }
        return;
    }
    auto value = decode_leader(kv->value);
    if (!value) {
        if (role_.kind() == board_kind::primary) role_.fence();
        log_once("cluster: the leader key holds no valid value; waiting for it to change");
        return;
    }
    const auto epoch = static_cast<std::uint64_t>(kv->create_revision);
    if (epoch != epoch_) primary_position_ = 0;
    epoch_ = epoch;
    if (value->board == config_.board) {
        if (lease_ != 0 && kv->lease == lease_) {
            promoting_ = role_.kind() != board_kind::primary;
            return;
        }
        if (role_.kind() == board_kind::primary) role_.fence();
        log_once("cluster: the leader key names this board under an earlier lease; waiting for it to expire");
        return;
    }
    promoting_ = false;
    led_epoch_ = false;
    if (role_.kind() != board_kind::follower || role_.leader_url() != value->url)
        log_once("cluster: following " + value->board + " at " + value->url + " (epoch " + std::to_string(epoch) + ")");
    role_.become_follower(epoch, value->url);
}

// What the board does with etcd next when it is not handing over: promote itself once its copy
// settled, race for an absent key, publish its status, read the others'.
void coordinator::act(time_point now) {
    PERCORE_REQUIRES(!handing_over_);
    if (promoting_) promote_when_settled();
    if (act_client_.busy()) return;
    if (leader_known_ && !leader_ && lease_ != 0 && may_take_over()) {
        race(now);
        return;
    }
    const bool moved = position() != published_position_;
    if (now >= next_status_ || (moved && now >= last_status_ + status_interval_moving)) {
        publish(now);
        return;
    }
    if (config_.acks && led_epoch_ && role_.kind() == board_kind::primary && now >= next_sync_publish_) {
        publish_sync_set(now);
        return;
    }
    if (now >= next_statuses_read_) read_statuses(now);
}

bool coordinator::may_take_over() const {
    PERCORE_REQUIRES(on_shard_thread(0));
    if (stopping_ || handing_over_ || !server_.serving()) return false;
    const std::uint64_t mine = position();
    const bool sync_known = config_.acks && sync_set_ && sync_set_->epoch == epoch_ && !sync_set_->boards.empty();
    if (sync_known) {
        if (!std::binary_search(sync_set_->boards.begin(), sync_set_->boards.end(), config_.board)) return false;
    } else if (primary_position_ > mine && primary_position_ - mine > max_takeover_lag) {
        return false;
    }
    for (const auto& [board, s] : others_)
        if (s.epoch == epoch_ && s.role != status_role::primary && s.position > mine) return false;
    return true;
}

void coordinator::race(time_point now) {
    PERCORE_REQUIRES(lease_ != 0 && !act_client_.busy());
    act_client_.create_if_absent(leader_key_, leader_value_, lease_, now + 2 * etcd_try_timeout,
                                 [this](result<create_answer> answer) { raced(std::move(answer)); });
}

void coordinator::raced(result<create_answer> answer) {
    PERCORE_REQUIRES(on_shard_thread(0));
    if (!answer) {
        log_once("cluster: the race for the leader key failed: " + answer.error().reason);
        return;
    }
    if (!answer->succeeded) {
        leader_changed(answer->current);  // another board was quicker
        return;
    }
    leader_known_ = true;
    leader_ = answer->current;
    epoch_ = static_cast<std::uint64_t>(answer->current.create_revision);
    promoting_ = true;
    promote_when_settled();
}

// The board won the key: its copy of the old primary stops first (follower_slot), then it takes writes.
void coordinator::promote_when_settled() {
    PERCORE_REQUIRES(promoting_);
    if (role_.kind() == board_kind::follower) role_.fence();
    if (!copy_.settled()) return;
    if (!copy_.record_led_epoch(epoch_)) return;  // durable before the first write is taken
    promoting_ = false;
    led_epoch_ = true;
    role_.become_primary(epoch_, fence_deadline_ns());
    log_once("cluster: primary of group " + config_.group + " at epoch " + std::to_string(epoch_));
}

// --- statuses ------------------------------------------------------------------------------------

std::uint64_t coordinator::head_position() const {
    PERCORE_REQUIRES(on_shard_thread(0));
    std::uint64_t sum = 0;
    for (unsigned s = 0; s < server_.shard_count(); ++s)
        if (const store::snapshot* snap = server_.snapshot_of(s)) sum += snap->high_version();
    return sum;
}

std::uint64_t coordinator::position() const {
    PERCORE_REQUIRES(on_shard_thread(0));
    return led_epoch_ ? head_position() : copy_status_.position.load(std::memory_order_relaxed);
}

void coordinator::publish(time_point now) {
    PERCORE_REQUIRES(!act_client_.busy());
    if (lease_ == 0) return;
    board_status s{epoch_, position(), status_of(role_.kind()), config_.advertise};
    published_position_ = s.position;
    last_status_ = now;
    next_status_ = now + status_interval;
    act_client_.put(status_key_, encode_status(s), lease_, now + 2 * etcd_try_timeout, [this](result<write_answer> r) {
        if (!r) log_once("cluster: the status was not published: " + r.error().reason);
    });
}

void coordinator::read_statuses(time_point now) {
    PERCORE_REQUIRES(!act_client_.busy());
    next_statuses_read_ = now + (handing_over_ ? handover_poll_interval : status_interval);
    act_client_.range_prefix(group_prefix(config_.group), now + 2 * etcd_try_timeout,
                             [this](result<range_answer> answer) { statuses_read(std::move(answer)); });
}

void coordinator::statuses_read(result<range_answer> answer) {
    PERCORE_REQUIRES(on_shard_thread(0));
    if (!answer) return;  // read again at the next interval; the client logged its state
    const std::string prefix = status_prefix(config_.group);
    const std::optional<leader_value> leader = leader_ ? decode_leader(leader_->value) : std::nullopt;
    others_.clear();
    for (const etcd_kv& kv : answer->kvs) take_record(prefix, kv, leader);
}

// One key of the group's range: a board's status, or the sync set (kept while its lease lives, and
// after: the last one read is what the board knows of the epoch that ended).
void coordinator::take_record(const std::string& prefix, const etcd_kv& kv, const std::optional<leader_value>& leader) {
    PERCORE_REQUIRES(on_shard_thread(0));
    if (kv.key == sync_key(config_.group)) {
        if (auto set = decode_sync_set(kv.value)) sync_set_ = std::move(*set);
        return;
    }
    if (!kv.key.starts_with(prefix)) return;
    std::string board = kv.key.substr(prefix.size());
    auto s = decode_status(kv.value);
    if (!s || !is_cluster_name(board) || board == config_.board) return;
    if (leader && leader->board == board && s->epoch == epoch_ && s->role == status_role::primary)
        primary_position_ = s->position;
    others_.emplace(std::move(board), std::move(*s));
}

// Sync mode, on the primary: the boards that acknowledged within --sync-timeout (sync_acks.hpp).
void coordinator::publish_sync_set(time_point now) {
    PERCORE_REQUIRES(config_.acks != nullptr && !act_client_.busy());
    next_sync_publish_ = now + status_interval;
    const auto since = now - config_.sync_timeout;
    sync_set set{epoch_, config_.acks->boards_since(nanoseconds_at(since))};
    act_client_.put(sync_key(config_.group), encode_sync_set(set), lease_, now + 2 * etcd_try_timeout,
                    [this](result<write_answer> r) {
                        if (!r) log_once("cluster: the sync set was not published: " + r.error().reason);
                    });
}

// --- handover ------------------------------------------------------------------------------------

void coordinator::begin_handover(time_point now) {
    PERCORE_REQUIRES(!handing_over_);
    handing_over_ = true;
    promoting_ = false;
    handover_until_ = now + handover_wait;
    if (role_.kind() == board_kind::primary) {
        role_.fence();
        log_line("cluster: handing over: writes refused, waiting for a follower to copy the last of them");
    } else {
        led_epoch_ = false;
    }
}

void coordinator::handover(time_point now) {
    PERCORE_REQUIRES(handing_over_);
    if (release_step_ != release_stage::none) {
        release(now);
        return;
    }
    bool caught_up = !led_epoch_;
    const std::uint64_t head = head_position();
    for (const auto& [board, s] : others_)
        if (s.epoch == epoch_ && s.position >= head) caught_up = true;
    if (caught_up || now >= handover_until_) {
        if (!caught_up) log_line("cluster: no follower caught up within the handover's wait; releasing anyway");
        release_step_ = led_epoch_ ? release_stage::deleting : release_stage::revoking;
        release(now);
        return;
    }
    if (!act_client_.busy() && now >= next_statuses_read_) read_statuses(now);
}

// Deletes the leader key (only this epoch's) so the followers race at once, then revokes the
// lease; each step waits for its client.
void coordinator::release(time_point now) {
    PERCORE_REQUIRES(release_step_ != release_stage::none);
    const time_point deadline = now + etcd_try_timeout;
    if (release_step_ == release_stage::deleting && !act_client_.busy()) {
        release_step_ = release_stage::deleting_sent;
        act_client_.delete_if_created(leader_key_, static_cast<std::int64_t>(epoch_), deadline,
                                      [this](result<delete_answer>) { release_step_ = release_stage::revoking; });
    } else if (release_step_ == release_stage::revoking && !lease_client_.busy()) {
        release_step_ = release_stage::revoking_sent;
        if (lease_ == 0) return finish_handover();
        lease_client_.revoke(lease_, deadline, [this](result<write_answer>) { finish_handover(); });
    }
}

void coordinator::finish_handover() {
    PERCORE_REQUIRES(handing_over_);
    lease_ = 0;
    handed_over_ = true;
    handed_over_flag_.store(true, std::memory_order_release);
    log_line("cluster: handed over: the leader key and the lease are released");
}

void coordinator::log_once(std::string line) {
    if (line == logged_) return;
    log_line(line);
    logged_ = std::move(line);
}

}  // namespace percore::shards
