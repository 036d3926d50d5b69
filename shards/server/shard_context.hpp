// shard_context: what every shard of a server shares, handed to each shard by the server that
// owns it all (server.hpp) — so a shard reaches its peers without knowing the server type.
//
// Built on the main thread; `threads` and `mail` are set once every shard exists (the runtime
// group and the mailboxes are made from the shards' loops), before any shard runs. After that the
// context is read-only but for `drained`.
#pragma once

#include "shards/deliveries/delivery_schedule.hpp"
#include <atomic>
#include <vector>

#include "shards/apps/access.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/feed/feed_waits.hpp"
#include "shards/server/options.hpp"
#include "shards/runtime/group.hpp"
#include "shards/runtime/mailboxes.hpp"
#include "shards/base/server_view.hpp"
#include "shards/base/sync_acks.hpp"
#include "shards/server/shard_message.hpp"
#include "store/data_layout.hpp"
#include "store/epoch.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

struct shard_context {
    const server_options& options;
    const store::data_layout& layout;
    store::reader_epochs& epochs;
    const server_view& view;
    app_registry& apps;
    const auth_config& auth;
    unsigned shard_count = 0;
    std::vector<const store::shard_store*> stores;        // by shard
    runtime::group* threads = nullptr;
    runtime::mailboxes<shard_message>* mail = nullptr;
    std::atomic<unsigned> drained{0};                      // shards that finished their graceful drain
    feed_signal* feeds = nullptr;                          // which shards hold waiting change feeds
    delivery_timing deliveries_timing{};                   // SPEC §9's schedule (scaled only by tests)
    follower_status* follow = nullptr;                     // --follow: shard 0's copy reports here (follower.hpp)
    board_role* role = nullptr;                            // what the board is now (board_role.hpp)
    sync_acks* sync = nullptr;                             // --replication sync only (sync_acks.hpp)
    // --cluster (SPEC §12): the main thread asks for a handover at SIGTERM; shard 0's coordinator
    // says when it is done (cluster/coordinator.hpp).
    std::atomic<bool> handover_requested{false};
    std::atomic<bool> handed_over{false};

    void drained_one() {
        drained.fetch_add(1, std::memory_order_acq_rel);
        for (unsigned i = 0; i < shard_count; ++i) threads->loop_of(i).wake();
    }
    bool all_drained() const { return drained.load(std::memory_order_acquire) == shard_count; }
};

}  // namespace percore::shards
