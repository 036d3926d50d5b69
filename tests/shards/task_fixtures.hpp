// task_fixtures: what a test of one shard's background task (base/shard_task.hpp: the delivery
// engine, the follower) drives it with, in-process and by hand —
//
// - task_stores: real in-memory stores (no log: a batch publishes when it is advanced) behind a
//   store_client and a server_view, as document_service_test's stores_for_test. The test is shard
//   0 (self()). Writes the task submits wait in `held` until settle() hands them to their owners,
//   so a test can put its own change in before them (an administrator's write that wins); settle()
//   then applies every store's batch and routes each result of a background write through a real
//   shard_tasks table to the task registered for its issuer, as the shard does (server/shard.cpp,
//   complete_write). The test's own writes (put, erase) are applied at once and answer nobody.
// - fake_transports: a delivery_transports that hands out fake client transports
//   (tests/net/fake_client_transport.hpp) the test keeps: the task owns only a forwarding handle, so
//   what a connection carried, and whether it was closed, can be read after the task dropped it.
// - sent_request / last_request(): the request a fake socket carried, split into its parts.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <doctest.h>

#include "../net/fake_client_transport.hpp"
#include "net/connection_stats.hpp"
#include "shards/apps/app_registry.hpp"
#include "shards/base/document_value.hpp"
#include "shards/base/key_owner.hpp"
#include "shards/base/metrics.hpp"
#include "shards/base/server_view.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/base/store_client.hpp"
#include "shards/base/write_ticket.hpp"
#include "shards/deliveries/delivery_transports.hpp"
#include "store/document.hpp"
#include "store/epoch.hpp"
#include "store/shard_store.hpp"

namespace percore::shards::testing {

struct task_stores final : store_client, server_view {
    static constexpr unsigned max_count = 4;
    const unsigned count;
    store::reader_epochs epochs{1};
    std::vector<std::unique_ptr<store::shard_store>> stores;
    shard_metrics metrics[max_count];
    net::connection_stats connections[max_count];
    app_registry registry;
    feed_identity identity{0x1234, 1};
    bool is_serving = true;
    struct held_write {
        unsigned owner;
        store::write_op op;
    };
    std::deque<held_write> held;  // submitted by the task, not yet given to a store
    // The next result routed to a task says this instead (a store that refused it: disk full);
    // what the store did is unchanged.
    std::optional<store::write_outcome> refuse_next;

    explicit task_stores(unsigned n) : count(n), registry(n) {
        REQUIRE(n <= max_count);
        for (unsigned i = 0; i < count; ++i) stores.push_back(std::make_unique<store::shard_store>(epochs, 1000));
        epochs.begin_round(0);
    }
    ~task_stores() {
        for (auto& w : held)
            if (w.op.doc) w.op.doc->release();
        epochs.quiesce(0);
    }

    // store_client (this test is shard 0)
    unsigned shard_count() const override { return count; }
    unsigned self() const override { return 0; }
    unsigned owner_of(std::string_view key) const override { return shards::owner_of(key, count); }
    const store::snapshot* current(unsigned owner) const override { return stores[owner]->current(); }
    void submit(unsigned owner, store::write_op op) override { held.push_back({owner, std::move(op)}); }

    // server_view
    bool serving() const override { return is_serving; }
    bool stopping() const override { return false; }
    bool any_store_failed() const override { return false; }
    int cpu_of(unsigned) const override { return 0; }
    const shard_metrics& metrics_of(unsigned s) const override { return metrics[s]; }
    const net::connection_stats& connections_of(unsigned s) const override { return connections[s]; }
    const store::snapshot* snapshot_of(unsigned s) const override { return stores[s]->current(); }
    const app_registry& apps() const override { return registry; }
    feed_identity data_identity() const override { return identity; }
    struct always_primary final : board_role {
        always_primary() { become_primary(0, never); }
    } board;
    const board_role& role() const override { return board; }

    // One pass of what the shard's rounds do with writes: the held ones go to their stores, every
    // store applies its batch, and each background result goes to its issuer through `tasks`.
    // Returns the results routed.
    std::size_t settle(shard_tasks& tasks) {
        while (!held.empty()) {
            held_write w = std::move(held.front());
            held.pop_front();
            stores[w.owner]->submit(std::move(w.op));
        }
        std::size_t routed = 0;
        for (auto& s : stores) {
            std::vector<store::write_result> done;
            (void)s->advance_batches(done);
            for (auto& r : done) {
                const issuer who = write_ticket::decode(r.tag).from();
                if (who == issuer::connection) continue;  // the test's own writes
                if (refuse_next) r.outcome = *std::exchange(refuse_next, std::nullopt);
                tasks.write_done(who, r);
                ++routed;
            }
        }
        return routed;
    }
    // settle() until the task submits nothing more (a result may lead to the next write).
    std::size_t settle_all(shard_tasks& tasks) {
        std::size_t routed = 0;
        for (int pass = 0; pass < 16; ++pass) {
            routed += settle(tasks);
            if (held.empty()) return routed;
        }
        FAIL("writes keep coming after 16 passes");
        return routed;
    }

    // The test's own writes, applied at once (their results answer nobody).
    void put(std::string_view key, std::string_view value, std::string_view content_type = "text/plain") {
        store::write_op w;
        w.doc = store::copy_document(key, content_type, value);
        apply(std::move(w));
    }
    void erase(std::string_view key) {
        store::write_op w;
        w.kind = store::write_kind::erase;
        w.key = std::string(key);
        apply(std::move(w));
    }
    void apply(store::write_op w) {
        const unsigned owner = owner_of(w.doc ? w.doc->key() : std::string_view(w.key));
        stores[owner]->submit(std::move(w));
        std::vector<store::write_result> done;
        (void)stores[owner]->advance_batches(done);
        REQUIRE(done.size() == 1);
    }

    const store::document* find(std::string_view key) const { return stores[owner_of(key)]->current()->find(key); }
    // The value the owner's store holds for `key`, or nothing.
    std::optional<std::string> value_of(std::string_view key) const {
        const store::snapshot* snap = stores[owner_of(key)]->current();
        const store::document* doc = snap->find(key);
        if (!doc) return std::nullopt;
        std::string scratch;
        auto v = document_value(*snap, *doc, scratch);
        REQUIRE(v);
        return std::string(*v);
    }
};

// What the task holds: a handle that forwards to a fake the test keeps.
class held_transport final : public net::client_transport {
public:
    explicit held_transport(std::shared_ptr<net::testing::fake_client_transport> t) : t_(std::move(t)) {}
    ~held_transport() override { t_->bind_events(nullptr); }  // a later ready() of the test reaches nobody

    void open() override {
        t_->bind_events(events_);
        t_->open();
    }
    open_state open_progress() override { return t_->open_progress(); }
    int open_error() const override { return t_->open_error(); }
    bool is_open() const override { return t_->is_open(); }
    void post_ready() override { t_->post_ready(); }
    bool readable() const override { return t_->readable(); }
    net::io_result read(std::span<char> into) override { return t_->read(into); }
    net::io_result write(std::span<const iovec> pieces) override { return t_->write(pieces); }
    net::io_result write_file(int fd, std::uint64_t offset, std::size_t bytes) override {
        return t_->write_file(fd, offset, bytes);
    }
    void shutdown_write() override { t_->shutdown_write(); }
    void close() override { t_->close(); }

private:
    std::shared_ptr<net::testing::fake_client_transport> t_;
};

class fake_transports final : public delivery_transports {
public:
    struct request_for {
        delivery_url url;
        std::string ca_pem;
        int family = 0;  // of the peer address it was given
    };
    std::vector<std::shared_ptr<net::testing::fake_client_transport>> made;
    std::vector<request_for> asked;
    std::string refusal;  // not empty: make() fails with it

    shards::result<std::unique_ptr<net::client_transport>> make(const delivery_url& url, const std::string& ca_pem,
                                                                const net::socket_address& peer) override {
        asked.push_back({url, ca_pem, peer.family()});
        if (!refusal.empty()) return std::unexpected(refusal);
        made.push_back(std::make_shared<net::testing::fake_client_transport>());
        return std::make_unique<held_transport>(made.back());
    }

    net::testing::fake_client_transport& last() {
        REQUIRE(!made.empty());
        return *made.back();
    }
    // Sockets opened on every transport made so far (each connect opens one).
    std::size_t sockets() const {
        std::size_t n = 0;
        for (const auto& t : made) n += t->sockets.size();
        return n;
    }
};

// The connect of a new connection ends (open), or a kept connection's posted turn comes: either
// way the request the task sent is written. `posted_before`: the transport's `posted` before the send.
inline void let_request_out(net::testing::fake_client_transport& t, std::size_t sockets_before, int posted_before) {
    if (t.sockets.size() > sockets_before) {
        t.connected();
    } else {
        REQUIRE(t.posted > posted_before);
        t.ready();
    }
}

// The answer arrives on the transport's current socket.
inline void answer(net::testing::fake_client_transport& t, std::string_view bytes) {
    t.socket().deliver(bytes);
    t.ready();
}

struct sent_request {
    std::string method;
    std::string target;
    std::map<std::string, std::string> fields;  // as written (the names' case kept)
    std::string body;

    std::string field(const std::string& name) const {
        auto it = fields.find(name);
        return it == fields.end() ? std::string() : it->second;
    }
};

// The requests a socket carried, in order (framed by their Content-Length).
inline std::vector<sent_request> requests_in(std::string_view bytes) {
    std::vector<sent_request> out;
    while (!bytes.empty()) {
        const std::size_t head_end = bytes.find("\r\n\r\n");
        REQUIRE_MESSAGE(head_end != std::string_view::npos, std::string(bytes));
        std::string_view head = bytes.substr(0, head_end);
        sent_request r;
        std::size_t line_end = head.find("\r\n");
        std::string_view line = head.substr(0, line_end);
        const std::size_t sp1 = line.find(' ');
        const std::size_t sp2 = line.find(' ', sp1 + 1);
        REQUIRE(sp2 != std::string_view::npos);
        r.method = line.substr(0, sp1);
        r.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
        CHECK(line.substr(sp2 + 1) == "HTTP/1.1");
        while (line_end != std::string_view::npos) {
            const std::size_t next = head.find("\r\n", line_end + 2);
            std::string_view f = head.substr(line_end + 2, next == std::string_view::npos ? std::string_view::npos
                                                                                          : next - line_end - 2);
            const std::size_t colon = f.find(": ");
            REQUIRE(colon != std::string_view::npos);
            r.fields[std::string(f.substr(0, colon))] = std::string(f.substr(colon + 2));
            line_end = next;
        }
        const std::size_t length = std::stoul(r.field("Content-Length"));
        REQUIRE(bytes.size() >= head_end + 4 + length);
        r.body = bytes.substr(head_end + 4, length);
        out.push_back(std::move(r));
        bytes.remove_prefix(head_end + 4 + length);
    }
    return out;
}

// Every request the transport carried, over all its sockets, in order.
inline std::vector<sent_request> requests_on(const net::testing::fake_client_transport& t) {
    std::vector<sent_request> out;
    for (const auto& s : t.sockets)
        for (auto& r : requests_in(s->written)) out.push_back(std::move(r));
    return out;
}

}  // namespace percore::shards::testing
