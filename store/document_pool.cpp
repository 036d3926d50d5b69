#include "store/document_pool.hpp"

#include <sys/mman.h>

#include <new>

#include "shards/runtime/check.hpp"
#include "store/poison.hpp"

// LeakSanitizer scans malloc's memory for pointers, not ours: a pooled document whose value has a
// buffer of its own (new[]) holds the only pointer to it, so the slabs are registered as roots.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define PERCORE_LSAN_ROOT(p, n) __lsan_register_root_region(p, n)
#define PERCORE_LSAN_UNROOT(p, n) __lsan_unregister_root_region(p, n)
#else
#define PERCORE_LSAN_ROOT(p, n) ((void)(p), (void)(n))
#define PERCORE_LSAN_UNROOT(p, n) ((void)(p), (void)(n))
#endif

namespace percore::store {

namespace {

// Distinct for every thread alive at the same time: the address of a thread-local byte.
const void* this_thread_token() {
    thread_local const char marker = 0;
    return &marker;
}

// `bytes` of fresh zero pages starting at a multiple of `bytes` (a power of two): one slab more is
// mapped and the parts before and after the aligned slab are unmapped again.
void* map_aligned(std::size_t bytes) {
    void* p = ::mmap(nullptr, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t aligned = (start + bytes - 1) & ~(std::uintptr_t{bytes} - 1);
    if (aligned != start) ::munmap(p, aligned - start);
    if (const std::uintptr_t end = start + 2 * bytes; end != aligned + bytes)
        ::munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
    return reinterpret_cast<void*>(aligned);
}

}  // namespace

document_pool::~document_pool() {
    collect();
    PERCORE_ASSERT(live_ == 0);  // a document of this store is still held (contract)
    for (void* slab : slabs_) {
        PERCORE_UNPOISON(slab, document_slab_bytes);  // the addresses may be mapped again
        PERCORE_LSAN_UNROOT(slab, document_slab_bytes);
        ::munmap(slab, document_slab_bytes);
    }
}

void* document_pool::allocate(std::size_t bytes) {
    PERCORE_REQUIRES(bytes > 0 && fits(bytes));
    const void* me = this_thread_token();
    if (owner_.load(std::memory_order_relaxed) != me) owner_.store(me, std::memory_order_relaxed);
    if (returned_.load(std::memory_order_relaxed) != nullptr) collect();
    const std::size_t size_class = class_of(bytes);
    const std::size_t size = size_class * document_class_step_bytes;
    void* block;
    if (free_block* b = free_[size_class]) {
        PERCORE_UNPOISON(b, size);
        free_[size_class] = b->next;
        block = b;
    } else {
        block = carve(size);
    }
    ++live_;
    return block;
}

void document_pool::deallocate(void* block, std::size_t bytes) {
    PERCORE_DEBUG_ASSERT(block != nullptr && bytes > 0 && fits(bytes));
    const auto slab = reinterpret_cast<std::uintptr_t>(block) & ~(std::uintptr_t{document_slab_bytes} - 1);
    document_pool* pool = reinterpret_cast<const slab_header*>(slab)->pool;
    if (pool->owner_.load(std::memory_order_relaxed) == this_thread_token())
        pool->give_back(block, class_of(bytes));
    else
        pool->push_returned(block, class_of(bytes));
}

// Owner thread.
void document_pool::give_back(void* block, std::size_t size_class) {
    PERCORE_DEBUG_ASSERT(live_ > 0);
    --live_;
    free_[size_class] = ::new (block) free_block{free_[size_class], static_cast<std::uint32_t>(size_class)};
    PERCORE_POISON(block, size_class * document_class_step_bytes);
}

// Another thread: the link stays readable for the owner, who poisons it when it takes the block.
void document_pool::push_returned(void* block, std::size_t size_class) {
    auto* b = ::new (block) free_block{nullptr, static_cast<std::uint32_t>(size_class)};
    const std::size_t size = size_class * document_class_step_bytes;
    PERCORE_POISON(static_cast<char*>(block) + sizeof(free_block), size - sizeof(free_block));
    free_block* head = returned_.load(std::memory_order_relaxed);
    do {
        b->next = head;
    } while (!returned_.compare_exchange_weak(head, b, std::memory_order_release, std::memory_order_relaxed));
}

void document_pool::collect() {
    // Takes the whole stack: no block is popped alone, so a block pushed again meanwhile (ABA)
    // cannot confuse it.
    free_block* b = returned_.exchange(nullptr, std::memory_order_acquire);
    while (b) {
        free_block* next = b->next;
        const std::size_t size_class = b->size_class;
        PERCORE_DEBUG_ASSERT(size_class < classes && live_ > 0);
        --live_;
        b->next = free_[size_class];
        free_[size_class] = b;
        PERCORE_POISON(b, sizeof(free_block));
        b = next;
    }
}

// A block from the newest slab's unused rest, or from a new slab (the old one's rest, less than
// one block, stays unused).
void* document_pool::carve(std::size_t bytes) {
    if (static_cast<std::size_t>(end_ - next_) < bytes) add_slab();
    void* block = next_;
    next_ += bytes;
    PERCORE_UNPOISON(block, bytes);
    return block;
}

void document_pool::add_slab() {
    // grown before mapping: nothing to undo if this throws
    if (slabs_.size() == slabs_.capacity()) slabs_.reserve(slabs_.empty() ? 16 : 2 * slabs_.size());
    void* slab = map_aligned(document_slab_bytes);
    slabs_.push_back(slab);
    PERCORE_LSAN_ROOT(slab, document_slab_bytes);
    ::new (slab) slab_header{this};
    next_ = static_cast<char*>(slab) + first_block_offset;
    end_ = static_cast<char*>(slab) + document_slab_bytes;
    PERCORE_POISON(next_, static_cast<std::size_t>(end_ - next_));
}

}  // namespace percore::store
