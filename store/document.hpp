// document: one immutable version of a stored value, shared by every snapshot that holds it.
//
// Contract
// - Made by make_document() on any thread (in percore: the shard that received the request), then
//   handed to the owning shard's store, which stamps its version once before publishing it. After
//   publication nothing in it changes.
// - Reference counted with an atomic count: the store holds one reference per tree node that
//   points at it; a reader may retain() a document it found in a snapshot it is reading (while the
//   snapshot is pinned) to keep the value alive past that, e.g. while a socket sends it. Whoever
//   drops the last reference frees it, on whatever thread that is.
// - The key is the store's opaque byte-string key; the store knows nothing of apps or HTTP.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "shards/runtime/check.hpp"
#include "store/limits.hpp"

namespace percore::store {


class document {
public:
    std::string_view key() const { return {key_data(), key_bytes_}; }
    std::string_view content_type() const {
        if (content_type_bytes_ & well_known_flag) return well_known_type(content_type_bytes_ & content_type_mask);
        return {key_data() + key_bytes_, static_cast<std::size_t>(content_type_bytes_ & content_type_mask)};
    }
    // The value's bytes; only for a document whose value is in memory (!in_file()).
    std::string_view value() const {
        PERCORE_DEBUG_ASSERT(!in_file());
        return {value_, value_bytes_};
    }
    std::size_t value_size() const { return value_bytes_; }
    // Large values live only in the log once their batch is durable: value_size() bytes at
    // file_offset() of segment().
    bool in_file() const { return content_type_bytes_ & file_value_flag; }
    std::uint64_t file_offset() const { return file_offset_; }
    std::uint64_t version() const { return version_; }

    void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() const;

    // The log segment that holds this version's record; 0 until it is written.
    std::uint32_t segment() const { return segment_; }

    // Owner thread, before publication only.
    void set_version(std::uint64_t version) { version_ = version; }
    void set_segment(std::uint32_t segment) { segment_ = segment; }
    // Frees the in-memory value: from now on it is read from segment() at `offset`.
    void move_value_to_file(std::uint64_t offset);

    // Bytes this document costs beyond its value (header, key, content type).
    std::size_t overhead_bytes() const { return sizeof(document) + key_bytes_ + inline_content_type_bytes(); }
    // Values up to this size share the document's allocation (one malloc per document).
    static constexpr std::size_t inline_value_max_bytes = 256;

private:
    friend document* make_document(std::string_view, std::string_view, std::unique_ptr<char[]>, std::size_t);
    friend document* copy_document(std::string_view, std::string_view, std::string_view);
    friend document* file_document(std::string_view, std::string_view, std::size_t, std::uint32_t, std::uint64_t);
    // One allocation for header, key, content type (unless well known) and, for small values, the
    // value (copied from `small`); a large value is taken over from `large`.
    static document* build(std::string_view key, std::string_view content_type, std::string_view small,
                           std::unique_ptr<char[]> large, std::size_t value_bytes);
    document() = default;
    ~document() {
        if (!(content_type_bytes_ & (inline_value_flag | file_value_flag))) delete[] value_;
    }
    std::size_t allocation_bytes() const {
        return overhead_bytes() + ((content_type_bytes_ & inline_value_flag) ? value_bytes_ : 0);
    }
    const char* key_data() const { return reinterpret_cast<const char*>(this + 1); }

    // Common content types are not copied into each document: content_type_bytes_ then holds
    // well_known_flag | index into a fixed table.
    static constexpr std::uint16_t well_known_flag = 0x8000;
    static constexpr std::uint16_t inline_value_flag = 0x4000;  // the value follows key and content type
    static constexpr std::uint16_t file_value_flag = 0x2000;    // the value is only in the log
    static constexpr std::uint16_t content_type_mask = 0x1fff;
    static std::string_view well_known_type(unsigned index);
    std::size_t inline_content_type_bytes() const {
        return (content_type_bytes_ & well_known_flag) ? 0 : (content_type_bytes_ & content_type_mask);
    }

    mutable std::atomic<std::uint32_t> refs_{1};
    std::uint16_t key_bytes_ = 0;
    std::uint16_t content_type_bytes_ = 0;
    std::uint64_t version_ = 0;
    std::uint32_t value_bytes_ = 0;  // at most max_value_bytes
    std::uint32_t segment_ = 0;      // the log segment holding this version's record (0: none yet)
    union {
        char* value_ = nullptr;      // owned (new[]) unless inline_value_flag or file_value_flag
        std::uint64_t file_offset_;  // file_value_flag
    };
    // followed by key bytes, content-type bytes (unless well known), value bytes (if inline)
};

// Returns a document holding one reference whose value lives only in the log.
document* file_document(std::string_view key, std::string_view content_type, std::size_t value_bytes,
                        std::uint32_t segment, std::uint64_t offset);

// Returns a document holding one reference and a copy of `value`.
document* copy_document(std::string_view key, std::string_view content_type, std::string_view value);

// Returns a document holding one reference, owning `value` (may be null when value_bytes is 0).
// Throws std::length_error for a key over 65535 bytes or a content type over 32767 bytes.
document* make_document(std::string_view key, std::string_view content_type, std::unique_ptr<char[]> value,
                        std::size_t value_bytes);

}  // namespace percore::store
