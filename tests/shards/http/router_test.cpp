// The route table (base/endpoint.hpp) and the document service's use of it: every target_kind
// reaches its endpoint, and a pending write's result goes back to the endpoint that submitted it —
// with recording endpoints, then through the service with real in-memory stores.
#include <doctest.h>

#include <algorithm>

#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../net/fake_transport.hpp"
#include "net/connection_pool.hpp"
#include "shards/apps/apps_admin.hpp"
#include "shards/backup/backup_endpoint.hpp"
#include "shards/base/endpoint.hpp"
#include "shards/base/key_owner.hpp"
#include "shards/base/write_ticket.hpp"
#include "shards/deliveries/deliveries_admin.hpp"
#include "shards/feed/changes_endpoint.hpp"
#include "shards/http/admin_pages.hpp"
#include "shards/http/document_service.hpp"
#include "shards/http/documents_endpoint.hpp"
#include "store/epoch.hpp"
#include "store/shard_store.hpp"

using namespace percore;
using net::target_kind;

namespace {

const net::cidr_list no_allow;  // --deliveries-allow: none

constexpr std::array<target_kind, net::target_kind_count> every_kind = {
    target_kind::document,  target_kind::list,           target_kind::health,       target_kind::metrics,
    target_kind::stats,     target_kind::asterisk,       target_kind::not_found,    target_kind::bad,
    target_kind::apps,      target_kind::app,            target_kind::app_tokens,   target_kind::app_token,
    target_kind::changes,   target_kind::app_deliveries, target_kind::app_delivery, target_kind::replication,
    target_kind::replication_tokens, target_kind::replication_token, target_kind::backup,
};

// What reached it; `pending` leaves every answer pending, `writes` says it submits writes.
struct recording_endpoint final : shards::endpoint {
    bool writes = false;
    bool pending = false;
    std::vector<target_kind> handled;
    std::vector<std::uint64_t> results;  // the tags of the write results it was given
    std::vector<std::uint64_t> held;     // tags it says it still waits for (holds)

    result handle(net::request&, net::response&, const net::route& r, const shards::principal&,
                  net::answer_ticket) override {
        handled.push_back(r.kind);
        return pending ? result::pending : result::answered;
    }
    bool submits_writes() const override { return writes; }
    bool holds(std::uint64_t tag) const override {
        return std::find(held.begin(), held.end(), tag) != held.end();
    }
    std::optional<net::simple_answer> write_done(const store::write_result& result) override {
        results.push_back(result.tag);
        return net::simple_answer{204, false, 0, nullptr};
    }
};

// One request's objects, for calling an endpoint by hand.
struct request_for_test {
    net::request_head head;
    net::request req{head, {}, nullptr};
    net::output_buffer out;
    net::response res{out, "", net::connection_header::keep_alive, false};
    shards::principal who;
};

net::route route_of_kind(target_kind kind) {
    net::route r;
    r.kind = kind;
    return r;
}

store::write_result result_for(net::answer_ticket ticket) {
    store::write_result r;
    r.tag = shards::write_ticket{0, ticket}.encode();
    return r;
}

}  // namespace

TEST_CASE("the table hands every target_kind to the endpoint it was given, and to no other") {
    std::array<recording_endpoint, net::target_kind_count> endpoints;
    shards::endpoint_table table;
    for (std::size_t i = 0; i < every_kind.size(); ++i) {
        CHECK_FALSE(table.complete());
        table.set(every_kind[i], endpoints[i]);
    }
    CHECK(table.complete());
    request_for_test t;
    for (std::size_t i = 0; i < every_kind.size(); ++i) {
        const net::route r = route_of_kind(every_kind[i]);
        CHECK(table.dispatch(t.req, t.res, r, t.who, {static_cast<std::uint32_t>(i), 1}) ==
              net::request_handler::result::answered);
        CHECK(&table.at(every_kind[i]) == &endpoints[i]);
    }
    for (std::size_t i = 0; i < every_kind.size(); ++i) {
        REQUIRE(endpoints[i].handled.size() == 1);
        CHECK(endpoints[i].handled[0] == every_kind[i]);
    }
}

TEST_CASE("a pending write's result goes back to the endpoint that submitted it, connection by connection") {
    recording_endpoint documents, apps, feeds, others;
    documents.writes = documents.pending = true;
    apps.writes = apps.pending = true;
    feeds.pending = true;  // waits, but writes nothing
    shards::endpoint_table table;
    for (target_kind k : every_kind) {
        if (k == target_kind::document) table.set(k, documents);
        else if (k == target_kind::app) table.set(k, apps);
        else if (k == target_kind::changes) table.set(k, feeds);
        else table.set(k, others);
    }
    request_for_test t;
    const net::answer_ticket first{0, 7}, second{1, 3}, third{2, 5};
    REQUIRE(table.dispatch(t.req, t.res, route_of_kind(target_kind::document), t.who, first) ==
            net::request_handler::result::pending);
    REQUIRE(table.dispatch(t.req, t.res, route_of_kind(target_kind::app), t.who, second) ==
            net::request_handler::result::pending);
    // a feed that waits on a third connection notes nothing: no write of its comes back
    REQUIRE(table.dispatch(t.req, t.res, route_of_kind(target_kind::changes), t.who, third) ==
            net::request_handler::result::pending);

    const auto app_answer = table.write_done(result_for(second));
    const auto document_answer = table.write_done(result_for(first));
    REQUIRE(app_answer.has_value());
    REQUIRE(document_answer.has_value());
    CHECK(apps.results == std::vector<std::uint64_t>{result_for(second).tag});
    CHECK(documents.results == std::vector<std::uint64_t>{result_for(first).tag});
    CHECK(feeds.results.empty());

    // the first connection's next write goes to the apps: its result follows it there
    REQUIRE(table.dispatch(t.req, t.res, route_of_kind(target_kind::app), t.who, first) ==
            net::request_handler::result::pending);
    (void)table.write_done(result_for(first));
    CHECK(apps.results.size() == 2);
    CHECK(documents.results.size() == 1);
}

// ---- the document service's table, and its writes through real stores

namespace {

struct stores_for_test final : shards::store_client, shards::server_view {
    static constexpr unsigned count = 2;
    store::reader_epochs epochs{1};
    std::vector<std::unique_ptr<store::shard_store>> stores;
    shards::shard_metrics metrics[count];
    net::connection_stats connections[count];
    shards::app_registry registry{count};

    stores_for_test() {
        for (unsigned i = 0; i < count; ++i) stores.push_back(std::make_unique<store::shard_store>(epochs, 1000));
        epochs.begin_round(0);
    }
    ~stores_for_test() { epochs.quiesce(0); }

    unsigned shard_count() const override { return count; }
    unsigned self() const override { return 0; }
    unsigned owner_of(std::string_view key) const override { return shards::owner_of(key, count); }
    const store::snapshot* current(unsigned owner) const override { return stores[owner]->current(); }
    void submit(unsigned owner, store::write_op op) override { stores[owner]->submit(std::move(op)); }

    bool serving() const override { return true; }
    bool stopping() const override { return false; }
    bool any_store_failed() const override { return false; }
    int cpu_of(unsigned) const override { return 0; }
    const shards::shard_metrics& metrics_of(unsigned s) const override { return metrics[s]; }
    const net::connection_stats& connections_of(unsigned s) const override { return connections[s]; }
    const store::snapshot* snapshot_of(unsigned s) const override { return stores[s]->current(); }
    const shards::app_registry& apps() const override { return registry; }
    shards::feed_identity data_identity() const override { return {0x1234, 1}; }
    struct always_primary final : shards::board_role {
        always_primary() { become_primary(0, never); }
    } board;
    const shards::board_role& role() const override { return board; }

    // What the shard's round does with the results: a connection's to the service's write_done.
    void settle(net::connection_pool& pool, shards::document_service& service) {
        for (auto& s : stores) {
            std::vector<store::write_result> done;
            (void)s->advance_batches(done);
            for (const auto& r : done) {
                const auto t = shards::write_ticket::decode(r.tag);
                REQUIRE(t.from() == shards::issuer::connection);
                if (auto a = service.write_done(r)) pool.complete(t.answer, *a);
            }
        }
    }
};

template <class Endpoint>
bool served_by(shards::document_service& service, target_kind kind) {
    return dynamic_cast<Endpoint*>(&service.endpoint_of(kind)) != nullptr;
}

}  // namespace

TEST_CASE("the document service gives each target_kind its capability's endpoint") {
    stores_for_test stores;
    shards::auth_config auth;
    shards::document_service service{stores, stores, stores.metrics[0], stores.registry, auth, no_allow};
    for (target_kind k : {target_kind::document, target_kind::list})
        CHECK(served_by<shards::documents_endpoint>(service, k));
    for (target_kind k : {target_kind::changes, target_kind::replication})
        CHECK(served_by<shards::changes_endpoint>(service, k));
    for (target_kind k : {target_kind::apps, target_kind::app, target_kind::app_tokens, target_kind::app_token})
        CHECK(served_by<shards::apps_admin>(service, k));
    for (target_kind k : {target_kind::app_deliveries, target_kind::app_delivery})
        CHECK(served_by<shards::deliveries_admin>(service, k));
    CHECK(served_by<shards::backup_endpoint>(service, target_kind::backup));
    for (target_kind k : {target_kind::health, target_kind::metrics, target_kind::stats})
        CHECK(served_by<shards::admin_pages>(service, k));
    // not_found, bad and OPTIONS * are the service's own small answers: none of the above
    for (target_kind k : {target_kind::not_found, target_kind::bad, target_kind::asterisk}) {
        CHECK_FALSE(served_by<shards::documents_endpoint>(service, k));
        CHECK_FALSE(served_by<shards::admin_pages>(service, k));
        CHECK(&service.endpoint_of(k) == &service.endpoint_of(target_kind::not_found));
    }
}

TEST_CASE("a document write and an app write pending together are each answered by the endpoint that wrote") {
    runtime::round_clock clock;
    stores_for_test stores;
    shards::auth_config auth;  // off
    shards::document_service service{stores, stores, stores.metrics[0], stores.registry, auth, no_allow};
    std::deque<net::testing::fake_transport> clients(2);  // before the pool, which refers to them
    net::connection_pool pool{clock, service, net::connection_limits{}};
    for (auto& io : clients) REQUIRE(pool.open(io) != nullptr);

    const std::string app_body = R"({"quota":{"documents":5}})";
    clients[0].deliver("PUT /_apps/shop HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(app_body.size()) +
                       "\r\n\r\n" + app_body);
    clients[0].ready();
    clients[1].deliver("PUT /other/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    clients[1].ready();
    CHECK(clients[0].written.empty());  // both pending on their writes
    CHECK(clients[1].written.empty());

    stores.settle(pool, service);
    CHECK(clients[0].written.starts_with("HTTP/1.1 201 "));  // apps_admin's answer, its registry updated
    const shards::app_entry* shop = stores.registry.find("shop");
    REQUIRE(shop != nullptr);
    CHECK(shop->exists());
    CHECK(clients[1].written.starts_with("HTTP/1.1 201 Created\r\n"));  // the document's, with its ETag
    CHECK(clients[1].written.find("ETag: ") != std::string::npos);
}

TEST_CASE("a result whose connection ended and whose slot another connection took reaches the endpoint that wrote it") {
    recording_endpoint documents, apps, others;
    documents.writes = documents.pending = true;
    apps.writes = apps.pending = true;
    shards::endpoint_table table;
    for (target_kind k : every_kind) {
        if (k == target_kind::document) table.set(k, documents);
        else if (k == target_kind::app) table.set(k, apps);
        else table.set(k, others);
    }
    request_for_test t;
    // slot 4: an app write of generation 1; the connection ends, generation 2 takes the slot and
    // waits on a document write
    const net::answer_ticket gone{4, 1}, now{4, 2};
    REQUIRE(table.dispatch(t.req, t.res, route_of_kind(target_kind::app), t.who, gone) ==
            net::request_handler::result::pending);
    apps.held.push_back(result_for(gone).tag);
    REQUIRE(table.dispatch(t.req, t.res, route_of_kind(target_kind::document), t.who, now) ==
            net::request_handler::result::pending);
    (void)table.write_done(result_for(gone));  // its answer goes to a stale ticket: the pool drops it
    CHECK(apps.results == std::vector<std::uint64_t>{result_for(gone).tag});
    CHECK(documents.results.empty());
    (void)table.write_done(result_for(now));
    CHECK(documents.results == std::vector<std::uint64_t>{result_for(now).tag});

    // the other way round: a document write of a connection that ended reaches no endpoint
    const net::answer_ticket gone_doc{5, 1}, now_app{5, 2};
    REQUIRE(table.dispatch(t.req, t.res, route_of_kind(target_kind::document), t.who, gone_doc) ==
            net::request_handler::result::pending);
    REQUIRE(table.dispatch(t.req, t.res, route_of_kind(target_kind::app), t.who, now_app) ==
            net::request_handler::result::pending);
    CHECK_FALSE(table.write_done(result_for(gone_doc)).has_value());
    CHECK(apps.results.size() == 1);
    CHECK(documents.results.size() == 1);
}
