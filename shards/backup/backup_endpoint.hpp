// backup_endpoint: GET /_backup (SPEC §11; base/endpoint.hpp) — a tar of the data directory,
// streamed by the shard's backup_streams (backup_stream.hpp) once every shard's capture is in.
// Server admin only: access control refuses anyone else before this is called (access.hpp).
//
// Contract
// - One per shard, owned by that shard's document service, on that shard's thread inside a round;
//   it starts backups in the shard's backup_streams (which it does not own).
// - GET (HEAD: the head only) is pending, answered by the stream; another method is 405, a server
//   that cannot stream backups (in-process tests: nothing attached) 501, and one already streaming
//   as many as it may 503.
// - Submits no writes.
#pragma once

#include "shards/backup/backup_stream.hpp"
#include "shards/base/endpoint.hpp"

namespace percore::shards {

class backup_endpoint final : public endpoint {
public:
    backup_endpoint(backup_streams& backups, unsigned self) : backups_(backups), self_(self) {}

    // REQUIRES: on this shard's thread; r.kind is backup.
    result handle(net::request& req, net::response& res, const net::route& r, const principal& who,
                  net::answer_ticket ticket) override;

private:
    backup_streams& backups_;
    const unsigned self_;
};

}  // namespace percore::shards
