// follower_slot: shard 0's place for the copy of a primary (SPEC §10, §12). It holds a follower
// (follower.hpp) while the board's role (base/board_role.hpp) says "follower", makes a new one when
// the leader's URL changes (the new primary is another data directory: its copy resyncs), and drops
// it when the board stops following — a promoted board, or one that fenced itself.
//
// Contract
// - One per server, on shard 0's thread, registered as issuer::follower's task; every entry point
//   on that thread, inside a round.
// - A follower is dropped only once none of its writes is in flight (follower::quiet()): its
//   begin_stop() first ends its exchange, then the slot waits for the writes it submitted; until
//   then the board's new role has no copy of the old primary running and no new one started.
// - With a token file (--cluster), the file is read when a follower is made; one that is missing or
//   holds the admin token makes no follower, and is read again every max_follow_retry.
//   settled() says when no follower runs and none is being dropped: the coordinator promotes the
//   board only then, so no write of the old copy lands after the board took its first write.
// - The led-epoch record (diverged_capture.hpp): record_led_epoch(E) writes "led epoch E" through
//   the store, with no follower running (the coordinator asks once settled()); it answers true once
//   that write is durable, and the coordinator makes the board primary of E only then. No follower
//   is made while the write is in flight. A follower made later reads the record and captures
//   what differs when it follows another epoch (follower.hpp).
// - The role is read at every step (an atomic load); without --cluster it never changes after the
//   start, so a --follow follower is made once and a primary never makes one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "shards/base/board_role.hpp"
#include "shards/follower/follower.hpp"

namespace percore::shards {

// What every follower of this board presents to its primary (SPEC §10 "The credential").
struct follow_credentials {
    std::string token;       // a replication token of the group (SPEC §7)
    std::string ca_pem;      // CA certificates for an https:// primary; empty: the system's
    // --cluster: the token's file, read again for every new follower (the group's first board
    // starts before any replication token exists: docs/deploy.md); empty: `token` as given.
    std::string token_file;
    std::string data_root;   // --data: where a returning primary's diverged tar goes (SPEC §12)
    std::string board;       // --cluster: this board's name, told to the primary (its sync set)
};

class follower_slot final : public shard_task {
public:
    follower_slot(store_client& stores, app_registry& apps, const server_view& server,
                  delivery_transports& transports, runtime::loop& loop, const board_role& role,
                  follow_credentials credentials, follower_status& status, bool auth_on);

    std::size_t step(time_point now) override;
    bool has_work(time_point now) const override;
    void begin_stop() override;
    void write_done(const store::write_result& result) override;

    // No follower runs and none is being dropped (any thread may not ask: shard 0's only).
    bool settled() const { return !current_; }
    // "Led epoch `epoch`" is durable in this board's store (see Contract). REQUIRES settled().
    [[nodiscard]] bool record_led_epoch(std::uint64_t epoch);

private:
    bool wants_change() const;
    // The token for a new follower: credentials_.token, or token_file's contents; false (logged once
    // per cause) when the file cannot give one yet.
    bool refresh_token();
    // Ends the current follower once it is quiet; true when none is left.
    bool retire();

    store_client& stores_;
    app_registry& apps_;
    const server_view& server_;
    delivery_transports& transports_;
    runtime::loop& loop_;
    const board_role& role_;
    follow_credentials credentials_;
    follower_status& status_;
    bool auth_on_;

    std::unique_ptr<follower> current_;
    std::uint64_t made_for_ = 0;  // the role's leader_changes() the current follower was made for
    bool retiring_ = false;
    std::int64_t token_retry_at_ns_ = 0;  // a token file that could not be read is read again then
    std::string token_failure_;           // its last failure, logged once
    bool stopping_ = false;
    std::uint64_t led_recorded_ = 0;    // the epoch the led-epoch record durably says (0: not known)
    std::uint64_t led_recording_ = 0;   // the epoch of the record's write in flight (0: none)
    std::uint32_t led_sequence_ = 0;
};

}  // namespace percore::shards
