// document_pool: the memory of one store's documents, in size classes, with no header per document.
//
// Contract
// - Owned by one store (shard_store.hpp), which makes its documents in it (document.hpp: the
//   functions that take a pool). allocate() and collect() run on the owner's thread: the thread
//   that called allocate() last (a store is built on the main thread, then recovered and used on
//   its shard's; one thread at a time, handed over with synchronization, as the store itself).
// - deallocate() on any thread, by whoever freed the document: on the owner's thread the block goes
//   straight onto its class's free list; any other thread pushes it onto the pool's stack of returned
//   blocks (lock-free, any number of pushers), which the owner takes whole: at the next allocate()
//   that finds it non-empty, at collect() and at destruction. The freeing thread finds the pool
//   from the block's address: slabs are document_slab_bytes, aligned to their size, and begin with
//   their pool's address (limits.hpp).
// - Blocks are the requested size rounded up to a class (document_class_step_bytes steps up to
//   max_pooled_document_bytes); a document's class comes back from its own size fields when it is
//   freed. A freed block is reused by its class only, and slabs are unmapped only with the pool, so
//   the pool holds at most the peak of each class: a steady load of equal sizes reuses its blocks
//   (as node_pool does for tree nodes, doc_tree.hpp).
// - Lazy: an empty pool maps nothing (an idle shard costs no slab); a slab is mapped when the last
//   one cannot hold the next block.
// - REQUIRES (PERCORE_REQUIRES, release builds too, unless noted): allocate() with 1 to
//   max_pooled_document_bytes bytes; deallocate() with a block of a live pool and the size it was
//   allocated with (debug builds); the pool destroyed only after every block came back (every
//   deallocate() returned): checked at destruction, since a document still held would outlive its
//   memory.
// - Errors: a slab that cannot be mapped throws std::bad_alloc, as operator new does for the
//   documents made with malloc.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "store/limits.hpp"

namespace percore::store {

class document_pool {
public:
    document_pool() = default;
    ~document_pool();
    document_pool(const document_pool&) = delete;
    document_pool& operator=(const document_pool&) = delete;

    // Whether a document of `bytes` comes from a pool (larger ones: malloc).
    static constexpr bool fits(std::size_t bytes) { return bytes <= max_pooled_document_bytes; }
    // The smallest block holds a free-list link (a pointer and the class).
    static constexpr std::size_t min_block_bytes = 16;
    // What a block of `bytes` takes: its class's size.
    static constexpr std::size_t block_bytes(std::size_t bytes) { return class_of(bytes) * document_class_step_bytes; }

    // Owner thread. A block of block_bytes(bytes), aligned to document_class_step_bytes.
    void* allocate(std::size_t bytes);
    // Any thread (contract above).
    static void deallocate(void* block, std::size_t bytes);
    // Owner thread: takes back the blocks other threads returned.
    void collect();

    // Owner thread. Blocks handed out and not taken back yet (those returned by other threads
    // count until collected).
    std::size_t live() const { return live_; }
    // Slab bytes mapped (what the pool's documents cost, in address space; pages never touched
    // cost no memory).
    std::size_t reserved_bytes() const { return slabs_.size() * document_slab_bytes; }

private:
    struct free_block {
        free_block* next;
        std::uint32_t size_class;
    };
    static_assert(sizeof(free_block) <= min_block_bytes && min_block_bytes % document_class_step_bytes == 0);
    struct slab_header {
        document_pool* pool;
    };
    static constexpr std::size_t classes = max_pooled_document_bytes / document_class_step_bytes + 1;
    // A size's class: its number of steps, rounded up (a block is never below min_block_bytes).
    static constexpr std::size_t class_of(std::size_t bytes) {
        const std::size_t steps = (bytes + document_class_step_bytes - 1) / document_class_step_bytes;
        constexpr std::size_t min_steps = min_block_bytes / document_class_step_bytes;
        return steps < min_steps ? min_steps : steps;
    }
    static constexpr std::size_t first_block_offset =
        (sizeof(slab_header) + document_class_step_bytes - 1) / document_class_step_bytes * document_class_step_bytes;
    void give_back(void* block, std::size_t size_class);
    void push_returned(void* block, std::size_t size_class);
    void* carve(std::size_t bytes);
    void add_slab();

    std::array<free_block*, classes> free_{};  // per class; every block on them is poisoned (poison.hpp)
    // Pushed by other threads: a reader that retained a document past its round to send the value
    // by reference (values of 16 KiB and more: document_service's zero_copy_min_bytes) and released
    // it last. Rare next to the owner's frees, so no cache line of its own.
    std::atomic<free_block*> returned_{nullptr};
    std::atomic<const void*> owner_{nullptr};  // the owner thread's token (document_pool.cpp)
    std::vector<void*> slabs_;
    char* next_ = nullptr;  // the unused rest of the newest slab
    char* end_ = nullptr;
    std::size_t live_ = 0;
};

}  // namespace percore::store
