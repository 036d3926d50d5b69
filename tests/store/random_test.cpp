#include <doctest.h>

#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "store/doc_tree.hpp"
#include "store/shard_store.hpp"
#include "store_test_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

struct model_doc {
    std::uint64_t version;
    std::string value;
};
using model = std::map<std::string, model_doc>;

constexpr std::string_view alphabet{"ab\0c\xff", 5};

std::string random_key(std::mt19937_64& rng, std::size_t max_length) {
    std::size_t length = 1 + rng() % max_length;
    std::string key;
    for (std::size_t i = 0; i < length; ++i) key += alphabet[rng() % alphabet.size()];
    return key;
}

std::string random_value(std::mt19937_64& rng) {
    std::string value(rng() % 40, '\0');
    for (auto& c : value) c = static_cast<char>(rng());
    return value;
}

precondition random_precondition(std::mt19937_64& rng, const model& m, const std::string& key) {
    auto it = m.find(key);
    std::uint64_t current = it == m.end() ? 0 : it->second.version;
    std::uint64_t stale = 1 + rng() % 1000;
    switch (rng() % 10) {
    case 0: return if_match({current});
    case 1: return if_match({stale, current});
    case 2: return if_match({stale});
    case 3: return if_match_any();
    case 4: return if_none_match_any();
    case 5: return if_none_match({current});
    case 6: return if_none_match({stale});
    default: return {};
    }
}

bool holds(const precondition& pre, const model& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? pre.holds(false, 0) : pre.holds(true, it->second.version);
}

// Compares a snapshot with the model it should hold; returns false at the first difference.
bool same_contents(const snapshot& s, const model& m) {
    if (s.document_count() != m.size()) return false;
    std::uint64_t bytes = 0;
    snapshot::cursor c;
    c.seek(s, "", false);
    for (auto& [key, doc] : m) {
        if (!c.valid() || c.doc().key() != key || c.doc().version() != doc.version || c.doc().value() != doc.value)
            return false;
        bytes += doc.value.size();
        c.next();
    }
    return !c.valid() && bytes == s.value_bytes();
}

void check_seek(const snapshot& s, const model& m, const std::string& key, bool exclusive) {
    snapshot::cursor c;
    c.seek(s, key, exclusive);
    auto it = exclusive ? m.upper_bound(key) : m.lower_bound(key);
    for (int step = 0; step < 4; ++step, ++it, c.next()) {
        if (it == m.end()) {
            CHECK_FALSE(c.valid());
            return;
        }
        REQUIRE(c.valid());
        CHECK(c.doc().key() == it->first);
    }
}

void check_prefix(const snapshot& s, const model& m, const std::string& prefix) {
    std::vector<std::string> expected, got;
    for (auto it = m.lower_bound(prefix); it != m.end() && it->first.starts_with(prefix); ++it) expected.push_back(it->first);
    snapshot::cursor c;
    for (c.seek(s, prefix, false); c.valid() && c.doc().key().starts_with(prefix); c.next())
        got.emplace_back(c.doc().key());
    CHECK(got == expected);
}

}  // namespace

TEST_CASE("the store matches a std::map over 20000 random writes in random batches") {
    constexpr std::uint64_t seed = 0x5eed'2024;
    MESSAGE("seed " << seed);
    std::mt19937_64 rng(seed);
    live_document_guard guard;
    reader_epochs epochs(1);
    shard_store store(epochs, 1000);

    model m;
    std::uint64_t next_version = 1000;
    std::uint64_t publications = 0;
    std::uint64_t reclaimed = 0;
    std::size_t ops = 0;

    const snapshot* held = nullptr;
    model held_model;
    int held_batches = 0;

    while (ops < 20000) {
        std::size_t batch = rng() % 4 == 0 ? 1 : 1 + rng() % 64;
        std::vector<write_result> expected;
        for (std::size_t i = 0; i < batch; ++i, ++ops) {
            std::string key = random_key(rng, 5);
            precondition pre = rng() % 2 ? random_precondition(rng, m, key) : precondition{};
            write_result r;
            r.tag = ops;
            auto it = m.find(key);
            bool erase = rng() % 10 < 4;
            if (!holds(pre, m, key)) {
                r.outcome = write_outcome::precondition_failed;
                r.current_exists = it != m.end();
                r.version = r.current_exists ? it->second.version : 0;
            } else if (!erase) {
                r.outcome = it == m.end() ? write_outcome::created : write_outcome::replaced;
                r.version = next_version++;
            } else if (it != m.end()) {
                r.outcome = write_outcome::deleted;
                r.version = next_version++;
            } else {
                r.outcome = write_outcome::not_found;
            }
            if (erase) {
                store.submit(erase_op(key, pre, ops));
                if (r.outcome == write_outcome::deleted) {
                    r.documents_delta = -1;
                    r.bytes_delta = -static_cast<std::int64_t>(it->second.value.size());
                    m.erase(it);
                }
            } else {
                std::string value = random_value(rng);
                store.submit(put_op(key, value, pre, ops));
                if (r.outcome != write_outcome::precondition_failed) {
                    r.documents_delta = it == m.end() ? 1 : 0;
                    r.bytes_delta = static_cast<std::int64_t>(value.size()) -
                                    (it == m.end() ? 0 : static_cast<std::int64_t>(it->second.value.size()));
                    m[key] = model_doc{r.version, value};
                }
            }
            expected.push_back(r);
        }

        std::uint64_t sequence_before = store.current()->sequence();
        std::vector<write_result> done;
        store.advance_batches(done);
        REQUIRE(done.size() == expected.size());
        bool changed = false;
        for (std::size_t i = 0; i < done.size(); ++i) {
            CHECK(done[i].tag == expected[i].tag);
            CHECK(done[i].outcome == expected[i].outcome);
            CHECK(done[i].version == expected[i].version);
            CHECK(done[i].documents_delta == expected[i].documents_delta);
            CHECK(done[i].bytes_delta == expected[i].bytes_delta);
            if (expected[i].outcome == write_outcome::precondition_failed)
                CHECK(done[i].current_exists == expected[i].current_exists);
            changed |= expected[i].outcome == write_outcome::created || expected[i].outcome == write_outcome::replaced ||
                       expected[i].outcome == write_outcome::deleted;
        }
        CHECK(store.next_version() == next_version);
        CHECK(store.current()->sequence() == sequence_before + (changed ? 1 : 0));
        publications += changed ? 1 : 0;

        const snapshot& s = *store.current();
        REQUIRE(same_contents(s, m));
        for (int i = 0; i < 20; ++i) {
            std::string key = random_key(rng, 5);
            auto it = m.find(key);
            const document* doc = s.find(key);
            if (it == m.end()) {
                CHECK(doc == nullptr);
            } else {
                REQUIRE(doc);
                CHECK(doc->key() == key);
                CHECK(doc->version() == it->second.version);
            }
        }
        for (int i = 0; i < 5; ++i) {
            check_seek(s, m, random_key(rng, 6), rng() % 2);
            check_prefix(s, m, random_key(rng, 2));
        }
        auto root = doc_tree::root(s);
        CHECK(doc_tree::check(root) == m.size());
        CHECK(doc_tree::height(root) <= 1.45 * std::log2(m.size() + 2.0));

        if (held) {
            CHECK(same_contents(*held, held_model));
            if (++held_batches == 10) {
                epochs.quiesce(0);
                held = nullptr;
            }
        } else if (rng() % 30 == 0) {
            epochs.begin_round(0);
            held = store.current();
            held_model = m;
            held_batches = 0;
        }
        std::size_t freed = store.reclaim();
        if (held && held_batches > 0) CHECK(freed == 0);
        reclaimed += freed;
    }

    if (held) epochs.quiesce(0);
    reclaimed += store.reclaim();
    CHECK(reclaimed == publications);
    // every deletion's tombstone is a document too, held for the change feed's retention
    CHECK(guard.made() == static_cast<std::int64_t>(m.size() + store.deletions_held()));
}
