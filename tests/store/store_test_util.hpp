// Helpers shared by the store tests.
#pragma once

#include <doctest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/document.hpp"
#include "store/document_stats.hpp"
#include "store/shard_store.hpp"

namespace percore::store::test {

inline document* make_doc(std::string_view key, std::string_view value,
                          std::string_view content_type = "application/octet-stream") {
    std::unique_ptr<char[]> buffer;
    if (!value.empty()) {
        buffer = std::make_unique_for_overwrite<char[]>(value.size());
        std::memcpy(buffer.get(), value.data(), value.size());
    }
    return make_document(key, content_type, std::move(buffer), value.size());
}

inline write_op put_op(std::string_view key, std::string_view value, precondition pre = {}, std::uint64_t tag = 0) {
    write_op op;
    op.kind = write_kind::put;
    op.doc = make_doc(key, value);
    op.pre = std::move(pre);
    op.tag = tag;
    return op;
}

// A follower's put: `value` under `key`, keeping another board's ETag version `copied_version`.
inline write_op copy_op(std::string_view key, std::string_view value, std::uint64_t copied_version,
                        precondition pre = {}) {
    write_op op = put_op(key, value, std::move(pre));
    op.copied_version = copied_version;
    return op;
}

inline write_op erase_op(std::string_view key, precondition pre = {}, std::uint64_t tag = 0) {
    write_op op;
    op.kind = write_kind::erase;
    op.key = std::string(key);
    op.pre = std::move(pre);
    op.tag = tag;
    return op;
}

inline precondition if_match(std::initializer_list<std::uint64_t> versions) {
    precondition p;
    p.has_if_match = true;
    p.if_match = versions;
    return p;
}

inline precondition if_match_any() {
    precondition p;
    p.has_if_match = true;
    p.if_match_any = true;
    return p;
}

inline precondition if_none_match(std::initializer_list<std::uint64_t> versions) {
    precondition p;
    p.has_if_none_match = true;
    p.if_none_match = versions;
    return p;
}

inline precondition if_none_match_any() {
    precondition p;
    p.has_if_none_match = true;
    p.if_none_match_any = true;
    return p;
}

// Checks, when it goes out of scope, that every document made since it was built has been freed.
class live_document_guard {
public:
    live_document_guard() : before_(live_documents()) {}
    ~live_document_guard() { CHECK(live_documents() == before_); }
    std::int64_t made() const { return live_documents() - before_; }

private:
    std::int64_t before_;
};

// Submits `ops` as one batch and returns its results.
inline std::vector<write_result> apply(shard_store& store, std::vector<write_op> ops) {
    for (auto& op : ops) store.submit(std::move(op));
    std::vector<write_result> done;
    store.advance_batches(done);
    return done;
}

inline write_result apply_one(shard_store& store, write_op op) {
    std::vector<write_op> ops;
    ops.push_back(std::move(op));
    auto done = apply(store, std::move(ops));
    REQUIRE(done.size() == 1);
    return done.front();
}

inline std::string value_of(const document* doc) { return doc ? std::string(doc->value()) : std::string("<missing>"); }

}  // namespace percore::store::test
