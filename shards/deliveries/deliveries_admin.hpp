// deliveries_admin: the administration of an app's deliveries (SPEC §9's table) on one shard —
// PUT, GET and DELETE /_apps/{app}/deliveries/{name} and GET /_apps/{app}/deliveries/, as catalog
// writes (catalog.hpp, delivery_record.hpp) sent to their owners like document writes.
//
// Contract
// - One per shard, on that shard's thread, inside a round; the endpoint (base/endpoint.hpp) of the
//   deliveries routes (target_kind app_deliveries, app_delivery): handle() after access control
//   allowed them (an app's admin token or the server's: access.hpp), and write_done() for the
//   result of each write it sent for a connection (routed by the route table; no answer: an update
//   written again, answered when that write is done).
// - PUT creates (201 {"name","signing_secret","seal_key"?}: the secrets are shown this once,
//   seal_key only with seal) or updates (204: url, prefix, seal and ca_pem change; the secrets and
//   the cursor are kept; the state is reset to active with attempts 0 and last_error null). `since`
//   ("now" by default, "0" or a feed cursor) is checked with the change feed (400 / 410 as the feed
//   answers) and sets the cursor at creation only. ca_pem (https only, at most 64 KiB of PEM text)
//   is parsed at PUT (crypto::ca_certificates_pem): 400 when it holds no usable certificate or its
//   certificates take more than max_delivery_ca_stored_bytes; the record keeps them alone, as PEM.
//   A body with ca_file is 400 (review M5: no file named by a tenant is read); an update drops
//   the ca_file of a record written before ca_pem. A token with a prefix may only make deliveries
//   within it (403). A url whose host is an
//   IP literal that net::allowed() refuses (SPEC §9, --deliveries-allow) is 400 "address not
//   allowed"; a name is checked by the engine on each resolution (delivery_engine.hpp).
// - An app's admin token with a prefix manages only deliveries whose prefix lies within its own
//   (SPEC §7, manages() in access.hpp): GET, PUT and DELETE of another are 403 (after 404 for
//   one that does not exist), and the listing names only those within it.
// - An update that changes url, prefix, seal or the CA clears the batch in flight (batch_id): the
//   engine builds the next batch from the cursor for the new target and prefix, never sending one
//   built for the old ones to the new receiver (review M4).
// - Per app at most max_app_deliveries (limits.hpp): creating one more is 507
//   {"error":"limit: deliveries"}; the place is reserved in the app's entry before the record is
//   written (app_entry::reserve) and released when that write fails or the delivery is deleted.
// - Every change is answered only once its catalog write is durable; a write that lost its
//   precondition to a concurrent one is 409 (nothing is overwritten unseen) — but an update is
//   first applied again on the newer record, up to max_delivery_update_retries times (limits.hpp):
//   the sending engine changes a record's state and cursor, never what a PUT sets.
// - GET answers {"url","state","cursor","lag":{"changes","seconds"},"attempts","last_status",
//   "last_error"}: never a secret. lag.changes is counted by paging the feed from the cursor, at
//   most max_delivery_lag_changes; lag.seconds is the time since the cursor last moved while
//   changes wait after it, else 0 (docs/decisions.md).
// - A deleted app's delivery records are erased by apps_admin with its tokens.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "shards/base/result.hpp"
#include "net/address_policy.hpp"
#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/apps/access.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/feed/change_feed.hpp"
#include "shards/deliveries/delivery_record.hpp"
#include "shards/base/endpoint.hpp"
#include "shards/base/store_client.hpp"

namespace percore::shards {

// The body of a PUT, checked (pure: ca_pem's certificates are the admin's to check, with the crypto
// module). A ca_file is refused: the server reads no file a tenant names (SPEC §9).
struct delivery_request {
    std::string url;
    delivery_url parsed;
    std::string prefix;
    bool seal = false;
    std::string ca_pem;  // PEM text as given (at most max_delivery_ca_pem_bytes); https only
    std::string since = "now";
};

result<delivery_request> parse_delivery_request(std::string_view body);

class deliveries_admin final : public endpoint {
public:
    // `allow` (--deliveries-allow) outlives the endpoint.
    deliveries_admin(store_client& stores, app_registry& apps, change_feed& feed, const net::cidr_list& allow);

    // REQUIRES: on this shard's thread; r.kind is app_deliveries or app_delivery.
    result handle(net::request& req, net::response& res, const net::route& r, const principal& who,
                  net::answer_ticket ticket) override;
    bool submits_writes() const override { return true; }
    bool holds(std::uint64_t tag) const override;
    // A delivery record's write this shard sent for a connection: its answer, or none when it was
    // written again (answered later). REQUIRES: on this shard's thread; the write is one of this
    // endpoint's.
    std::optional<net::simple_answer> write_done(const store::write_result& result) override;

private:
    enum class op_kind : std::uint8_t { create, update, erase };
    struct pending_op {
        std::uint64_t tag = 0;
        op_kind kind = op_kind::create;
        std::string name;
        std::string signing_secret;  // create: shown once, then wiped
        std::string seal_key_hex;    // create with seal: shown once, then wiped
        // update: what to apply again when the record changed meanwhile
        std::string app;
        std::string by;  // who asked (acting_as), for the change's log line
        delivery_request request;
        std::string reach;        // update: the principal's prefix (manages(), applied again on retry)
        app_entry* entry = nullptr;  // create: the app whose place it reserved (released on failure)
        net::answer_ticket ticket{};
        int retries = 0;
    };

    void list(net::response& res, const net::route& r, const principal& who);
    void show(net::response& res, const net::route& r, const principal& who);
    net::request_handler::result put(net::request& req, net::response& res, const net::route& r, const principal& who,
                                     net::answer_ticket ticket);
    net::request_handler::result create(delivery_request& req, net::response& res, const net::route& r,
                                        const principal& who, net::answer_ticket ticket);
    net::request_handler::result update(delivery_request& req, const store::document& doc, net::response& res,
                                        const net::route& r, const principal& who, net::answer_ticket ticket);
    net::request_handler::result erase(net::response& res, const net::route& r, const principal& who,
                                       net::answer_ticket ticket);
    // The record's document in its owner's current snapshot (null: none).
    const store::document* find(std::string_view app, std::string_view name);
    bool refuse_since(net::response& res, std::string_view since, feed_cursor* out);
    void submit(std::string key, std::string value, store::precondition pre, pending_op op, net::answer_ticket ticket);
    std::optional<net::simple_answer> finish(pending_op& op, const store::write_result& result);
    // The record `doc` with the update `req` applied; or the status and reason that refuse it (403
    // when the record's prefix is not within `reach`, the updating principal's prefix).
    shards::result<std::string> updated_record(const delivery_request& req, const store::document& doc,
                                               std::string_view reach);
    bool retry_update(pending_op& op);

    store_client& stores_;
    app_registry& apps_;
    change_feed& feed_;
    const net::cidr_list& allow_;  // --deliveries-allow (SPEC §9)
    std::vector<pending_op> pending_;
    std::string key_;
    std::string text_;
    std::string page_;  // lag counting's scratch
};

// Unix milliseconds now (the record's times).
std::int64_t unix_now_ms();

// The changes of the delivery's app and prefix after its cursor (from the oldest retained one when
// the cursor expired), counted by paging the feed up to max_delivery_lag_changes. `scratch` is the
// caller's page buffer. Inside a reader round.
std::uint64_t delivery_lag_changes(change_feed& feed, const delivery_record& d, std::string_view app,
                                   std::string& scratch);
// Seconds the delivery has waited with changes to send (since its cursor last moved); 0 without lag.
std::int64_t delivery_lag_seconds(const delivery_record& d, std::uint64_t lag_changes, std::int64_t now_unix_ms);

}  // namespace percore::shards
