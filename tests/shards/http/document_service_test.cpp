// The composition in-process: a connection pool over a fake transport, the document service, and
// real in-memory stores behind a store_client — the whole HTTP decision path of a GET, a PUT, a
// list page and the preconditions, without sockets, threads or sleeps.
#include <deque>
#include <doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "../net/fake_transport.hpp"
#include "net/connection_pool.hpp"
#include "shards/http/document_service.hpp"
#include "shards/base/http_decisions.hpp"
#include "shards/base/key_owner.hpp"
#include "shards/base/write_ticket.hpp"
#include "store/epoch.hpp"
#include "store/shard_store.hpp"

using namespace percore;
using net::testing::fake_transport;

namespace {

const net::cidr_list no_allow;  // --deliveries-allow: none

// Two stores, no log (batches publish at once), one "shard" (this test) holding the connection.
struct stores_for_test final : shards::store_client, shards::server_view {
    static constexpr unsigned count = 2;
    store::reader_epochs epochs{1};
    std::vector<std::unique_ptr<store::shard_store>> stores;
    shards::shard_metrics metrics[count];
    net::connection_stats connections[count];

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

    // What the shard's round does for writes: apply the batches and answer their tickets.
    void settle(net::connection_pool& pool) {
        for (auto& s : stores) {
            std::vector<store::write_result> done;
            (void)s->advance_batches(done);
            for (const auto& r : done)
                pool.complete(shards::write_ticket::decode(r.tag).answer, shards::write_answer(r.outcome, r.version, r.current_exists));
        }
    }
    // The same through the service, as the shard does (catalog writes and quota refusals included).
    void settle(net::connection_pool& pool, shards::document_service& service) {
        for (auto& s : stores) {
            std::vector<store::write_result> done;
            (void)s->advance_batches(done);
            for (const auto& r : done)
                settle_one(r, pool, service);
        }
    }
    // One result, routed as the shard routes it (server/shard.cpp): to its issuer.
    static void settle_one(const store::write_result& r, net::connection_pool& pool, shards::document_service& service) {
        const auto t = shards::write_ticket::decode(r.tag);
        if (t.from() == shards::issuer::app_erasure) {
            service.erasures().write_done(r);
            return;
        }
        REQUIRE(t.from() == shards::issuer::connection);
        if (auto a = service.write_done(r)) pool.complete(t.answer, *a);
    }

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
    shards::app_registry registry{count};
};

struct composition {
    runtime::round_clock clock;
    stores_for_test stores;
    shards::auth_config auth;  // off
    shards::document_service service{stores, stores, stores.metrics[0], stores.registry, auth, no_allow};
    fake_transport io;  // before the pool: the pool's connection refers to it until the pool goes
    std::deque<fake_transport> more;  // other clients' transports (second_client), for the same reason
    net::connection_pool pool{clock, service, net::connection_limits{}};

    composition() { REQUIRE(pool.open(io) != nullptr); }
    // Sends one request, lets the writes settle, returns what the client received for it.
    std::string exchange(const std::string& request) {
        io.written.clear();
        io.deliver(request);
        io.ready();
        stores.settle(pool, service);
        return io.written;
    }
    std::string etag_of(const std::string& answer) {
        auto at = answer.find("ETag: ");
        REQUIRE(at != std::string::npos);
        return answer.substr(at + 6, 18);
    }
};

std::string put(std::string_view key, std::string_view value, std::string_view extra = "") {
    return "PUT /app/" + std::string(key) + " HTTP/1.1\r\nHost: x\r\n" + std::string(extra) +
           "Content-Length: " + std::to_string(value.size()) + "\r\n\r\n" + std::string(value);
}
std::string get(std::string_view target, std::string_view extra = "") {
    return "GET " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n" + std::string(extra) + "\r\n";
}

}  // namespace

TEST_CASE("a PUT is answered 201 with its ETag only once its batch is applied, then a GET reads it") {
    composition c;
    c.io.deliver(put("k", "hello"));
    c.io.ready();
    CHECK(c.io.written.empty());   // pending: the batch has not been applied yet
    c.stores.settle(c.pool);
    CHECK(c.io.written.starts_with("HTTP/1.1 201 Created\r\n"));
    std::string etag = c.etag_of(c.io.written);
    std::string got = c.exchange(get("/app/k"));
    CHECK(got.starts_with("HTTP/1.1 200 OK\r\n"));
    CHECK(got.ends_with("\r\n\r\nhello"));
    CHECK(c.etag_of(got) == etag);
}

TEST_CASE("a GET of a missing document is 404 with a JSON error") {
    composition c;
    std::string got = c.exchange(get("/app/none"));
    CHECK(got.starts_with("HTTP/1.1 404 "));
    CHECK(got.ends_with("{\"error\":\"not found\"}"));
}

TEST_CASE("If-None-Match with the current ETag answers a GET 304 and a PUT 412") {
    composition c;
    std::string etag = c.etag_of(c.exchange(put("k", "v1")));
    CHECK(c.exchange(get("/app/k", "If-None-Match: " + etag + "\r\n")).starts_with("HTTP/1.1 304 "));
    CHECK(c.exchange(put("k", "v2", "If-None-Match: " + etag + "\r\n")).starts_with("HTTP/1.1 412 "));
}

TEST_CASE("If-Match with another ETag answers 412 for reads and writes, carrying the current ETag") {
    composition c;
    std::string etag = c.etag_of(c.exchange(put("k", "v1")));
    std::string read = c.exchange(get("/app/k", "If-Match: \"0000000000000001\"\r\n"));
    CHECK(read.starts_with("HTTP/1.1 412 "));
    CHECK(c.etag_of(read) == etag);
    std::string write = c.exchange(put("k", "v2", "If-Match: \"0000000000000001\"\r\n"));
    CHECK(write.starts_with("HTTP/1.1 412 "));
    CHECK(c.etag_of(write) == etag);
}

TEST_CASE("a malformed If-Match is answered 400 and the write does not happen") {
    for (const char* value : {"\"E\"x", "\"E\";", "\"E\"\"", "\"E\" \"E\"", "\"0000000000000001\", *", "\"open"}) {
        composition c;
        c.exchange(put("k", "v1"));
        std::string got = c.exchange(put("k", "v2", std::string("If-Match: ") + value + "\r\n"));
        CHECK_MESSAGE(got.starts_with("HTTP/1.1 400 "), value);
        CHECK(c.exchange(get("/app/k")).ends_with("v1"));
    }
}

TEST_CASE("If-Match: * alone writes an existing document; If-None-Match: * only creates") {
    composition c;
    CHECK(c.exchange(put("k", "v1", "If-Match: *\r\n")).starts_with("HTTP/1.1 412 "));
    CHECK(c.exchange(put("k", "v1", "If-None-Match: *\r\n")).starts_with("HTTP/1.1 201 "));
    CHECK(c.exchange(put("k", "v2", "If-None-Match: *\r\n")).starts_with("HTTP/1.1 412 "));
    CHECK(c.exchange(put("k", "v2", "If-Match: *\r\n")).starts_with("HTTP/1.1 204 "));
}

TEST_CASE("a list page merges the keys of every store in byte order") {
    composition c;
    for (const char* k : {"b", "a", "d", "c"}) c.exchange(put(k, "x"));
    std::string got = c.exchange(get("/app/?limit=3"));
    auto body = got.substr(got.find("\r\n\r\n") + 4);
    CHECK(body.find("\"key\":\"a\"") < body.find("\"key\":\"b\""));
    CHECK(body.find("\"key\":\"b\"") < body.find("\"key\":\"c\""));
    CHECK(body.find("\"key\":\"d\"") == std::string::npos);
    CHECK(body.ends_with("\"next\":\"c\"}"));
}

TEST_CASE("a DELETE answers 204, then 404") {
    composition c;
    c.exchange(put("k", "v"));
    CHECK(c.exchange("DELETE /app/k HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 204 "));
    CHECK(c.exchange("DELETE /app/k HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 404 "));
}

TEST_CASE("/_health answers 200 from the server view, and a PUT to it is 405 with Allow") {
    composition c;
    CHECK(c.exchange(get("/_health")).starts_with("HTTP/1.1 200 "));
    std::string got = c.exchange("PUT /_health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    CHECK(got.starts_with("HTTP/1.1 405 "));
    CHECK(got.find("Allow: GET, HEAD\r\n") != std::string::npos);
}

TEST_CASE("OPTIONS * is 204 with the methods the server supports, and the connection stays open") {
    composition c;
    std::string got = c.exchange("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(got.starts_with("HTTP/1.1 204 No Content\r\n"));
    CHECK(got.find("Allow: GET, HEAD, PUT, DELETE, OPTIONS\r\n") != std::string::npos);
    CHECK(got.find("Content-Length") == std::string::npos);
    CHECK(got.find("Connection: close") == std::string::npos);
    CHECK(got.ends_with("\r\n\r\n"));
    CHECK(c.exchange(get("/app/none")).starts_with("HTTP/1.1 404 "));
}

TEST_CASE("OPTIONS on a document is 204 with the document's methods, whether or not it exists") {
    composition c;
    for (const char* target : {"/app/none", "/app/k"}) {
        CAPTURE(target);
        if (std::string_view(target) == "/app/k") c.exchange(put("k", "v"));
        std::string got = c.exchange("OPTIONS " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n\r\n");
        CHECK(got.starts_with("HTTP/1.1 204 No Content\r\n"));
        CHECK(got.find("Allow: GET, HEAD, PUT, DELETE, OPTIONS\r\n") != std::string::npos);
        CHECK(got.find("ETag") == std::string::npos);
    }
    CHECK(c.exchange("OPTIONS /app/%zz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 400 "));
}

TEST_CASE("a method a document does not allow is 405 with an Allow that lists OPTIONS") {
    composition c;
    std::string got = c.exchange("PATCH /app/k HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    CHECK(got.starts_with("HTTP/1.1 405 "));
    CHECK(got.find("Allow: GET, HEAD, PUT, DELETE, OPTIONS\r\n") != std::string::npos);
    // Lists and the server endpoints are read-only: OPTIONS there is not allowed and not listed.
    for (const char* target : {"/app/", "/_health"}) {
        CAPTURE(target);
        std::string other = c.exchange("OPTIONS " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n\r\n");
        CHECK(other.starts_with("HTTP/1.1 405 "));
        CHECK(other.find("Allow: GET, HEAD\r\n") != std::string::npos);
    }
}

// ---- apps (SPEC §7) with --auth off: quotas at admission and at the owner

namespace {

// A second client of the same composition.
struct second_client {
    fake_transport& io;
    explicit second_client(composition& c) : io(c.more.emplace_back()) { REQUIRE(c.pool.open(io) != nullptr); }
    std::string exchange(composition& c, const std::string& request) {
        io.written.clear();
        io.deliver(request);
        io.ready();
        c.stores.settle(c.pool, c.service);
        return io.written;
    }
};

std::string admin_put(std::string_view app, std::string_view body) {
    return "PUT /_apps/" + std::string(app) + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + std::string(body);
}

}  // namespace

TEST_CASE("an app made by PUT /_apps is answered 201 once its record is applied, then 204") {
    composition c;
    CHECK(c.exchange(admin_put("app", R"({"quota":{"documents":1}})")).starts_with("HTTP/1.1 201 "));
    CHECK(c.exchange(admin_put("app", R"({"quota":{"documents":2}})")).starts_with("HTTP/1.1 204 "));
    std::string info = c.exchange(get("/_apps/app"));
    CHECK(info.starts_with("HTTP/1.1 200 "));
    CHECK(info.find(R"("quota":{"documents":2})") != std::string::npos);
}

TEST_CASE("a write past the documents quota is refused 507 before its body is read, and the connection closes") {
    composition c;
    REQUIRE(c.exchange(admin_put("app", R"({"quota":{"documents":1}})")).starts_with("HTTP/1.1 201 "));
    CHECK(c.exchange(put("a", "v")).starts_with("HTTP/1.1 201 "));
    c.io.written.clear();
    c.io.deliver("PUT /app/b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n");  // the head alone
    c.io.ready();
    CHECK(c.io.written.starts_with("HTTP/1.1 507 "));
    CHECK(c.io.written.find("Connection: close") != std::string::npos);
    CHECK(c.io.written.ends_with(R"({"error":"quota exceeded: documents"})"));
    CHECK(c.stores.stores[0]->current()->find(std::string("app\0b", 5)) == nullptr);
    CHECK(c.stores.stores[1]->current()->find(std::string("app\0b", 5)) == nullptr);
}

TEST_CASE("two writers admitted together cannot pass the documents quota: the owner's gate refuses the second") {
    composition c;
    REQUIRE(c.exchange(admin_put("app", R"({"quota":{"documents":1}})")).starts_with("HTTP/1.1 201 "));
    second_client other(c);
    // both heads and bodies arrive before either write is applied: admission lets both through
    c.io.written.clear();
    c.io.deliver(put("a", "v"));
    c.io.ready();
    other.io.deliver(put("b", "v"));
    other.io.ready();
    CHECK(c.io.written.empty());
    CHECK(other.io.written.empty());
    c.stores.settle(c.pool, c.service);
    const bool first_won = c.io.written.starts_with("HTTP/1.1 201 ");
    const std::string& loser = first_won ? other.io.written : c.io.written;
    CHECK((first_won || other.io.written.starts_with("HTTP/1.1 201 ")));
    CHECK(loser.starts_with("HTTP/1.1 507 "));
    CHECK(loser.ends_with(R"({"error":"quota exceeded: documents"})"));
    CHECK(loser.find("Connection: close") == std::string::npos);  // its body was read: the connection stays
    CHECK(c.stores.registry.find("app")->documents() == 1);
}

TEST_CASE("a connection past the connections quota gets 429 with Retry-After, and a closed one frees its place") {
    composition c;
    REQUIRE(c.exchange(admin_put("app", R"({"quota":{"connections":1}})")).starts_with("HTTP/1.1 201 "));
    CHECK(c.exchange(get("/app/k")).starts_with("HTTP/1.1 404 "));
    second_client other(c);
    std::string refused = other.exchange(c, get("/app/k"));
    CHECK(refused.starts_with("HTTP/1.1 429 "));
    CHECK(refused.find("Retry-After: 1\r\n") != std::string::npos);
    c.io.deliver_eof();  // the first client leaves
    c.io.ready();
    CHECK(other.exchange(c, get("/app/k")).starts_with("HTTP/1.1 404 "));
}

// ---- the change feed (SPEC §8): a waiting feed is paged only when its app changed

namespace {

// A composition whose service holds waiting feeds. settle_and_signal() does what the shard does
// after each batch: answer its writes, count its changes per app and signal (one "shard" per store).
struct feed_signal_holder {  // constructed before the composition, destroyed after it (its pool ends waits)
    shards::feed_signal signal{stores_for_test::count};
};

struct feed_composition : feed_signal_holder, composition {
    feed_composition() { service.attach(&pool, &signal, nullptr, {}); }
    void settle_and_signal() {
        for (unsigned s = 0; s < stores_for_test::count; ++s) {
            std::vector<store::write_result> done;
            (void)stores.stores[s]->advance_batches(done);
            for (const auto& r : done)
                stores_for_test::settle_one(r, pool, service);
            if (!done.empty())
                shards::publish_changes(signal, stores.registry, s, stores.stores[s]->classes_published(), [](unsigned) {});
        }
    }
    std::string write(std::string_view app, std::string_view key) {
        io.written.clear();
        io.deliver("PUT /" + std::string(app) + "/" + std::string(key) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nv");
        io.ready();
        settle_and_signal();
        return io.written;
    }
};

// A client whose long poll on `app` waits (60 s: no deadline passes in the test).
struct waiting_client {
    fake_transport& io;
    waiting_client(feed_composition& c, std::string_view app) : io(c.more.emplace_back()) {
        REQUIRE(c.pool.open(io) != nullptr);
        io.deliver("GET /_changes/" + std::string(app) + "?feed=longpoll&timeout=60&since=now HTTP/1.1\r\nHost: x\r\n\r\n");
        io.ready();
        REQUIRE(io.written.empty());
        REQUIRE(c.service.waits().step(runtime::clock_type::now()) == 1);  // its first step pages it (a publish may have come since its first page)
        REQUIRE(io.written.empty());
    }
    ~waiting_client() {  // the client leaves before its transport goes
        io.deliver_eof();
        io.ready();
    }
};

}  // namespace

TEST_CASE("a stop answers a long poll whose connection pipelined another one behind it, which waits in turn") {
    feed_composition c;
    REQUIRE(c.write("quiet", "k0").starts_with("HTTP/1.1 201 "));
    fake_transport& io = c.more.emplace_back();
    REQUIRE(c.pool.open(io) != nullptr);
    const std::string poll = "GET /_changes/quiet?feed=longpoll&timeout=60&since=now HTTP/1.1\r\nHost: x\r\n\r\n";
    io.deliver(poll + poll);  // the second is read once the first is answered
    io.ready();
    REQUIRE(c.service.waits().step(runtime::clock_type::now()) == 1);
    REQUIRE(c.service.waits().size() == 1);
    // answering the first lets the connection take the second, which adds a wait while the stop
    // walks them (the vector moved under it: ASan's use after free at SIGTERM)
    c.service.waits().begin_stop();
    CHECK(io.written.starts_with("HTTP/1.1 200 "));
    io.deliver_eof();
    io.ready();
}

TEST_CASE("a waiting long poll is not paged for another app's writes, and is answered by its own app's write") {
    feed_composition c;
    REQUIRE(c.write("quiet", "k0").starts_with("HTTP/1.1 201 "));  // --auth off: the apps are made by a write
    REQUIRE(c.write("busy", "k0").starts_with("HTTP/1.1 201 "));
    waiting_client waiter(c, "quiet");
    for (int i = 1; i <= 3; ++i) {
        REQUIRE(c.write("busy", "k" + std::to_string(i)).starts_with("HTTP/1.1 201 "));
        CHECK(c.service.waits().news());
        CHECK(c.service.waits().step(runtime::clock_type::now()) == 0);
    }
    CHECK(waiter.io.written.empty());
    REQUIRE(c.write("quiet", "k1").starts_with("HTTP/1.1 201 "));
    CHECK(c.service.waits().step(runtime::clock_type::now()) == 1);
    CHECK(waiter.io.written.starts_with("HTTP/1.1 200 "));
    CHECK(waiter.io.written.find(R"("key":"k1")") != std::string::npos);
    CHECK(waiter.io.written.find(R"("key":"k0")") == std::string::npos);
}

TEST_CASE("a change of no known app (an apps record) makes every waiting feed look") {
    feed_composition c;
    REQUIRE(c.write("quiet", "k0").starts_with("HTTP/1.1 201 "));
    waiting_client waiter(c, "quiet");
    c.io.written.clear();
    c.io.deliver(admin_put("other", R"({"quota":{}})"));
    c.io.ready();
    c.settle_and_signal();
    REQUIRE(c.io.written.starts_with("HTTP/1.1 201 "));
    CHECK(c.service.waits().step(runtime::clock_type::now()) == 1);
    CHECK(waiter.io.written.empty());  // looked, found nothing of its app: still waiting
}

TEST_CASE("a long poll on an app with no writes yet is answered by the write that makes the app") {
    feed_composition c;
    waiting_client waiter(c, "fresh");
    REQUIRE(c.write("fresh", "first").starts_with("HTTP/1.1 201 "));
    CHECK(c.service.waits().step(runtime::clock_type::now()) == 1);
    CHECK(waiter.io.written.starts_with("HTTP/1.1 200 "));
    CHECK(waiter.io.written.find(R"("key":"first")") != std::string::npos);
}

TEST_CASE("the replication feed carries every app's changes with their values, and no follower record") {
    composition c;
    REQUIRE(c.exchange(put("a", "hello", "Content-Type: text/plain\r\n")).starts_with("HTTP/1.1 201"));
    REQUIRE(c.exchange("PUT /other/b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx").starts_with("HTTP/1.1 201"));
    REQUIRE(c.exchange("DELETE /app/a HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 204"));
    store::write_op own;  // what a follower stores of its own place in its primary's feed
    own.doc = store::copy_document(std::string("_percore\0follower/cursor", 24), "application/json", "{}");
    c.stores.submit(c.stores.owner_of(own.doc->key()), std::move(own));
    c.stores.settle(c.pool, c.service);
    std::string page = c.exchange(get("/_changes/_all"));
    REQUIRE(page.starts_with("HTTP/1.1 200"));
    CHECK(page.find("{\"app\":\"other\",\"key\":\"b\",") != std::string::npos);
    CHECK(page.find("\"deleted\":false,\"content_type\":\"application/octet-stream\",\"value_base64\":\"eA==\"}") !=
          std::string::npos);
    CHECK(page.find("{\"app\":\"app\",\"key\":\"a\",") != std::string::npos);
    CHECK(page.find("\"deleted\":true,\"content_type\":null,\"value_base64\":null}") != std::string::npos);
    CHECK(page.find("follower") == std::string::npos);
    CHECK(page.find("\"pending\":0,\"epoch\":0}") != std::string::npos);
}

TEST_CASE("a replication page that stops at its limit says how many changes are pending after it") {
    composition c;
    for (int i = 0; i < 5; ++i) REQUIRE(c.exchange(put("k" + std::to_string(i), "v")).starts_with("HTTP/1.1 201"));
    std::string page = c.exchange(get("/_changes/_all?limit=2"));
    REQUIRE(page.starts_with("HTTP/1.1 200"));
    CHECK(page.find("\"pending\":3,\"epoch\":0}") != std::string::npos);
}

TEST_CASE("a fenced board answers every write 503 with Retry-After and applies none, and still reads") {
    composition c;
    REQUIRE(c.exchange(put("a", "1")).starts_with("HTTP/1.1 201"));
    shards::board_role fenced;
    fenced.fence();
    c.service.set_role(fenced);
    std::string answer = c.exchange(put("a", "2"));
    CHECK(answer.starts_with("HTTP/1.1 503"));
    CHECK(answer.find("Retry-After: 1\r\n") != std::string::npos);
    second_client reader(c);  // the refusal closed the first connection (its body was never read)
    std::string read = reader.exchange(c, get("/app/a"));
    CHECK(read.starts_with("HTTP/1.1 200"));
    CHECK(read.ends_with("\r\n\r\n1"));
}

TEST_CASE("a primary whose lease deadline has passed answers 503 instead of acknowledging") {
    composition c;
    shards::board_role role;
    role.become_primary(7, shards::board_role::never);
    c.service.set_role(role);
    REQUIRE(c.exchange(put("a", "1")).starts_with("HTTP/1.1 201"));
    role.extend(0);  // the deadline is in the past: the lease may have expired
    CHECK(c.exchange(put("a", "2")).starts_with("HTTP/1.1 503"));
}

TEST_CASE("a write admitted before the lease deadline but applied after it is not acknowledged") {
    composition c;
    shards::board_role role;
    role.become_primary(7, shards::board_role::never);
    c.service.set_role(role);
    c.io.deliver(put("a", "1"));
    c.io.ready();
    REQUIRE(c.io.written.empty());  // admitted, its batch not applied yet
    role.extend(0);
    c.stores.settle(c.pool, c.service);
    CHECK(c.io.written.starts_with("HTTP/1.1 503"));
}

TEST_CASE("a follower answers every write 421 with its primary, before reading the body, and still reads") {
    composition c;
    REQUIRE(c.exchange(put("a", "1")).starts_with("HTTP/1.1 201"));
    shards::board_role follower;
    follower.become_follower(0, "http://10.0.0.1:8080");
    c.service.set_role(follower);
    std::string answer = c.exchange(put("a", "2"));
    CHECK(answer.starts_with("HTTP/1.1 421 Misdirected Request\r\n"));
    CHECK(answer.find("{\"error\":\"read-only follower\",\"primary\":\"http://10.0.0.1:8080\"}") != std::string::npos);
    composition d;
    d.service.set_role(follower);
    CHECK(d.exchange("DELETE /app/a HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 421"));
    CHECK(d.exchange(get("/app/a")).starts_with("HTTP/1.1 404"));
}
