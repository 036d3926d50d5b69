#include <doctest.h>

#include <string>

#include "store/shard_store.hpp"
#include "store_test_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

TEST_CASE("without a hold the durable snapshot is the one readers see") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    CHECK(store.current() == store.durable());
    CHECK(value_of(store.current()->find("a")) == "one");
}

TEST_CASE("with a hold a durable write stays unseen by readers until shown") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    store.hold_visibility();
    auto r = apply_one(store, put_op("a", "one"));
    CHECK(r.outcome == write_outcome::created);
    CHECK(store.current()->find("a") == nullptr);
    REQUIRE(store.durable()->find("a"));
    CHECK(store.durable()->high_version() == 1);
    CHECK(store.held_snapshots() == 1);
    CHECK_FALSE(store.show_through(0));
    CHECK(store.show_through(1));
    CHECK(value_of(store.current()->find("a")) == "one");
    CHECK(store.current() == store.durable());
    CHECK(store.held_snapshots() == 0);
}

TEST_CASE("showing through a version shows the newest held snapshot at or below it") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    store.hold_visibility();
    apply_one(store, put_op("a", "one"));  // version 1
    apply_one(store, put_op("b", "two"));  // 2
    apply_one(store, put_op("c", "three"));  // 3
    CHECK(store.held_snapshots() == 3);
    CHECK(store.show_through(2));
    CHECK(store.current()->high_version() == 2);
    CHECK(store.current()->find("b"));
    CHECK(store.current()->find("c") == nullptr);
    CHECK(store.held_snapshots() == 1);
    CHECK(store.show_through(10));
    CHECK(store.current()->find("c"));
}

TEST_CASE("snapshots shown and superseded under a hold are reclaimed and the rest freed with the store") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    store.hold_visibility();
    apply_one(store, put_op("a", "one"));
    apply_one(store, put_op("a", "two"));
    apply_one(store, put_op("a", "three"));
    CHECK(store.reclaim() == 0);  // the shown one and the held ones are all live
    CHECK(store.show_through(2));
    CHECK(store.reclaim() == 2);  // the first shown and the skipped version 1
    CHECK(value_of(store.current()->find("a")) == "two");
    // the guard checks, after the store, that the held version 3 was freed with it
}
