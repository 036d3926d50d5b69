// coordinator: this board's part in its replica group's leadership (SPEC §12) — its lease in etcd,
// the race for the leader key, the fence, the switch between primary and follower, the status it
// publishes, and the handover at a planned stop. etcd decides; the coordinator only asks it
// (etcd_client.hpp) and turns its answers into the board's role (base/board_role.hpp), which
// every shard reads on every write.
//
// Contract
// - One per --cluster server, on shard 0's thread, registered as a shard task (it writes nothing
//   to the stores). Every entry point on that thread, inside a round.
// - Lease: granted at the start (--cluster-ttl), renewed every third of it. After each renewal
//   (and the grant) the primary may acknowledge until sent + TTL − fence_margin, `sent` being when
//   the successful request was sent: etcd counts the TTL from when it received it, later. When no
//   renewal succeeds in time, the deadline passes by itself on every shard (board_role.hpp); the
//   coordinator then fences the role too. A lease etcd says is gone is granted anew; a fenced
//   leader whose lease is renewed again (etcd's quorum came back within the TTL) leads again.
// - Leader key: read every leader_poll_interval. Held by another board: the board follows that
//   board's URL (follower_slot.hpp makes the copy), at that key's epoch (its create revision).
//   Held under this board's own lease: it is the primary. Absent: the board races for it (a
//   transaction that creates it only when absent) if it may take over (below); a board whose
//   name is on a key under another lease (its own previous run) waits for that lease to end.
// - Taking over: only with a lease, not stopping, with the copy within max_takeover_lag of the
//   last position the old primary published, and no other board of that epoch further ahead. The
//   board becomes primary only once its copy of the old primary has stopped (follower_slot
//   settled()): no write of the old copy lands after the board's first acknowledged write; and
//   only once "led epoch E" is durable in its store (follower_slot record_led_epoch): a board that
//   comes back after leading knows it, and keeps what it acknowledged that the next primary lacks
//   (SPEC §12 "A returning primary", follower.hpp).
// - Status: /percore/{group}/status/{board} every status_interval (sooner when the position
//   moved), under the lease; the others' statuses are read as often.
// - Handover (begin_handover(): SIGTERM): a primary fences at once, waits at most handover_wait
//   for a follower to publish its position at the primary's head, then deletes the leader key
//   (only its own: by create revision) and revokes its lease; a follower revokes its lease.
//   handed_over() says when it is done (or could not be: the lease then simply expires).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shards/base/board_role.hpp"
#include "shards/base/server_view.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/base/sync_acks.hpp"
#include "shards/cluster/cluster_records.hpp"
#include "shards/cluster/etcd_client.hpp"
#include "shards/cluster/etcd_key_poll.hpp"
#include "shards/follower/follower_slot.hpp"

namespace percore::shards {

struct cluster_config {
    std::vector<etcd_endpoint> endpoints;
    std::string group;
    std::string board;
    std::string advertise;  // this board's base URL
    std::chrono::seconds ttl{6};
    // --replication sync: the primary publishes the boards that acknowledged within sync_timeout
    // (from `acks`), and only those may take over. Null: async.
    sync_acks* acks = nullptr;
    std::chrono::milliseconds sync_timeout{2000};
};

class coordinator final : public shard_task {
public:
    // `handover_requested` is set by the main thread at SIGTERM; `handed_over` is set here when
    // the handover is done (both outlive this).
    coordinator(runtime::loop& loop, runtime::poller& poller, cluster_config config, board_role& role,
                follower_slot& copy, const follower_status& copy_status, const server_view& server,
                std::atomic<bool>& handover_requested, std::atomic<bool>& handed_over);

    std::size_t step(time_point now) override;
    bool has_work(time_point now) const override;
    time_point wake_by() const override;
    bool timed() const override { return true; }
    void begin_stop() override;

    bool handed_over() const { return handed_over_; }

private:
    enum class release_stage : std::uint8_t { none, deleting, deleting_sent, revoking, revoking_sent };
    // A planned stop (SIGTERM) begins: see Contract.
    void begin_handover(time_point now);
    void finish_handover();
    void renew(time_point now);
    void lease_answered(time_point sent, result<lease_granted> granted);
    void renewal_answered(time_point sent, result<lease_kept> kept);
    void leader_changed(const std::optional<etcd_kv>& kv);
    void check_fence(time_point now);
    void act(time_point now);
    void race(time_point now);
    void raced(result<create_answer> answer);
    void publish(time_point now);
    void read_statuses(time_point now);
    void publish_sync_set(time_point now);
    void take_record(const std::string& prefix, const etcd_kv& kv, const std::optional<leader_value>& leader);
    void statuses_read(result<range_answer> answer);
    void handover(time_point now);
    void release(time_point now);
    bool may_take_over() const;
    bool holds_leader_key() const;
    void promote_when_settled();
    std::uint64_t head_position() const;
    std::uint64_t position() const;
    std::int64_t fence_deadline_ns() const;
    void log_once(std::string line);

    cluster_config config_;
    board_role& role_;
    follower_slot& copy_;   // its copy; and the led-epoch record's writer (follower_slot.hpp)
    const follower_status& copy_status_;
    const server_view& server_;
    std::atomic<bool>& handover_requested_;
    std::atomic<bool>& handed_over_flag_;
    const std::string leader_key_;
    const std::string status_key_;
    const std::string leader_value_;

    etcd_client lease_client_;   // grant, renewals, revoke: never behind another call
    etcd_client poll_client_;    // the leader key's poll
    etcd_client act_client_;     // the race, statuses, the release
    etcd_key_poll leader_poll_;

    std::chrono::seconds lease_ttl_;        // as etcd granted it
    std::int64_t lease_ = 0;                // 0: none held
    time_point renewed_sent_{};             // when the last successful grant or renewal was sent
    std::optional<etcd_kv> leader_;         // the key as last read (nullopt: absent or unknown)
    bool leader_known_ = false;
    std::uint64_t epoch_ = 0;               // of the leader this board follows or is
    bool promoting_ = false;                // won the race; primary once the copy settled
    bool led_epoch_ = false;                // this board was the primary of epoch_
    std::map<std::string, board_status> others_;   // the other boards' statuses, as last read
    std::uint64_t primary_position_ = 0;    // the last position the epoch's primary published
    std::optional<sync_set> sync_set_;       // the last sync set read (sync mode)
    time_point next_sync_publish_{};
    std::uint64_t published_position_ = 0;
    time_point next_status_{};
    time_point last_status_{};
    time_point next_statuses_read_{};
    release_stage release_step_ = release_stage::none;
    bool handing_over_ = false;
    bool handed_over_ = false;
    bool stopping_ = false;
    time_point handover_until_{};
    std::string logged_;                    // the last state line (one line per change)
};

}  // namespace percore::shards
