#include <doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/shard_store.hpp"
#include "store_test_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

constexpr int key_space = 400;

std::string key_for(int i) {
    char key[16];
    std::snprintf(key, sizeof key, "k%05d", i);
    return key;
}

// Every value starts with its key, so a reader can tell a document from another key's.
std::string value_for(const std::string& key, std::mt19937_64& rng) { return key + ":" + std::string(rng() % 64, 'v'); }

struct reader_report {
    std::uint64_t rounds = 0;
    std::uint64_t documents = 0;
    std::uint64_t failures = 0;
};

void read_until_stopped(const shard_store& store, reader_epochs& epochs, std::size_t slot, const std::atomic<bool>& stop,
                        reader_report& report) {
    std::mt19937_64 rng(slot);
    std::uint64_t last_sequence = 0;
    const document* kept = nullptr;
    while (!stop.load(std::memory_order_relaxed)) {
        epochs.begin_round(slot);
        const snapshot* s = store.current();
        if (s->sequence() < last_sequence) ++report.failures;
        last_sequence = s->sequence();

        std::uint64_t count = 0, bytes = 0;
        std::string_view previous;
        snapshot::cursor c;
        for (c.seek(*s, "", false); c.valid(); c.next()) {
            const document& doc = c.doc();
            bool ok = doc.value().starts_with(doc.key()) && doc.value().size() > doc.key().size() &&
                      doc.value()[doc.key().size()] == ':' && (count == 0 || previous < doc.key()) &&
                      s->find(doc.key()) == &doc && doc.version() != 0;
            if (!ok) ++report.failures;
            previous = doc.key();
            ++count;
            bytes += doc.value().size();
        }
        if (count != s->document_count() || bytes != s->value_bytes()) ++report.failures;

        std::string probe = key_for(static_cast<int>(rng() % key_space));
        c.seek(*s, probe, rng() % 2);
        if (c.valid() && c.doc().key() < std::string_view(probe)) ++report.failures;
        if (!kept && c.valid() && rng() % 8 == 0) {
            kept = &c.doc();
            kept->retain();
        }
        report.documents += count;
        ++report.rounds;
        epochs.quiesce(slot);

        if (kept && rng() % 4 == 0) {
            if (!kept->value().starts_with(kept->key())) ++report.failures;
            kept->release();
            kept = nullptr;
        }
    }
    if (kept) kept->release();
}

}  // namespace

TEST_CASE("readers on other threads always see consistent snapshots while a writer flushes batches") {
    live_document_guard guard;
    constexpr std::size_t readers = 3;
    reader_epochs epochs(readers);
    std::atomic<bool> stop{false};
    std::vector<reader_report> reports(readers);
    std::uint64_t ops = 0, batches = 0, freed = 0, publications = 0;
    {
        shard_store store(epochs, 1);
        std::vector<std::thread> threads;
        for (std::size_t i = 0; i < readers; ++i)
            threads.emplace_back(read_until_stopped, std::cref(store), std::ref(epochs), i, std::cref(stop),
                                 std::ref(reports[i]));

        std::mt19937_64 rng(7);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        std::vector<write_result> done;
        while (ops < 200'000 && std::chrono::steady_clock::now() < deadline) {
            std::size_t batch = 1 + rng() % 32;
            for (std::size_t i = 0; i < batch; ++i, ++ops) {
                std::string key = key_for(static_cast<int>(rng() % key_space));
                if (rng() % 3 == 0) {
                    store.submit(erase_op(key));
                } else if (rng() % 4 == 0) {
                    const document* now = store.current()->find(key);
                    store.submit(put_op(key, value_for(key, rng), if_match({now ? now->version() : 1})));
                } else {
                    store.submit(put_op(key, value_for(key, rng)));
                }
            }
            std::uint64_t before = store.current()->sequence();
            done.clear();
            store.advance_batches(done);
            if (done.size() != batch) FAIL("wrong number of results");
            publications += store.current()->sequence() - before;
            ++batches;
            freed += store.reclaim();
        }
        stop.store(true);
        for (auto& t : threads) t.join();
        freed += store.reclaim();
        CHECK(freed == publications);
        CHECK(store.reclaim() == 0);
    }
    MESSAGE(ops << " writes in " << batches << " batches");
    for (std::size_t i = 0; i < readers; ++i) {
        MESSAGE("reader " << i << ": " << reports[i].rounds << " rounds, " << reports[i].documents << " documents read");
        CHECK(reports[i].failures == 0);
        CHECK(reports[i].rounds > 0);
    }
}
