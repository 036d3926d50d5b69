// store_client: what the document service needs of the stores — implemented by the shard that
// runs the service, so the service knows neither shards nor queues.
//
// Contract (the shard's thread, inside a round)
// - current(owner): the owner's published snapshot (any shard's; read-only, valid this round).
// - durable(owner): the owner's newest durable snapshot, which --replication sync may not show yet
//   (store/shard_store.hpp's two snapshots); what a follower copies. current(owner) by default.
// - submit(op): the write goes to the owner of its key (this shard's store, or over the mailbox);
//   its result comes back to the issuer its ticket names (write_ticket::from, server/shard.cpp).
// - own_documents(): this shard's own store's pool, on this shard's thread only.
#pragma once

#include <string_view>

#include "store/shard_store.hpp"
#include "store/snapshot.hpp"

namespace percore::shards {

class store_client {
public:
    virtual unsigned shard_count() const = 0;
    virtual unsigned self() const = 0;
    virtual unsigned owner_of(std::string_view key) const = 0;
    virtual const store::snapshot* current(unsigned owner) const = 0;
    virtual const store::snapshot* durable(unsigned owner) const { return current(owner); }
    virtual void submit(unsigned owner, store::write_op op) = 0;
    // This shard's store's document memory, for a document that store will keep (a write whose
    // owner is self()): made there at once, its batch need not copy it in (move_to_pool). Null
    // when there is none to offer (test stores): documents come from malloc.
    virtual store::document_pool* own_documents() { return nullptr; }

protected:
    ~store_client() = default;
};

}  // namespace percore::shards
