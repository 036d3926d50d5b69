#include "store/document.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

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

std::atomic<std::int64_t> live_count{0};

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
    std::size_t bytes = allocation_bytes();
    self->~document();
    ::operator delete(static_cast<void*>(self), bytes);
    live_count.fetch_sub(1, std::memory_order_relaxed);
}

document* make_document(std::string_view key, std::string_view content_type, std::unique_ptr<char[]> value,
                        std::size_t value_bytes) {
    PERCORE_DEBUG_ASSERT(value || value_bytes == 0);
    if (value_bytes <= document::inline_value_max_bytes)
        return document::build(key, content_type, std::string_view(value.get(), value_bytes), nullptr, value_bytes);
    return document::build(key, content_type, {}, std::move(value), value_bytes);
}

document* copy_document(std::string_view key, std::string_view content_type, std::string_view value) {
    if (value.size() <= document::inline_value_max_bytes)
        return document::build(key, content_type, value, nullptr, value.size());
    auto owned = std::make_unique_for_overwrite<char[]>(value.size());
    std::memcpy(owned.get(), value.data(), value.size());
    return document::build(key, content_type, {}, std::move(owned), value.size());
}

document* document::build(std::string_view key, std::string_view content_type, std::string_view small,
                          std::unique_ptr<char[]> large, std::size_t value_bytes) {
    if (key.size() > std::numeric_limits<std::uint16_t>::max())
        throw std::length_error("percore::store::make_document: key too long");
    if (content_type.size() > content_type_mask)
        throw std::length_error("percore::store::make_document: content type too long");
    if (value_bytes > max_value_bytes) throw std::length_error("percore::store::make_document: value too large");

    auto known = std::find(well_known_types.begin(), well_known_types.end(), content_type);
    bool is_known = known != well_known_types.end();
    std::size_t inline_type = is_known ? 0 : content_type.size();
    bool inline_value = !large;

    void* memory = ::operator new(sizeof(document) + key.size() + inline_type + (inline_value ? value_bytes : 0));
    auto* doc = new (memory) document();
    doc->key_bytes_ = static_cast<std::uint16_t>(key.size());
    if (is_known) {
        doc->content_type_bytes_ =
            static_cast<std::uint16_t>(well_known_flag | (known - well_known_types.begin()));
    } else {
        doc->content_type_bytes_ = static_cast<std::uint16_t>(content_type.size());
    }
    char* tail = reinterpret_cast<char*>(doc + 1);
    if (!key.empty()) std::memcpy(tail, key.data(), key.size());
    if (inline_type != 0) std::memcpy(tail + key.size(), content_type.data(), inline_type);
    doc->value_bytes_ = static_cast<std::uint32_t>(value_bytes);
    if (inline_value) {
        doc->content_type_bytes_ |= inline_value_flag;
        doc->value_ = tail + key.size() + inline_type;
        if (value_bytes) std::memcpy(doc->value_, small.data(), value_bytes);
    } else {
        doc->value_ = large.release();
    }
    live_count.fetch_add(1, std::memory_order_relaxed);
    PERCORE_DEBUG_ASSERT(doc->overhead_bytes() == sizeof(document) + key.size() + inline_type);
    return doc;
}

document* file_document(std::string_view key, std::string_view content_type, std::size_t value_bytes,
                        std::uint32_t segment, std::uint64_t offset) {
    document* d = document::build(key, content_type, {}, nullptr, 0);
    d->content_type_bytes_ = static_cast<std::uint16_t>((d->content_type_bytes_ & ~document::inline_value_flag) |
                                                        document::file_value_flag);
    d->value_bytes_ = static_cast<std::uint32_t>(value_bytes);
    d->file_offset_ = offset;
    d->segment_ = segment;
    return d;
}

void document::move_value_to_file(std::uint64_t offset) {
    PERCORE_DEBUG_ASSERT(!(content_type_bytes_ & (inline_value_flag | file_value_flag)));
    delete[] value_;
    file_offset_ = offset;
    content_type_bytes_ |= file_value_flag;
}

std::int64_t live_documents() { return live_count.load(std::memory_order_relaxed); }

}  // namespace percore::store
