#include "store/document.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <utility>

#include "store/document_stats.hpp"
#include "shards/runtime/check.hpp"

namespace percore::store {

namespace {

constexpr std::array<std::string_view, 24> well_known_types = {
    "application/octet-stream",
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
    "text/plain; charset=utf-8",
    "text/html",
    "text/html; charset=utf-8",
    "text/css",
    "text/csv",
    "text/xml",
    "text/javascript",
    "application/javascript",
    "application/xml",
    "application/x-www-form-urlencoded",
    "application/pdf",
    "application/zip",
    "application/gzip",
    "application/cbor",
    "application/x-ndjson",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/svg+xml",
};

// Documents made minus documents freed, counted per thread and summed on read (live_documents):
// every write makes a document and frees the one it replaces, on the shard that owns the key, so
// one process-wide counter would be a cache line every shard writes on every write
// (docs/perf/shared-writes.md). A thread takes a slot at its first count and frees it when it ends;
// the slot keeps its count for the next thread to take it (only the sum means anything).
// Threads that count at once: the shards (at most one per CPU) plus the log, backup and test
// threads; one that finds no slot free counts in the last one, which such threads share.
constexpr std::size_t live_count_slots = 256;
struct alignas(64) live_count_slot {
    std::atomic<std::int64_t> count{0};
    std::atomic<bool> taken{false};
};
live_count_slot live_counts[live_count_slots + 1];
thread_local constinit live_count_slot* own_live_count = nullptr;  // constinit: no TLS wrapper per count

// Frees the thread's slot when the thread ends; made at the thread's first count only.
struct live_count_release {
    ~live_count_release() {
        if (own_live_count != &live_counts[live_count_slots]) own_live_count->taken.store(false, std::memory_order_release);
    }
};

[[gnu::noinline]] live_count_slot& take_live_count_slot() {
    own_live_count = &live_counts[live_count_slots];
    for (std::size_t i = 0; i < live_count_slots; ++i) {
        bool free = false;
        if (live_counts[i].taken.compare_exchange_strong(free, true, std::memory_order_acquire)) {
            own_live_count = &live_counts[i];
            break;
        }
    }
    thread_local live_count_release release;
    (void)release;
    return *own_live_count;
}

void count_live(std::int64_t change) {
    live_count_slot& slot = own_live_count ? *own_live_count : take_live_count_slot();
    slot.count.fetch_add(change, std::memory_order_relaxed);  // shared by threads only in the last slot
}

}  // namespace

std::string_view document::well_known_type(unsigned index) {
    PERCORE_DEBUG_ASSERT(index < well_known_types.size());
    return well_known_types[index];
}

void document::release() const {
    auto before = refs_.fetch_sub(1, std::memory_order_acq_rel);
    PERCORE_ASSERT(before > 0);
    if (before != 1) return;
    auto* self = const_cast<document*>(this);
    const std::size_t bytes = allocation_bytes();
    const bool from_pool = pooled_;
    self->~document();
    count_live(-1);
    if (from_pool)
        document_pool::deallocate(self, bytes);
    else
        ::operator delete(static_cast<void*>(self), bytes);
}

std::uint64_t document::copied_version() const {
    PERCORE_DEBUG_ASSERT(copied_);
    std::uint64_t v;
    std::memcpy(&v, copied_version_data(), sizeof v);
    return v;
}

document* document::build(document_pool* pool, std::string_view key, std::string_view content_type,
                          value_place place, std::size_t value_bytes, std::uint64_t copied_version) {
    if (key.size() > std::numeric_limits<std::uint16_t>::max())
        throw std::length_error("percore::store::make_document: key too long");
    if (content_type.size() > content_type_mask)
        throw std::length_error("percore::store::make_document: content type too long");
    if (value_bytes > max_value_bytes) throw std::length_error("percore::store::make_document: value too large");

    auto known = std::find(well_known_types.begin(), well_known_types.end(), content_type);
    const bool is_known = known != well_known_types.end();
    const std::size_t inline_type = is_known ? 0 : content_type.size();
    const bool copied = copied_version != 0;
    const std::size_t bytes = allocation_bytes(key.size(), inline_type, place, value_bytes, copied);
    const bool from_pool = pool && document_pool::fits(bytes);
    void* memory = from_pool ? pool->allocate(bytes) : ::operator new(bytes);
    auto* doc = new (memory) document();
    doc->pooled_ = from_pool;
    doc->key_bytes_ = static_cast<std::uint16_t>(key.size());
    if (is_known) {
        doc->content_type_bytes_ = static_cast<std::uint16_t>(well_known_flag | (known - well_known_types.begin()));
    } else {
        doc->content_type_bytes_ = static_cast<std::uint16_t>(content_type.size());
    }
    if (place == value_place::inline_value) doc->content_type_bytes_ |= inline_value_flag;
    if (place == value_place::file) doc->content_type_bytes_ |= file_value_flag;
    char* tail = reinterpret_cast<char*>(doc + 1);
    if (!key.empty()) std::memcpy(tail, key.data(), key.size());
    if (inline_type != 0) std::memcpy(tail + key.size(), content_type.data(), inline_type);
    doc->value_bytes_ = static_cast<std::uint32_t>(value_bytes);
    if (place != value_place::inline_value) ::new (static_cast<void*>(doc->outside())) outside_value{nullptr};
    doc->copied_ = copied;
    if (copied) std::memcpy(doc->copied_version_data(), &copied_version, sizeof copied_version);
    count_live(1);
    PERCORE_DEBUG_ASSERT(doc->allocation_bytes() == bytes);
    return doc;
}

document* document::build_copy(document_pool* pool, std::string_view key, std::string_view content_type,
                               std::string_view value, std::uint64_t copied_version) {
    if (value.size() <= inline_value_max_bytes) {
        document* d = build(pool, key, content_type, value_place::inline_value, value.size(), copied_version);
        if (!value.empty()) std::memcpy(const_cast<char*>(d->inline_value_data()), value.data(), value.size());
        return d;
    }
    if (value.size() > max_value_bytes) throw std::length_error("percore::store::make_document: value too large");
    auto owned = std::make_unique_for_overwrite<char[]>(value.size());
    std::memcpy(owned.get(), value.data(), value.size());
    document* d = build(pool, key, content_type, value_place::buffer, value.size(), copied_version);
    d->outside()->data = owned.release();
    return d;
}

document* make_document(std::string_view key, std::string_view content_type, std::unique_ptr<char[]> value,
                        std::size_t value_bytes) {
    PERCORE_DEBUG_ASSERT(value || value_bytes == 0);
    if (value_bytes <= document::inline_value_max_bytes)
        return document::build_copy(nullptr, key, content_type, std::string_view(value.get(), value_bytes));
    document* d = document::build(nullptr, key, content_type, document::value_place::buffer, value_bytes);
    d->outside()->data = value.release();
    return d;
}

document* copy_document(std::string_view key, std::string_view content_type, std::string_view value) {
    return document::build_copy(nullptr, key, content_type, value);
}

document* copy_document(document_pool& pool, std::string_view key, std::string_view content_type,
                        std::string_view value, std::uint64_t copied_version) {
    return document::build_copy(&pool, key, content_type, value, copied_version);
}

document* file_document(document_pool& pool, std::string_view key, std::string_view content_type,
                        std::size_t value_bytes, std::uint32_t segment, std::uint64_t offset,
                        std::uint64_t copied_version) {
    document* d =
        document::build(&pool, key, content_type, document::value_place::file, value_bytes, copied_version);
    d->outside()->file_offset = offset;
    d->segment_ = segment;
    return d;
}

document* move_to_pool(document_pool& pool, document* doc) {
    PERCORE_DEBUG_ASSERT(doc);
    const bool is_inline = doc->content_type_bytes_ & document::inline_value_flag;
    const std::size_t bytes = doc->allocation_bytes();
    if (doc->pooled_ || !is_inline || !document_pool::fits(bytes) || doc->refs_.load(std::memory_order_relaxed) != 1)
        return doc;
    auto* copy = new (pool.allocate(bytes)) document();
    copy->pooled_ = 1;
    copy->key_bytes_ = doc->key_bytes_;
    copy->content_type_bytes_ = doc->content_type_bytes_;
    copy->version_ = doc->version_;
    copy->value_bytes_ = doc->value_bytes_;
    copy->segment_ = doc->segment_;
    copy->copied_ = doc->copied_;
    std::memcpy(static_cast<void*>(copy + 1), doc + 1, bytes - sizeof(document));  // key, content type, value
    count_live(1);
    doc->release();
    return copy;
}

// One extra allocation per copied document: the follower's documents are made on the shard that
// received the page, before the store decides their local version, and only copies pay the 8 bytes.
document* with_copied_version(document_pool& pool, document* doc, std::uint64_t copied_version) {
    PERCORE_REQUIRES(doc && copied_version != 0 && !doc->in_file());
    const bool is_inline = doc->content_type_bytes_ & document::inline_value_flag;
    const bool sole = doc->refs_.load(std::memory_order_relaxed) == 1;
    document* copy = nullptr;
    if (is_inline || !sole) {
        copy = document::build_copy(&pool, doc->key(), doc->content_type(), doc->value(), copied_version);
    } else {
        // the value's buffer changes hands: no one else can read it through `doc`
        copy = document::build(&pool, doc->key(), doc->content_type(), document::value_place::buffer,
                               doc->value_size(), copied_version);
        copy->outside()->data = std::exchange(doc->outside()->data, nullptr);
    }
    copy->version_ = doc->version_;
    copy->segment_ = doc->segment_;
    doc->release();
    return copy;
}

void document::move_value_to_file(std::uint64_t offset) {
    PERCORE_DEBUG_ASSERT(!(content_type_bytes_ & (inline_value_flag | file_value_flag)));
    delete[] outside()->data;
    outside()->file_offset = offset;
    content_type_bytes_ |= file_value_flag;
}

std::int64_t live_documents() {
    std::int64_t sum = 0;
    for (const live_count_slot& slot : live_counts) sum += slot.count.load(std::memory_order_relaxed);
    return sum;
}

}  // namespace percore::store
