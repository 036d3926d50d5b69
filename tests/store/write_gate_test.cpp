#include <doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "store/shard_store.hpp"
#include "store/write_gate.hpp"
#include "store_test_util.hpp"
#include "tests/store/durability_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

// A gate over documents and bytes, as the composition's app quota is, recording what it was asked.
struct counting_gate final : write_gate {
    std::int64_t documents = 0, bytes = 0;
    std::int64_t max_documents = 1 << 30, max_bytes = 1 << 30;
    int refusals = 0;
    std::uint8_t try_apply(std::int64_t d, std::int64_t b) override {
        if (documents + d > max_documents) return ++refusals, 1;
        if (bytes + b > max_bytes) return ++refusals, 2;
        documents += d;
        bytes += b;
        return 0;
    }
    void undo(std::int64_t d, std::int64_t b) override {
        documents -= d;
        bytes -= b;
    }
};

write_op gated(write_op op, counting_gate& gate) {
    op.gate = &gate;
    return op;
}

}  // namespace

TEST_CASE("a write its gate refuses is answered quota_exceeded with the gate's code and changes nothing") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    counting_gate gate;
    gate.max_documents = 1;
    CHECK(apply_one(store, gated(put_op("a", "1"), gate)).outcome == write_outcome::created);
    auto r = apply_one(store, gated(put_op("b", "2"), gate));
    CHECK(r.outcome == write_outcome::quota_exceeded);
    CHECK(r.refusal == 1);
    CHECK(r.documents_delta == 0);
    CHECK(r.bytes_delta == 0);
    CHECK(store.current()->find("b") == nullptr);
    CHECK(store.current()->document_count() == 1);
    CHECK(gate.documents == 1);
}

TEST_CASE("the gate is asked with what the write changes: a new key, a replacement, an erase") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    counting_gate gate;
    gate.max_bytes = 10;
    CHECK(apply_one(store, gated(put_op("a", "123456"), gate)).outcome == write_outcome::created);
    CHECK(apply_one(store, gated(put_op("b", "12345"), gate)).refusal == 2);  // 11 bytes
    CHECK(apply_one(store, gated(put_op("a", "12"), gate)).outcome == write_outcome::replaced);
    CHECK(gate.bytes == 2);
    CHECK(apply_one(store, gated(put_op("b", "12345678"), gate)).outcome == write_outcome::created);
    CHECK(apply_one(store, gated(erase_op("a"), gate)).outcome == write_outcome::deleted);
    CHECK(apply_one(store, gated(erase_op("missing"), gate)).outcome == write_outcome::not_found);
    CHECK(gate.documents == 1);
    CHECK(gate.bytes == 8);
}

TEST_CASE("a failed precondition never reaches the gate") {
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    counting_gate gate;
    gate.max_documents = 0;
    precondition must_exist;
    must_exist.has_if_match = true;
    must_exist.if_match_any = true;
    CHECK(apply_one(store, gated(put_op("a", "1", must_exist), gate)).outcome == write_outcome::precondition_failed);
    CHECK(gate.refusals == 0);
}

TEST_CASE("a batch that fails to reach the disk gives its gate back what it let through") {
    live_document_guard guard;
    fault_env fe(11);
    REQUIRE(fe.create_directory("/data"));
    REQUIRE(fe.create_directory("/data/shard-000"));
    REQUIRE(fe.sync_directory("/data"));
    REQUIRE(fe.sync_directory("/"));
    auto s = open_store(fe, "/data/shard-000");
    REQUIRE(s->error.empty());
    counting_gate gate;
    CHECK(write_one(**s, gated(put_op("a", "1"), gate)).outcome == write_outcome::created);
    fe.fail_next(fault_op::append, EIO);
    std::vector<write_op> ops;
    ops.push_back(gated(put_op("b", "22"), gate));
    ops.push_back(gated(erase_op("a"), gate));
    auto done = write_all(**s, std::move(ops));
    CHECK(done[0].outcome == write_outcome::unavailable);
    CHECK(done[1].outcome == write_outcome::unavailable);
    CHECK(gate.documents == 1);
    CHECK(gate.bytes == 1);
}
