// Batch linger (shard_store::set_batch_linger; limits.hpp max_batch_linger): once a batch's answers
// went out, the next batch waits until as many writes wait as were answered plus those that waited
// already, or until the linger ends; a fake clock decides when it ends.
#include <doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "store/shard_store.hpp"
#include "store_test_util.hpp"
#include "tests/store/durability_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

const std::string dir = "/data/shard-000";

std::chrono::steady_clock::time_point fake_now{std::chrono::hours(1)};
std::chrono::steady_clock::time_point fake_clock() { return fake_now; }

struct lingering_store {
    live_document_guard guard;
    fault_env fe{7};
    std::unique_ptr<durable_store> s;
    std::vector<write_result> done;
    int serial = 0;

    lingering_store() {
        REQUIRE(fe.create_directory("/data"));
        REQUIRE(fe.create_directory(dir));
        REQUIRE(fe.sync_directory("/data"));
        s = open_store(fe, dir);
        REQUIRE(s->error.empty());
        store().set_batch_linger(std::chrono::microseconds(250), &fake_clock);
    }
    ~lingering_store() {
        store().set_batch_linger(std::chrono::nanoseconds(0));   // drain() must not wait on the fake clock
        drain(store());
        s.reset();
    }
    shard_store& store() { return *s->store; }
    void put() {
        ++serial;
        store().submit(put_op("k" + std::to_string(serial), "v", {}, static_cast<std::uint64_t>(serial)));
    }
    // Starts a batch of `writes` new writes, and leaves `waiting` more submitted behind it.
    void batch_in_flight(int writes, int waiting) {
        for (int i = 0; i < writes; ++i) put();
        store().advance_batches(done);
        REQUIRE(store().in_flight());
        for (int i = 0; i < waiting; ++i) put();
    }
    // Publishes the batch in flight; returns how many answers it gave.
    std::size_t finish() {
        wait_for_log(store());
        std::size_t before = done.size();
        store().advance_batches(done);
        return done.size() - before;
    }
};

}  // namespace

TEST_CASE("after a batch is answered the next one waits for as many writes as were answered plus those waiting") {
    lingering_store t;
    t.batch_in_flight(2, 1);
    CHECK(t.finish() == 2);
    CHECK_FALSE(t.store().in_flight());   // 1 waits of the 3 expected: the batch lingers
    CHECK_FALSE(t.store().ready());
    CHECK(t.store().linger_until() > fake_now);
    t.put();
    CHECK_FALSE(t.store().ready());
    t.put();
    CHECK(t.store().ready());
    CHECK(t.store().linger_until() == std::chrono::steady_clock::time_point::max());
    t.store().advance_batches(t.done);
    REQUIRE(t.store().in_flight());
    CHECK(t.finish() == 3);   // the three went in one batch
}

TEST_CASE("a lingering batch starts when the linger ends even though fewer writes came") {
    lingering_store t;
    t.batch_in_flight(3, 1);
    CHECK(t.finish() == 3);
    CHECK_FALSE(t.store().ready());
    const auto until = t.store().linger_until();
    CHECK(until <= fake_now + std::chrono::microseconds(250));   // at most max_linger
    fake_now = until;
    CHECK(t.store().ready());
    t.store().advance_batches(t.done);
    REQUIRE(t.store().in_flight());
    CHECK(t.finish() == 1);
}

TEST_CASE("without a linger the next batch starts in the round that answered the one before") {
    lingering_store t;
    t.store().set_batch_linger(std::chrono::nanoseconds(0));
    t.batch_in_flight(2, 1);
    CHECK(t.finish() == 2);
    CHECK(t.store().in_flight());   // the waiting write's batch began at once
    CHECK(t.finish() == 1);
}

TEST_CASE("a batch alone after an idle spell does not linger") {
    lingering_store t;
    t.put();
    CHECK(t.store().ready());
    t.store().advance_batches(t.done);
    CHECK(t.store().in_flight());
    CHECK(t.finish() == 1);
}
