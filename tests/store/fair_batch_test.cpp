// Fair batches (shard_store.hpp contract, limits.hpp max_class_batch_bytes): while writes of several
// turn classes (apps) wait, a batch takes them in turns, one write per class, each class's writes in
// their arrival order, and one class's records stop at max_class_batch_bytes while another class
// still has writes waiting. The byte bounds apply only with a log (they bound its records), so most
// cases run on a store with its log in a fault_env.
#include <doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "store/log_format.hpp"
#include "store/shard_store.hpp"
#include "store_test_util.hpp"
#include "tests/store/durability_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

const std::string dir = "/data/shard-000";
const std::string octet = "application/octet-stream";

void make_dirs(fault_env& fe) {
    REQUIRE(fe.create_directory("/data"));
    REQUIRE(fe.create_directory(dir));
    REQUIRE(fe.sync_directory("/data"));
}

// Tags name the class and the write's place in its class's arrival order.
constexpr std::uint64_t tag_of(std::uint32_t turn_class, std::uint64_t serial) { return std::uint64_t{turn_class} << 32 | serial; }
constexpr std::uint32_t class_of(std::uint64_t tag) { return static_cast<std::uint32_t>(tag >> 32); }
constexpr std::uint64_t serial_of(std::uint64_t tag) { return tag & 0xFFFFFFFFu; }

// Keys of one class have one length (so do their records, for one value size).
std::string key_of(std::uint32_t turn_class, std::uint64_t serial) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "k%06llu", static_cast<unsigned long long>(serial));
    return "app" + std::to_string(turn_class) + std::string(1, '\0') + buf;
}

write_op class_put(std::uint32_t turn_class, std::uint64_t serial, std::size_t value_bytes, std::string key = {}) {
    if (key.empty()) key = key_of(turn_class, serial);
    write_op op = put_op(key, std::string(value_bytes, static_cast<char>('a' + serial % 26)), {}, tag_of(turn_class, serial));
    op.turn_class = turn_class;
    return op;
}

std::uint64_t put_record_bytes(std::uint32_t turn_class, std::uint64_t serial, std::size_t value_bytes) {
    return record_bytes(key_of(turn_class, serial).size(), octet.size(), value_bytes);
}

// The results of the next batch alone: forms it (unless it is in flight already), waits for its
// sync and publishes it. The call that publishes it forms the following batch, whose results come
// with the next call (every batch here changes something, so none is answered at once).
std::vector<write_result> next_batch(shard_store& s) {
    std::vector<write_result> done;
    if (!s.in_flight()) s.advance_batches(done);
    REQUIRE(s.in_flight());
    REQUIRE(done.empty());
    wait_for_log(s);
    s.advance_batches(done);
    return done;
}

std::size_t count_of_class(const std::vector<write_result>& done, std::uint32_t turn_class) {
    return static_cast<std::size_t>(
        std::count_if(done.begin(), done.end(), [&](const write_result& r) { return class_of(r.tag) == turn_class; }));
}

}  // namespace

TEST_CASE("a batch takes another class's single write although one class has more pending than fits a batch") {
    live_document_guard guard;
    fault_env fe(1);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    constexpr std::size_t a_writes = 300;
    constexpr std::size_t value = 64 * 1024;
    REQUIRE(a_writes * put_record_bytes(1, 0, value) > 2 * max_batch_bytes);
    for (std::uint64_t i = 0; i < a_writes; ++i) (*s)->submit(class_put(1, i, value));
    (*s)->submit(class_put(2, 0, 100));

    auto first = next_batch(**s);
    CHECK(first.size() < a_writes);
    CHECK(count_of_class(first, 2) == 1);
    auto b = std::find_if(first.begin(), first.end(), [](const write_result& r) { return class_of(r.tag) == 2; });
    REQUIRE(b != first.end());
    CHECK(b->outcome == write_outcome::created);
    // in the first round of turns: right after the first class's first write
    CHECK(b - first.begin() <= 1);
    CHECK((*s)->current()->find(key_of(2, 0)) != nullptr);

    auto rest = drain(**s);
    CHECK(first.size() + rest.size() == a_writes + 1);
    s.reset();
}

TEST_CASE("the writes of each class stay in their arrival order across batches") {
    live_document_guard guard;
    fault_env fe(2);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    // three classes, different sizes; each class also overwrites one key of its own again and again
    struct spec {
        std::uint32_t turn_class;
        std::size_t writes;
        std::size_t value;
    };
    const std::vector<spec> specs = {{7, 150, 48 * 1024}, {3, 300, 9 * 1024}, {12, 40, 200 * 1024}};
    std::uint64_t submitted = 0;
    for (std::uint64_t i = 0; i < 300; ++i)
        for (const spec& c : specs) {
            if (i >= c.writes) continue;
            std::string key = i % 3 == 0 ? key_of(c.turn_class, 999999) : std::string();
            (*s)->submit(class_put(c.turn_class, i, c.value, key));
            ++submitted;
        }
    std::vector<write_result> all;
    std::size_t batches = 0;
    while ((*s)->in_flight() || (*s)->has_pending()) {
        auto done = next_batch(**s);
        ++batches;
        all.insert(all.end(), done.begin(), done.end());
    }
    CHECK(batches >= 3);
    REQUIRE(all.size() == submitted);
    std::map<std::uint32_t, std::uint64_t> next_serial;
    std::map<std::uint32_t, std::uint64_t> last_version;
    for (const write_result& r : all) {
        CHECK(serial_of(r.tag) == next_serial[class_of(r.tag)]++);
        CHECK(r.version > last_version[class_of(r.tag)]);
        last_version[class_of(r.tag)] = r.version;
    }
    for (const spec& c : specs) {
        CHECK(next_serial[c.turn_class] == c.writes);
        // the overwritten key holds its class's last write to it
        const document* d = (*s)->current()->find(key_of(c.turn_class, 999999));
        REQUIRE(d);
        CHECK(value_bytes_of(*(*s)->current(), *d) == std::string(c.value, static_cast<char>('a' + ((c.writes - 1) / 3 * 3) % 26)));
    }
    s.reset();
}

TEST_CASE("one class alone fills each batch with the arrival-order prefix up to the batch bound") {
    live_document_guard guard;
    fault_env fe(3);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    constexpr std::size_t writes = 300;
    constexpr std::size_t value = 40 * 1024;
    for (std::uint64_t i = 0; i < writes; ++i) (*s)->submit(class_put(5, i, value));
    // as before fair batches: writes are taken while the records stay below max_batch_bytes
    const std::uint64_t record = put_record_bytes(5, 0, value);
    const std::uint64_t per_batch = (max_batch_bytes + record - 1) / record;
    std::uint64_t serial = 0;
    std::size_t batches = 0;
    while ((*s)->in_flight() || (*s)->has_pending()) {
        auto done = next_batch(**s);
        ++batches;
        REQUIRE_FALSE(done.empty());
        std::uint64_t bytes = 0;
        for (const write_result& r : done) {
            CHECK(r.outcome == write_outcome::created);
            CHECK(serial_of(r.tag) == serial++);
            bytes += record;
        }
        // full: the last write crossed the bound, the one before it had not (the last batch: the rest)
        if (serial < writes) {
            CHECK(bytes >= max_batch_bytes);
            CHECK(bytes - record < max_batch_bytes);
        }
    }
    CHECK(serial == writes);
    CHECK(batches == (writes + per_batch - 1) / per_batch);
    s.reset();
}

TEST_CASE("a class's share of a batch stops at its bound while another class has writes waiting") {
    live_document_guard guard;
    fault_env fe(4);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    // A's writes are 16 times B's: taking turns one write each, A alone would fill most of the batch
    constexpr std::size_t a_value = 1024 * 1024, b_value = 64 * 1024;
    for (std::uint64_t i = 0; i < 20; ++i) (*s)->submit(class_put(1, i, a_value));
    for (std::uint64_t i = 0; i < 200; ++i) (*s)->submit(class_put(2, i, b_value));

    auto first = next_batch(**s);
    std::uint64_t a_bytes = 0, b_bytes = 0;
    for (const write_result& r : first)
        (class_of(r.tag) == 1 ? a_bytes : b_bytes) +=
            put_record_bytes(class_of(r.tag), serial_of(r.tag), class_of(r.tag) == 1 ? a_value : b_value);
    const std::uint64_t a_record = put_record_bytes(1, 0, a_value);
    // A took writes until it reached its bound (the last one crossing it), B the rest of the batch
    CHECK(a_bytes >= max_class_batch_bytes);
    CHECK(a_bytes - a_record < max_class_batch_bytes);
    CHECK(a_bytes + b_bytes >= max_batch_bytes);
    CHECK(count_of_class(first, 2) < 200);  // B still had writes waiting when the batch closed
    s.reset();
}

TEST_CASE("a class fills the rest of a batch once no other class has writes waiting") {
    live_document_guard guard;
    fault_env fe(5);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    constexpr std::size_t a_value = 1024 * 1024;
    for (std::uint64_t i = 0; i < 20; ++i) (*s)->submit(class_put(1, i, a_value));
    (*s)->submit(class_put(2, 0, 10));

    auto first = next_batch(**s);
    CHECK(count_of_class(first, 2) == 1);
    const std::uint64_t a_record = put_record_bytes(1, 0, a_value);
    const std::uint64_t b_record = put_record_bytes(2, 0, 10);
    std::uint64_t a_bytes = count_of_class(first, 1) * a_record;
    CHECK(a_bytes > max_class_batch_bytes);
    // full as a batch of one class would be: the last write crossed the bound
    CHECK(a_bytes + b_record >= max_batch_bytes);
    CHECK(a_bytes + b_record - a_record < max_batch_bytes);
    s.reset();
}

TEST_CASE("classes whose every write fills a batch take the batches in turns") {
    live_document_guard guard;
    fault_env fe(6);
    make_dirs(fe);
    auto s = open_store(fe, dir);
    REQUIRE(s->error.empty());
    constexpr std::size_t big = max_batch_bytes;  // with its record header: more than a batch
    for (std::uint64_t i = 0; i < 2; ++i) (*s)->submit(class_put(4, i, big));
    for (std::uint64_t i = 0; i < 2; ++i) (*s)->submit(class_put(9, i, big));
    std::vector<std::uint32_t> order;
    while ((*s)->in_flight() || (*s)->has_pending()) {
        auto done = next_batch(**s);
        REQUIRE(done.size() == 1);
        order.push_back(class_of(done.front().tag));
    }
    CHECK(order == std::vector<std::uint32_t>{4, 9, 4, 9});
    s.reset();
}

TEST_CASE("conditional writes of different classes on one key still have one winner") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    auto base = apply_one(store, put_op("k", "base"));
    std::vector<write_op> ops;
    for (std::uint32_t c = 1; c <= 4; ++c) {
        ops.push_back(put_op("k", "from " + std::to_string(c), if_match({base.version}), c));
        ops.back().turn_class = c;
        ops.push_back(put_op("new", "from " + std::to_string(c), if_none_match_any(), 10 + c));
        ops.back().turn_class = c;
    }
    auto done = apply(store, std::move(ops));
    REQUIRE(done.size() == 8);
    const write_result* winner = nullptr;
    const write_result* creator = nullptr;
    for (const write_result& r : done) {
        if (r.outcome == write_outcome::replaced) {
            CHECK(winner == nullptr);
            winner = &r;
        } else if (r.outcome == write_outcome::created) {
            CHECK(creator == nullptr);
            creator = &r;
        } else {
            CHECK(r.outcome == write_outcome::precondition_failed);
            CHECK(r.current_exists);
        }
    }
    REQUIRE(winner);
    REQUIRE(creator);
    // the losers saw the winners' versions: the state left by the writes before them in the batch
    for (const write_result& r : done)
        if (r.outcome == write_outcome::precondition_failed) CHECK(r.version == (r.tag < 10 ? winner->version : creator->version));
    CHECK(value_of(store.current()->find("k")) == "from " + std::to_string(winner->tag));
    CHECK(value_of(store.current()->find("new")) == "from " + std::to_string(creator->tag - 10));
}
