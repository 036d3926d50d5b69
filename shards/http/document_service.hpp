// document_service: percore's HTTP API (SPEC §2, §5) on one shard — net's request_handler as
// admission, then a route table that hands each request to the endpoint of its route's kind
// (base/endpoint.hpp), each endpoint living with its capability:
//
//   target_kind                          endpoint             in
//   document, list                       documents_endpoint   http/documents_endpoint.hpp
//   changes, replication                 changes_endpoint     feed/changes_endpoint.hpp
//   apps, app, app_tokens, app_token     apps_admin           apps/apps_admin.hpp
//   app_deliveries, app_delivery         deliveries_admin     deliveries/deliveries_admin.hpp
//   backup                               backup_endpoint      backup/backup_endpoint.hpp
//   health, metrics, stats               admin_pages          http/admin_pages.hpp
//   not_found, bad, asterisk             route_answers        here: 404, 400, OPTIONS *
//
// Contract
// - One per shard, called by that shard's connection_pool on the shard's thread, inside a round.
// - admit() is admission_control's (apps/admission.hpp: a follower's 421, the token, its reach,
//   the app's quotas), before any byte of the body is read; the route it parsed is reused by
//   handle() when nothing was parsed in between.
// - handle() dispatches by the route's kind, with the principal access control found. An endpoint
//   that submitted a write for the connection returns pending and is noted for it; write_done()
//   (the shard calls it for every write of write_ticket issuer::connection) gives the result to
//   that endpoint, whose answer the shard completes the ticket with (null: none yet).
// - It owns what the endpoints work on: access control, the change feed and the feeds that wait,
//   backups, the erasure of deleted apps. The shard runs the tasks among them (waits(), backups(),
//   erasures(): base/shard_task.hpp) and attaches its answer sink to them (attach()).
// - closed(): a connection's waits, backups, cached token and app binding are dropped.
#pragma once

#include <optional>
#include <string_view>

#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/apps/access.hpp"
#include "shards/apps/admission.hpp"
#include "shards/apps/app_erasures.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/apps/apps_admin.hpp"
#include "shards/backup/backup_endpoint.hpp"
#include "shards/backup/backup_stream.hpp"
#include "shards/base/endpoint.hpp"
#include "shards/base/store_client.hpp"
#include "shards/base/sync_acks.hpp"
#include "shards/base/sync_holds.hpp"
#include "shards/deliveries/deliveries_admin.hpp"
#include "shards/feed/change_feed.hpp"
#include "shards/feed/changes_endpoint.hpp"
#include "shards/feed/feed_waits.hpp"
#include "shards/http/admin_pages.hpp"
#include "shards/http/documents_endpoint.hpp"
#include "store/snapshot.hpp"

namespace percore::shards {

struct shard_metrics;

class document_service final : public net::request_handler {
public:
    // `deliveries_allow` (--deliveries-allow, SPEC §9) outlives the service.
    document_service(store_client& stores, const server_view& server, shard_metrics& metrics, app_registry& apps,
                     const auth_config& auth, const net::cidr_list& deliveries_allow);

    net::admission admit(const net::request_head& head, net::response& res, net::answer_ticket ticket) override;
    result handle(net::request& req, net::response& res, net::answer_ticket ticket) override;
    void answered(net::method verb, int status, std::uint64_t latency_ns) override;
    void closed(net::answer_ticket ticket) override;

    // A write a connection's request submitted (write_ticket issuer::connection) was settled: its
    // answer, from the endpoint that submitted it (none: written again, answered later).
    // REQUIRES: that connection's request is pending on a write here.
    // A success is answered only while the board may acknowledge (board_role.hpp: a write applied
    // after the lease was lost is answered 503, never acknowledged; SPEC §12 "Fencing").
    // A write --replication sync held past its timeout (no_sync_follower(), sync_holds.hpp) is
    // answered 503 {"error":"no synchronous follower"} (SPEC §12); its endpoint saw it unavailable.
    std::optional<net::simple_answer> write_done(const store::write_result& result) {
        std::optional<net::simple_answer> answer = endpoints_.write_done(result);
        if (answer && no_sync_follower(result)) answer = net::simple_answer{503, false, 0, "no synchronous follower"};
        if (answer && role_ && answer->status < 300 && !role_->may_acknowledge_now())
            answer = net::simple_answer{503, false, 0, "not a primary now"};
        return answer;
    }
    // --replication sync: the follower page requests this shard serves acknowledge (sync_acks.hpp).
    // REQUIRES: before the shards run; `acks` outlives this.
    void set_sync_acks(sync_acks* acks) { changes_.set_sync_acks(acks); }

    // The shard attaches the answers' sink (its pool), the server's feed signal and the backups'
    // captures (without them, in-process tests, feeds do not wait and backups are refused).
    // REQUIRES: sink is not null; before the shards run (on no shard's thread).
    void attach(net::answer_sink* sink, feed_signal* signal, backup_captures* captures, backup_source source);
    // The board's role (board_role.hpp: a follower's 421, a fenced board's 503), which outlives
    // this; before the shards run. Without it the board is a primary that never fences.
    void set_role(const board_role& role) {
        role_ = &role;
        admission_.set_role(role);
        feed_.set_role(role);
    }

    // The tasks this service's capabilities run in the shard's rounds (base/shard_task.hpp): the
    // change feeds that wait (SPEC §8), backups (SPEC §11), the erasure of deleted apps (SPEC §7).
    feed_waits& waits() { return waits_; }
    backup_streams& backups() { return backups_; }
    app_erasures& erasures() { return erasures_; }
    // At start, with this shard's recovered snapshot (the registry's apps, quotas, erasures).
    void recovered(const store::snapshot& snap, bool auth_on) { apps_admin_.recovered(snap, auth_on); }

    // The endpoint the route table gives `kind` (the table above).
    endpoint& endpoint_of(net::target_kind kind) const { return endpoints_.at(kind); }

private:
    // not_found (404), bad (400 with the route's reason) and asterisk (OPTIONS *: 204 with every
    // method some target allows): answered from the route alone.
    class route_answers final : public endpoint {
    public:
        // REQUIRES: r.kind is not_found, bad or asterisk.
        result handle(net::request& req, net::response& res, const net::route& r, const principal& who,
                      net::answer_ticket ticket) override;
    };
    struct parsed_route {
        bool valid = false;
        net::answer_ticket ticket;
        const char* target = nullptr;
        std::size_t size = 0;
        net::route r;
    };
    // Valid until the next call.
    const net::route& route_of(const net::request_head& head, net::answer_ticket ticket, bool admitting);
    void fill_endpoints();

    shard_metrics& metrics_;
    access_control access_;
    admission_control admission_;
    const board_role* role_ = nullptr;  // set_role(); null: a primary that never fences
    app_erasures erasures_;
    change_feed feed_;
    feed_waits waits_;
    backup_streams backups_;
    documents_endpoint documents_;
    changes_endpoint changes_;
    apps_admin apps_admin_;
    deliveries_admin deliveries_;  // reads feed_ (a delivery's since and lag)
    backup_endpoint backup_;
    admin_pages admin_;
    route_answers route_answers_;
    endpoint_table endpoints_;     // by target_kind, filled once by the constructor
    net::route_scratch scratch_;
    parsed_route parsed_;          // the last route parsed into scratch_
};

}  // namespace percore::shards
