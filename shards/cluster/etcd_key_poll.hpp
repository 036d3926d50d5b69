// etcd_key_poll: learns that a key in etcd changed (created, changed, deleted, re-created) by
// reading it every `interval`, the caller's choice — for the coordinator's "the leader key
// disappeared" (SPEC §12: takeover). Not /v3/watch: the gateway answers a watch as a chunked body
// that never ends, and net::client_connection hands over a response only once it is whole
// (docs/decisions.md, "etcd: polling, not watching").
//
// Contract
// - On the client's loop thread. It owns no connection: it uses an etcd_client of its own (the
//   client runs one call at a time; one shared with lease renewals would delay them). The owner
//   calls tick() every loop tick (or by wake_by()); a read starts when the interval since the last
//   one started has passed and the client is idle, with the interval as its deadline.
// - on_change(kv) runs (from the client's done, on the loop thread) after the first answer and
//   after every answer whose key differs from the last one reported: present or absent, or another
//   create or mod revision. nullopt: the key does not exist. An answer at a revision below one
//   already seen (an endpoint behind the others) is ignored, never reported as a change back.
// - A change between two reads that is undone before the second (deleted and re-created) shows as
//   another create revision; one that is undone completely (a value changed and changed back) shows
//   as another mod revision. Changes are seen within one interval plus the read's time.
// - Failed reads are counted (failed_polls()); the client logs its state changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "shards/cluster/etcd_client.hpp"

namespace percore::shards {

class etcd_key_poll {
public:
    using changed = std::function<void(const std::optional<etcd_kv>& kv)>;

    // REQUIRES: a key of 1..max_etcd_key_bytes, an interval > 0, on_change callable.
    etcd_key_poll(etcd_client& client, std::string key, std::chrono::milliseconds interval, changed on_change);

    void tick();
    etcd_client::time_point wake_by() const;

    bool known() const { return known_; }                       // an answer came
    const std::optional<etcd_kv>& current() const { return current_; }
    std::uint64_t polls() const { return polls_; }
    std::uint64_t failed_polls() const { return failed_polls_; }

private:
    void answered(result<range_answer> answer);

    etcd_client& client_;
    std::string key_;
    std::chrono::milliseconds interval_;
    changed on_change_;
    etcd_client::time_point next_{};              // when the next read may start
    bool known_ = false;
    std::optional<etcd_kv> current_;
    std::int64_t seen_revision_ = 0;              // the highest answer revision taken
    std::uint64_t polls_ = 0;
    std::uint64_t failed_polls_ = 0;
};

}  // namespace percore::shards
