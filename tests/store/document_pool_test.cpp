// The documents' size-class allocator (store/document_pool.hpp).
#include <doctest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "store/document_pool.hpp"

using namespace percore::store;

namespace {

char* block(document_pool& pool, std::size_t bytes) { return static_cast<char*>(pool.allocate(bytes)); }

}  // namespace

TEST_CASE("an idle pool maps no memory, and its first block maps one slab") {
    document_pool pool;
    CHECK(pool.reserved_bytes() == 0);
    char* b = block(pool, 40);
    CHECK(pool.reserved_bytes() == document_slab_bytes);
    document_pool::deallocate(b, 40);
}

TEST_CASE("a block takes its size rounded up to the next 8-byte class (16 bytes at least), with no header") {
    document_pool pool;
    char* a = block(pool, 53);
    char* b = block(pool, 56);
    char* c = block(pool, 57);
    char* d = block(pool, 1);
    CHECK(reinterpret_cast<std::uintptr_t>(a) % document_class_step_bytes == 0);
    CHECK(b - a == 56);
    CHECK(c - b == 56);
    CHECK(d - c == 64);
    CHECK(document_pool::block_bytes(53) == 56);
    CHECK(document_pool::block_bytes(1) == document_pool::min_block_bytes);  // room for the free-list link
    CHECK(document_pool::block_bytes(max_pooled_document_bytes) == max_pooled_document_bytes);
    CHECK(pool.live() == 4);
    for (auto [p, n] : {std::pair{a, 53}, {b, 56}, {c, 57}, {d, 1}}) document_pool::deallocate(p, n);
    CHECK(pool.live() == 0);
}

TEST_CASE("a freed block is reused by the next block of its class and by no other class") {
    document_pool pool;
    char* a = block(pool, 50);
    document_pool::deallocate(a, 50);
    char* other = block(pool, 64);
    CHECK(other != a);
    char* same = block(pool, 56);  // 50 and 56 share the 56-byte class
    CHECK(same == a);
    document_pool::deallocate(other, 64);
    document_pool::deallocate(same, 56);
}

TEST_CASE("a steady churn of equal blocks stays within the first slab") {
    document_pool pool;
    std::vector<char*> live;
    for (int i = 0; i < 1000; ++i) live.push_back(block(pool, 56));
    for (int round = 0; round < 200; ++round) {
        for (char*& b : live) {
            document_pool::deallocate(b, 56);
            b = block(pool, 56);
        }
    }
    CHECK(pool.reserved_bytes() == document_slab_bytes);
    for (char* b : live) document_pool::deallocate(b, 56);
}

TEST_CASE("a new slab is mapped only when the last one cannot hold the next block") {
    document_pool pool;
    const std::size_t per_slab = (document_slab_bytes - 8) / max_pooled_document_bytes;
    std::vector<char*> blocks;
    for (std::size_t i = 0; i < per_slab; ++i) blocks.push_back(block(pool, max_pooled_document_bytes));
    CHECK(pool.reserved_bytes() == document_slab_bytes);
    blocks.push_back(block(pool, max_pooled_document_bytes));
    CHECK(pool.reserved_bytes() == 2 * document_slab_bytes);
    for (char* b : blocks) document_pool::deallocate(b, max_pooled_document_bytes);
    CHECK(pool.live() == 0);
}

TEST_CASE("a block freed on another thread goes back to the owner when it collects") {
    document_pool pool;
    char* a = block(pool, 56);
    std::thread([a] { document_pool::deallocate(a, 56); }).join();
    CHECK(pool.live() == 1);  // returned, not yet taken back
    pool.collect();
    CHECK(pool.live() == 0);
    CHECK(block(pool, 56) == a);
    document_pool::deallocate(a, 56);
}

TEST_CASE("the owner's next block takes back what other threads returned first") {
    document_pool pool;
    char* a = block(pool, 24);
    std::thread([a] { document_pool::deallocate(a, 24); }).join();
    CHECK(block(pool, 24) == a);
    CHECK(pool.live() == 1);
    document_pool::deallocate(a, 24);
    CHECK(pool.live() == 0);
}

TEST_CASE("blocks freed by several threads while the owner allocates all come back to the owner") {
    document_pool pool;
    constexpr int threads = 4, per_thread = 5000;
    std::vector<std::vector<char*>> handed(threads);
    for (auto& list : handed)
        for (int i = 0; i < per_thread; ++i) list.push_back(block(pool, 32 + 8 * (i % 8)));
    std::atomic<bool> go{false};
    std::vector<std::thread> freers;
    for (int t = 0; t < threads; ++t) {
        freers.emplace_back([&, t] {
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            for (int i = 0; i < per_thread; ++i) document_pool::deallocate(handed[t][i], 32 + 8 * (i % 8));
        });
    }
    go.store(true, std::memory_order_release);
    std::vector<char*> mine;  // the owner goes on allocating meanwhile, taking back what it finds
    for (int i = 0; i < 20000; ++i) mine.push_back(block(pool, 32 + 8 * (i % 8)));
    for (auto& t : freers) t.join();
    for (int i = 0; i < 20000; ++i) document_pool::deallocate(mine[i], 32 + 8 * (i % 8));
    pool.collect();
    CHECK(pool.live() == 0);
    // at most 40,000 blocks of 32-88 bytes (2.4 MB, ~9.2 slabs) were live at once
    CHECK(pool.reserved_bytes() <= 12 * document_slab_bytes);
}
