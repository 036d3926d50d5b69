// app_erasures: the background erasure of deleted apps (SPEC §7) on one shard — a task of the
// shard (base/shard_task.hpp, issuer::app_erasure).
//
// Contract
// - One per shard, on that shard's thread, inside rounds. begin(app) comes from apps_admin when an
//   app's "deleted" record is durable (DELETE /_apps/{app}), or at start for a deletion to resume.
// - An erasure removes, a bounded number of writes in flight at a time (max_erase_writes_in_flight),
//   the app's token records, its delivery records, its documents, its app record and last the
//   "deleted" record; then the app's entry is absent and its name may be created again. Erasures
//   are conditional on the version seen, so a write that raced them is never lost silently: it is
//   erased on the next pass. Nothing runs before every shard recovered (server_view::serving).
// - Not run on a follower: the primary's erasures arrive there as changes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shards/apps/app_registry.hpp"
#include "shards/base/server_view.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/base/store_client.hpp"
#include "store/snapshot.hpp"

namespace percore::shards {

// Erasing a deleted app: writes in flight at once per shard (a batch's worth; the erasure must
// never crowd the shard's own clients out of its batches).
inline constexpr std::size_t max_erase_writes_in_flight = 64;

class app_erasures final : public shard_task {
public:
    app_erasures(store_client& stores, const server_view& server);

    // REQUIRES: app is deleting (its "deleted" record is durable).
    void begin(app_entry* app);

    // shard_task (issuer::app_erasure): a bounded step of every erasure; the writes it sent.
    std::size_t step(time_point now) override;
    bool has_work(time_point now) const override;
    void begin_stop() override;
    void write_done(const store::write_result& result) override;

private:
    // The phases of an erasure, in order; past the last it is done.
    enum erase_phase : int { erase_tokens, erase_deliveries, erase_documents, erase_app_record, erase_deleted_record };
    struct erasure {
        explicit erasure(app_entry* a) : app(a) {}
        app_entry* app = nullptr;
        int phase = erase_tokens;
        std::string after;       // the scan's position (a store key)
        bool after_set = false;
        std::size_t in_flight = 0;
        bool rescan = false;     // an erase lost its precondition: scan the phase again
        bool sent_in_pass = false;
    };

    bool erase_step(erasure& e);
    bool next_key(std::string_view prefix, erasure& e, std::string& key, std::uint64_t& version, bool tokens_of_app);
    void send_erase(erasure& e, const std::string& key, std::uint64_t version);

    store_client& stores_;
    const server_view& server_;
    std::vector<erasure> erasing_;
    std::vector<std::pair<std::uint64_t, app_entry*>> erase_tags_;  // background writes in flight
    std::uint32_t erase_sequence_ = 0;
    std::vector<store::snapshot::cursor> cursors_;
    bool stopped_ = false;
};

}  // namespace percore::shards
