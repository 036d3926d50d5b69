#include "shards/backup/backup_endpoint.hpp"

#include "shards/base/shard_task.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

net::request_handler::result backup_endpoint::handle(net::request& req, net::response& res, const net::route& r,
                                                     const principal&, net::answer_ticket ticket) {
    PERCORE_REQUIRES(on_shard_thread(self_));
    PERCORE_REQUIRES(r.kind == net::target_kind::backup);
    const net::method verb = req.head.verb;
    if (verb != net::method::get && verb != net::method::head) {
        res.error(405, "method not allowed", "GET, HEAD");
        return result::answered;
    }
    if (!backups_.can_back_up()) {
        res.error(501, "this server cannot stream backups");
        return result::answered;
    }
    if (backups_.full()) {
        res.error(503, "too many backups at once");
        return result::answered;
    }
    backups_.begin(ticket, verb == net::method::head);
    return result::pending;
}

}  // namespace percore::shards
