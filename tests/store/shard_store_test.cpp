#include <doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "store/doc_tree.hpp"
#include "store/shard_store.hpp"
#include "store_test_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

std::vector<std::string> keys_of(const snapshot& s, std::string_view from = {}, bool exclusive = false) {
    std::vector<std::string> keys;
    snapshot::cursor c;
    for (c.seek(s, from, exclusive); c.valid(); c.next()) keys.emplace_back(c.doc().key());
    return keys;
}

}  // namespace

TEST_CASE("a new store publishes an empty snapshot") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    const snapshot* s = store.current();
    REQUIRE(s);
    CHECK(s->document_count() == 0);
    CHECK(s->value_bytes() == 0);
    CHECK(s->sequence() == 0);
    CHECK(s->find("a") == nullptr);
    snapshot::cursor c;
    c.seek(*s, "", false);
    CHECK_FALSE(c.valid());
    CHECK(store.next_version() == 1);
    CHECK_FALSE(store.has_pending());
}

TEST_CASE("putting a missing key creates it with the next version") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 100);
    auto r = apply_one(store, put_op("a", "one", {}, 7));
    CHECK(r.tag == 7);
    CHECK(r.outcome == write_outcome::created);
    CHECK(r.version == 100);
    CHECK(store.next_version() == 101);
    const document* doc = store.current()->find("a");
    REQUIRE(doc);
    CHECK(doc->value() == "one");
    CHECK(doc->version() == 100);
    CHECK(store.current()->sequence() == 1);
}

TEST_CASE("putting an existing key replaces it with a new version") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    auto r = apply_one(store, put_op("a", "two"));
    CHECK(r.outcome == write_outcome::replaced);
    CHECK(r.version == 2);
    CHECK(value_of(store.current()->find("a")) == "two");
    CHECK(store.current()->document_count() == 1);
    CHECK(store.current()->value_bytes() == 3);
    CHECK(store.reclaim() == 2);
    CHECK(guard.made() == 1);
}

TEST_CASE("erasing an existing key deletes it and consumes a version") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    auto r = apply_one(store, erase_op("a", {}, 3));
    CHECK(r.tag == 3);
    CHECK(r.outcome == write_outcome::deleted);
    CHECK(r.version == 2);
    CHECK(store.next_version() == 3);
    CHECK(store.current()->find("a") == nullptr);
    CHECK(store.current()->document_count() == 0);
    CHECK(store.current()->value_bytes() == 0);
    store.reclaim();
    CHECK(guard.made() == static_cast<std::int64_t>(store.deletions_held()));  // the key's tombstone
}

TEST_CASE("erasing a missing key reports not found and publishes nothing") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    const snapshot* before = store.current();
    auto r = apply_one(store, erase_op("nope"));
    CHECK(r.outcome == write_outcome::not_found);
    CHECK(r.version == 0);
    CHECK(store.current() == before);
    CHECK(store.next_version() == 1);
}

TEST_CASE("a key re-created after a delete gets a version it never had") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    auto created = apply_one(store, put_op("a", "1"));
    auto deleted = apply_one(store, erase_op("a"));
    auto again = apply_one(store, put_op("a", "1"));
    CHECK(created.version == 1);
    CHECK(deleted.version == 2);
    CHECK(again.outcome == write_outcome::created);
    CHECK(again.version == 3);
}

TEST_CASE("results come back in submission order with their tags") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    std::vector<write_op> ops;
    ops.push_back(put_op("b", "x", {}, 10));
    ops.push_back(put_op("a", "y", {}, 11));
    ops.push_back(erase_op("b", {}, 12));
    ops.push_back(erase_op("b", {}, 13));
    ops.push_back(put_op("a", "z", {}, 14));
    auto done = apply(store, std::move(ops));
    REQUIRE(done.size() == 5);
    CHECK(done[0].tag == 10);
    CHECK(done[0].outcome == write_outcome::created);
    CHECK(done[0].version == 1);
    CHECK(done[1].outcome == write_outcome::created);
    CHECK(done[1].version == 2);
    CHECK(done[2].outcome == write_outcome::deleted);
    CHECK(done[2].version == 3);
    CHECK(done[3].outcome == write_outcome::not_found);
    CHECK(done[4].tag == 14);
    CHECK(done[4].outcome == write_outcome::replaced);
    CHECK(done[4].version == 4);
    CHECK(store.current()->sequence() == 1);
    CHECK(keys_of(*store.current()) == std::vector<std::string>{"a"});
    CHECK(value_of(store.current()->find("a")) == "z");
}

TEST_CASE("If-Match with the current version wins and a stale one fails with the current version") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    auto ok = apply_one(store, put_op("a", "two", if_match({9, 1})));
    CHECK(ok.outcome == write_outcome::replaced);
    CHECK(ok.version == 2);
    auto stale = apply_one(store, put_op("a", "three", if_match({1})));
    CHECK(stale.outcome == write_outcome::precondition_failed);
    CHECK(stale.version == 2);
    CHECK(stale.current_exists);
    CHECK(value_of(store.current()->find("a")) == "two");
    store.reclaim();
    CHECK(guard.made() == 1);
}

TEST_CASE("If-Match * fails on a missing key and reports that it does not exist") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    auto r = apply_one(store, put_op("a", "one", if_match_any()));
    CHECK(r.outcome == write_outcome::precondition_failed);
    CHECK(r.version == 0);
    CHECK_FALSE(r.current_exists);
    auto e = apply_one(store, erase_op("a", if_match_any()));
    CHECK(e.outcome == write_outcome::precondition_failed);
    apply_one(store, put_op("a", "one"));
    auto ok = apply_one(store, put_op("a", "two", if_match_any()));
    CHECK(ok.outcome == write_outcome::replaced);
}

TEST_CASE("If-None-Match * creates a key only once within one batch") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    std::vector<write_op> ops;
    ops.push_back(put_op("a", "first", if_none_match_any()));
    ops.push_back(put_op("a", "second", if_none_match_any()));
    auto done = apply(store, std::move(ops));
    REQUIRE(done.size() == 2);
    CHECK(done[0].outcome == write_outcome::created);
    CHECK(done[1].outcome == write_outcome::precondition_failed);
    CHECK(done[1].version == done[0].version);
    CHECK(done[1].current_exists);
    CHECK(value_of(store.current()->find("a")) == "first");
}

TEST_CASE("If-None-Match with a list refuses a write over a listed version") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    CHECK(apply_one(store, put_op("a", "x", if_none_match({1}))).outcome == write_outcome::precondition_failed);
    CHECK(apply_one(store, put_op("a", "y", if_none_match({5}))).outcome == write_outcome::replaced);
    CHECK(apply_one(store, put_op("b", "z", if_none_match({5}))).outcome == write_outcome::created);
}

TEST_CASE("in one batch the second If-Match write with the same version loses") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    auto v = apply_one(store, put_op("a", "base")).version;
    std::vector<write_op> ops;
    ops.push_back(put_op("a", "winner", if_match({v}), 1));
    ops.push_back(put_op("a", "loser", if_match({v}), 2));
    ops.push_back(erase_op("a", if_match({v}), 3));
    auto done = apply(store, std::move(ops));
    REQUIRE(done.size() == 3);
    CHECK(done[0].outcome == write_outcome::replaced);
    CHECK(done[1].outcome == write_outcome::precondition_failed);
    CHECK(done[1].version == done[0].version);
    CHECK(done[1].current_exists);
    CHECK(done[2].outcome == write_outcome::precondition_failed);
    CHECK(done[2].version == done[0].version);
    CHECK(value_of(store.current()->find("a")) == "winner");
    store.reclaim();
    CHECK(guard.made() == 1);
}

TEST_CASE("a failed conditional put releases its document") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    auto r = apply_one(store, put_op("a", "one", if_match({1})));
    CHECK(r.outcome == write_outcome::precondition_failed);
    CHECK(guard.made() == 0);
}

TEST_CASE("a batch without a successful change publishes no snapshot but still answers") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    const snapshot* before = store.current();
    std::vector<write_op> ops;
    ops.push_back(put_op("a", "x", if_none_match_any()));
    ops.push_back(erase_op("b"));
    ops.push_back(erase_op("a", if_match({99})));
    std::vector<write_result> done;
    for (auto& op : ops) store.submit(std::move(op));
    CHECK(store.has_pending());
    auto stats = store.advance_batches(done);
    CHECK_FALSE(store.has_pending());
    CHECK(stats.writes == 3);
    CHECK(stats.bytes == 0);
    CHECK(done.size() == 3);
    CHECK(store.current() == before);
    CHECK(store.current()->sequence() == 1);
    CHECK(store.next_version() == 2);
}

TEST_CASE("flushing with nothing pending does nothing") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    std::vector<write_result> done;
    auto stats = store.advance_batches(done);
    CHECK(stats.writes == 0);
    CHECK(done.empty());
    CHECK(store.current()->sequence() == 0);
}

TEST_CASE("batch stats count the writes and the value bytes written") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    store.submit(put_op("a", "12345"));
    store.submit(put_op("b", "123"));
    store.submit(put_op("b", "1", if_match({42})));
    store.submit(erase_op("a"));
    std::vector<write_result> done;
    auto stats = store.advance_batches(done);
    CHECK(stats.writes == 4);
    CHECK(stats.bytes == 8);
}

TEST_CASE("document count and value bytes follow puts, replacements and erases") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "1234"));
    apply_one(store, put_op("b", "12"));
    CHECK(store.current()->document_count() == 2);
    CHECK(store.current()->value_bytes() == 6);
    apply_one(store, put_op("a", "1"));
    CHECK(store.current()->document_count() == 2);
    CHECK(store.current()->value_bytes() == 3);
    apply_one(store, erase_op("b"));
    CHECK(store.current()->document_count() == 1);
    CHECK(store.current()->value_bytes() == 1);
}

TEST_CASE("creating a document reports one more document and its value's bytes") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    auto r = apply_one(store, put_op("a", "12345"));
    CHECK(r.outcome == write_outcome::created);
    CHECK(r.documents_delta == 1);
    CHECK(r.bytes_delta == 5);
}

TEST_CASE("replacing a value with a bigger one reports the growth and no new document") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "12"));
    auto r = apply_one(store, put_op("a", "1234567"));
    CHECK(r.outcome == write_outcome::replaced);
    CHECK(r.documents_delta == 0);
    CHECK(r.bytes_delta == 5);
}

TEST_CASE("replacing a value with a smaller one reports a negative byte change") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "1234567"));
    auto r = apply_one(store, put_op("a", ""));
    CHECK(r.outcome == write_outcome::replaced);
    CHECK(r.documents_delta == 0);
    CHECK(r.bytes_delta == -7);
}

TEST_CASE("deleting a document reports one document less and its value's bytes gone") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "1234"));
    auto r = apply_one(store, erase_op("a"));
    CHECK(r.outcome == write_outcome::deleted);
    CHECK(r.documents_delta == -1);
    CHECK(r.bytes_delta == -4);
}

TEST_CASE("a write whose precondition fails reports no change") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "1234"));
    auto put = apply_one(store, put_op("a", "123456789", if_match({99})));
    CHECK(put.outcome == write_outcome::precondition_failed);
    CHECK(put.documents_delta == 0);
    CHECK(put.bytes_delta == 0);
    auto create = apply_one(store, put_op("b", "123", if_match_any()));
    CHECK(create.outcome == write_outcome::precondition_failed);
    CHECK(create.documents_delta == 0);
    CHECK(create.bytes_delta == 0);
    auto erase = apply_one(store, erase_op("a", if_match({99})));
    CHECK(erase.outcome == write_outcome::precondition_failed);
    CHECK(erase.documents_delta == 0);
    CHECK(erase.bytes_delta == 0);
}

TEST_CASE("deleting a missing key reports no change") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    auto r = apply_one(store, erase_op("nope"));
    CHECK(r.outcome == write_outcome::not_found);
    CHECK(r.documents_delta == 0);
    CHECK(r.bytes_delta == 0);
}

TEST_CASE("the usage changes of one batch add up to the change of the snapshot's totals") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("x", "123456"));
    std::vector<write_op> ops;
    ops.push_back(put_op("a", "12"));                         // +1, +2
    ops.push_back(put_op("a", "12345"));                      // 0, +3 (against the write before it)
    ops.push_back(erase_op("x"));                             // -1, -6
    ops.push_back(erase_op("x"));                             // not found: 0, 0
    ops.push_back(put_op("a", "1", if_match({1})));           // failed: 0, 0
    ops.push_back(erase_op("a"));                             // -1, -5
    ops.push_back(put_op("b", "1234"));                       // +1, +4
    auto done = apply(store, std::move(ops));
    REQUIRE(done.size() == 7);
    const std::vector<std::int32_t> documents = {1, 0, -1, 0, 0, -1, 1};
    const std::vector<std::int64_t> bytes = {2, 3, -6, 0, 0, -5, 4};
    std::int64_t documents_sum = 0, bytes_sum = 0;
    for (std::size_t i = 0; i < done.size(); ++i) {
        CHECK(done[i].documents_delta == documents[i]);
        CHECK(done[i].bytes_delta == bytes[i]);
        documents_sum += done[i].documents_delta;
        bytes_sum += done[i].bytes_delta;
    }
    CHECK(static_cast<std::int64_t>(store.current()->document_count()) == 1 + documents_sum);
    CHECK(static_cast<std::int64_t>(store.current()->value_bytes()) == 6 + bytes_sum);
}

TEST_CASE("a snapshot keeps its contents while later batches change the store") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    for (char c = 'a'; c <= 'z'; ++c) apply_one(store, put_op(std::string(1, c), "old"));
    epochs.begin_round(0);
    const snapshot* old = store.current();
    std::vector<write_op> ops;
    for (char c = 'a'; c <= 'z'; c += 2) ops.push_back(put_op(std::string(1, c), "new"));
    for (char c = 'b'; c <= 'z'; c += 4) ops.push_back(erase_op(std::string(1, c)));
    apply(store, std::move(ops));
    CHECK(store.reclaim() == 26);
    CHECK(old->document_count() == 26);
    for (char c = 'a'; c <= 'z'; ++c) CHECK(value_of(old->find(std::string(1, c))) == "old");
    CHECK(keys_of(*old).size() == 26);
    CHECK(store.current()->document_count() == 26 - 7);
    CHECK(value_of(store.current()->find("c")) == "new");
    CHECK(store.current()->find("f") == nullptr);
    CHECK(value_of(store.current()->find("d")) == "old");
    epochs.quiesce(0);
    CHECK(store.reclaim() == 1);
    CHECK(guard.made() == static_cast<std::int64_t>(26 - 7 + store.deletions_held()));  // + tombstones
}

TEST_CASE("reclaim frees nothing while a reader is in a round that began before the replacement") {
    live_document_guard guard;
    reader_epochs epochs(2);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    CHECK(store.reclaim() == 1);
    epochs.begin_round(1);
    const snapshot* held = store.current();
    apply_one(store, put_op("a", "two"));
    apply_one(store, put_op("a", "three"));
    CHECK(store.reclaim() == 0);
    CHECK(guard.made() == 3);
    CHECK(value_of(held->find("a")) == "one");
    epochs.begin_round(0);
    epochs.quiesce(0);
    CHECK(store.reclaim() == 0);
    epochs.quiesce(1);
    CHECK(store.reclaim() == 2);
    CHECK(guard.made() == 1);
}

TEST_CASE("a reader that begins a new round releases the snapshots retired before it") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    epochs.begin_round(0);
    apply_one(store, put_op("a", "one"));
    CHECK(store.reclaim() == 0);
    epochs.begin_round(0);
    CHECK(store.current()->find("a"));
    apply_one(store, put_op("a", "two"));
    CHECK(store.reclaim() == 1);
    epochs.quiesce(0);
    CHECK(store.reclaim() == 1);
}

TEST_CASE("a document retained by a reader outlives the snapshots that held it") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    epochs.begin_round(0);
    const document* doc = store.current()->find("a");
    doc->retain();
    epochs.quiesce(0);
    apply_one(store, erase_op("a"));
    store.reclaim();
    CHECK(guard.made() == 1 + static_cast<std::int64_t>(store.deletions_held()));  // + the tombstone
    CHECK(doc->value() == "one");
    doc->release();
    CHECK(guard.made() == static_cast<std::int64_t>(store.deletions_held()));
}

TEST_CASE("destroying the store frees every document, pending and retired ones included") {
    live_document_guard guard;
    reader_epochs epochs(1);
    {
        shard_store store(epochs, 1);
        epochs.begin_round(0);
        for (int i = 0; i < 100; ++i) apply_one(store, put_op(std::to_string(i % 30), "v"));
        store.submit(put_op("pending", "p"));
        store.submit(erase_op("1"));
        CHECK(guard.made() > 30);
        epochs.quiesce(0);
    }
    CHECK(guard.made() == 0);
}

TEST_CASE("the cursor seeks inclusive and exclusive lower bounds and walks in key order") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    std::vector<write_op> ops;
    for (std::string k : {"b", "d", "f", "h", "ha", "hb", "i"}) ops.push_back(put_op(k, k));
    apply(store, std::move(ops));
    const snapshot& s = *store.current();
    using v = std::vector<std::string>;
    CHECK(keys_of(s) == v{"b", "d", "f", "h", "ha", "hb", "i"});
    CHECK(keys_of(s, "d") == v{"d", "f", "h", "ha", "hb", "i"});
    CHECK(keys_of(s, "d", true) == v{"f", "h", "ha", "hb", "i"});
    CHECK(keys_of(s, "e") == v{"f", "h", "ha", "hb", "i"});
    CHECK(keys_of(s, "e", true) == v{"f", "h", "ha", "hb", "i"});
    CHECK(keys_of(s, "h", true) == v{"ha", "hb", "i"});
    CHECK(keys_of(s, "a") == keys_of(s));
    CHECK(keys_of(s, "i", true).empty());
    CHECK(keys_of(s, "z").empty());
}

TEST_CASE("keys compare byte-wise as unsigned bytes, shorter prefix first") {
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    std::vector<std::string> keys = {std::string("a\0b", 3), "a", std::string("a\0", 2), "\xff", "a\x7f", "a\x80", "ab",
                                     std::string("app\0key", 7), std::string("ap\0zzz", 6)};
    std::vector<write_op> ops;
    for (auto& k : keys) ops.push_back(put_op(k, k));
    apply(store, std::move(ops));
    std::vector<std::string> expected = {"a",    std::string("a\0", 2), std::string("a\0b", 3), "ab",
                                         std::string("ap\0zzz", 6), std::string("app\0key", 7), "a\x7f",
                                         "a\x80", "\xff"};
    CHECK(keys_of(*store.current()) == expected);
    for (auto& k : keys) CHECK(value_of(store.current()->find(k)) == k);
    CHECK(store.current()->find(std::string("a\0c", 3)) == nullptr);
}

TEST_CASE("a large tree stays balanced and is freed without exhausting the stack") {
    live_document_guard guard;
    constexpr int n = 200'000;
    reader_epochs epochs(1);
    {
        shard_store store(epochs, 1);
        for (int base = 0; base < n; base += 5000) {
            std::vector<write_op> ops;
            char key[16];
            for (int i = base; i < base + 5000; ++i) {
                std::snprintf(key, sizeof key, "%09d", i);
                ops.push_back(put_op(key, ""));
            }
            apply(store, std::move(ops));
            store.reclaim();
        }
        const snapshot& s = *store.current();
        CHECK(s.document_count() == n);
        auto root = doc_tree::root(s);
        CHECK(doc_tree::check(root) == n);
        CHECK(doc_tree::height(root) <= 1.45 * std::log2(n + 2.0));
        std::vector<write_op> ops;
        for (int i = 0; i < n; i += 2) {
            char key[16];
            std::snprintf(key, sizeof key, "%09d", i);
            ops.push_back(erase_op(key));
        }
        apply(store, std::move(ops));
        CHECK(store.reclaim() == 1);
        CHECK(doc_tree::check(doc_tree::root(*store.current())) == n / 2);
        CHECK(doc_tree::height(doc_tree::root(*store.current())) <= 1.45 * std::log2(n / 2 + 2.0));
        CHECK(guard.made() == n / 2 + static_cast<std::int64_t>(store.deletions_held()));  // + tombstones
    }
}

TEST_CASE("a store keeps the documents it applies, and the tombstones it makes, in its pool") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    apply_one(store, put_op("b", "two"));
    const document* a = store.current()->find("a");
    REQUIRE(a);
    CHECK(a->pooled());
    CHECK(a->value() == "one");
    apply_one(store, erase_op("b"));
    store.reclaim();
    CHECK(store.document_memory().live() == 2);  // "a" and the tombstone of "b"
}

TEST_CASE("a steady overwrite of the same keys reuses the store's document memory") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    for (int round = 0; round < 300; ++round) {
        std::vector<write_op> ops;
        const std::string value(16 + 8 * (round % 3), 'v');  // three classes in turn
        for (int k = 0; k < 100; ++k) ops.push_back(put_op("key" + std::to_string(k), value));
        apply(store, std::move(ops));
        store.reclaim();
    }
    CHECK(store.document_memory().live() == 100);
    CHECK(store.document_memory().reserved_bytes() == document_slab_bytes);
}

TEST_CASE("every document of a store, applied tombstones included, goes back to its pool when the store is destroyed") {
    live_document_guard guard;  // checks at the end that nothing is left
    reader_epochs epochs(1);
    {
        shard_store store(epochs, 1);
        for (int k = 0; k < 1000; ++k) apply_one(store, put_op("key" + std::to_string(k), "value"));
        apply_one(store, erase_op("key7"));
        store.submit(put_op("pending", "never applied"));
        CHECK(store.document_memory().live() > 0);
    }  // the pool checks at its destruction that every block came back (PERCORE_ASSERT)
}

// Same versions on every board (SPEC §10; shard_store.hpp "Versions"): a follower's copy keeps its
// primary's ETag version while the store gives it the next local version as its feed position.
TEST_CASE("a copy keeps its copied ETag version and gets the next local version as its feed position") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 10);
    auto r = apply_one(store, copy_op("k", "from the primary", 5000));
    REQUIRE(r.outcome == write_outcome::created);
    CHECK(r.version == 5000);
    const document* d = store.current()->find("k");
    REQUIRE(d);
    CHECK(d->copied());
    CHECK(d->version() == 10);
    CHECK(d->etag_version() == 5000);
    CHECK(value_of(d) == "from the primary");
    CHECK(store.current()->high_version() == 10);
}

TEST_CASE("a copy raises the next version above its ETag version, so later writes get higher ETags") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 10);
    REQUIRE(apply_one(store, copy_op("k", "copied", 5000)).outcome == write_outcome::created);
    CHECK(store.next_version() == 5001);
    auto own = apply_one(store, put_op("other", "a write of this store"));
    CHECK(own.version == 5001);
    CHECK(store.current()->find("other")->etag_version() == 5001);
    CHECK_FALSE(store.current()->find("other")->copied());
    // a copy with an ETag version below the next one leaves it where it is
    REQUIRE(apply_one(store, copy_op("low", "copied", 20)).outcome == write_outcome::created);
    CHECK(store.next_version() == 5003);
}

TEST_CASE("If-Match on a copy matches its ETag version, not its local version") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 10);
    REQUIRE(apply_one(store, copy_op("k", "copied", 5000)).outcome == write_outcome::created);
    auto by_local = apply_one(store, put_op("k", "v2", if_match({10})));
    CHECK(by_local.outcome == write_outcome::precondition_failed);
    CHECK(by_local.version == 5000);  // the 412's ETag is the one clients saw
    CHECK(apply_one(store, put_op("k", "v2", if_none_match({5000}))).outcome == write_outcome::precondition_failed);
    auto by_etag = apply_one(store, put_op("k", "v2", if_match({5000})));
    CHECK(by_etag.outcome == write_outcome::replaced);
    CHECK(by_etag.version > 5000);
}

TEST_CASE("watched_sequence moves with the writes under the watched prefix only") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    store.watch_keys("w/");
    apply_one(store, put_op("w/a", "one"));
    const std::uint64_t after_watched = store.current()->sequence();
    CHECK(store.current()->watched_sequence() == after_watched);
    apply_one(store, put_op("x", "two"));
    CHECK(store.current()->sequence() > after_watched);
    CHECK(store.current()->watched_sequence() == after_watched);
    apply_one(store, erase_op("w/a"));
    CHECK(store.current()->watched_sequence() == store.current()->sequence());
    CHECK(store.current()->sequence() > after_watched);
}

TEST_CASE("without a watched prefix watched_sequence is every publication's sequence") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    apply_one(store, put_op("a", "one"));
    apply_one(store, put_op("b", "two"));
    CHECK(store.current()->sequence() == 2);
    CHECK(store.current()->watched_sequence() == 2);
}
