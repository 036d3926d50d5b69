// document: one immutable version of a stored value, shared by every snapshot that holds it.
//
// Contract
// - Made by make_document() or copy_document() on any thread (in percore: the shard that received
//   the request), then handed to the owning shard's store, which stamps its version once before
//   publishing it. After publication nothing in it changes.
// - Memory: a store makes the documents it keeps in its own document_pool (document_pool.hpp), on
//   its thread: the functions that take a pool, and move_to_pool() for a document made elsewhere
//   (with malloc); a document that does not fit a pool's classes comes from malloc whichever way
//   it was made. pooled() tells which.
// - Reference counted with an atomic count: the store holds one reference per tree node that
//   points at it; a reader may retain() a document it found in a snapshot it is reading (while the
//   snapshot is pinned) to keep the value alive past that, e.g. while a socket sends it. Whoever
//   drops the last reference frees it, on whatever thread that is (a pooled document goes back to
//   its pool, which must still exist: document_pool.hpp).
// - Layout: a 24-byte header, then the key, the content type (unless well known) and either the
//   value (up to inline_value_max_bytes) or, aligned, one word: the value's own buffer, or its
//   offset in the log once it lives only there; a copy (below) ends with its copied version (8
//   bytes, unaligned). One allocation per document.
// - Two numbers: version() is the store's own, its position in the shard's change feed (ascending
//   per shard); etag_version() is what clients see (ETag, If-Match, ...). They are equal for every
//   document the store gave its version; a copy — another board's document copied by a follower
//   (SPEC §10) — keeps the ETag version that board gave it. Only copies pay for the second number.
// - The key is the store's opaque byte-string key; the store knows nothing of apps or HTTP.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string_view>

#include "shards/runtime/check.hpp"
#include "store/document_pool.hpp"
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
        if (content_type_bytes_ & inline_value_flag) return {inline_value_data(), value_bytes_};
        return {outside()->data, value_bytes_};
    }
    std::size_t value_size() const { return value_bytes_; }
    // Large values live only in the log once their batch is durable: value_size() bytes at
    // file_offset() of segment().
    bool in_file() const { return content_type_bytes_ & file_value_flag; }
    std::uint64_t file_offset() const {
        PERCORE_DEBUG_ASSERT(in_file());
        return outside()->file_offset;
    }
    // The store's version: the change feed's position (shard_store.hpp).
    std::uint64_t version() const { return version_; }
    // The ETag's version: the copied one for a copy, else version().
    std::uint64_t etag_version() const { return copied_ ? copied_version() : version_; }
    // Whether the ETag version is another board's (made by with_copied_version, or by recovery and
    // compaction from a copy record).
    bool copied() const { return copied_; }
    // Whether the document's memory is a store's document_pool's (else malloc's).
    bool pooled() const { return pooled_; }

    void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() const;

    // The log segment that holds this version's record; 0 until it is written.
    std::uint32_t segment() const { return segment_; }

    // Owner thread, before publication only.
    void set_version(std::uint64_t version) { version_ = version; }
    void set_segment(std::uint32_t segment) {
        PERCORE_DEBUG_ASSERT(segment <= max_segment_id);
        segment_ = static_cast<std::uint32_t>(segment & max_segment_id);
    }
    // Frees the in-memory value: from now on it is read from segment() at `offset`.
    void move_value_to_file(std::uint64_t offset);

    // Bytes this document costs beyond its value (header, key, content type, and the value's
    // buffer or file offset when the value is not inline), before any allocator's rounding.
    std::size_t overhead_bytes() const {
        return allocation_bytes() - ((content_type_bytes_ & inline_value_flag) ? value_bytes_ : 0);
    }
    // Values up to this size share the document's allocation (one allocation per document).
    static constexpr std::size_t inline_value_max_bytes = 256;

private:
    friend document* make_document(std::string_view, std::string_view, std::unique_ptr<char[]>, std::size_t);
    friend document* copy_document(std::string_view, std::string_view, std::string_view);
    friend document* copy_document(document_pool&, std::string_view, std::string_view, std::string_view,
                                   std::uint64_t);
    friend document* file_document(document_pool&, std::string_view, std::string_view, std::size_t, std::uint32_t,
                                   std::uint64_t, std::uint64_t);
    friend document* move_to_pool(document_pool&, document*);
    friend document* with_copied_version(document_pool&, document*, std::uint64_t);
    enum class value_place : std::uint8_t { inline_value, buffer, file };
    // A document of one reference with its header, key and content type filled in, from `pool` when
    // given and the document fits its classes, else from malloc; the caller places the value.
    // Throws std::length_error for a key, content type or value over what the header can hold.
    // `copied_version` != 0: a copy ending with it.
    static document* build(document_pool* pool, std::string_view key, std::string_view content_type,
                           value_place place, std::size_t value_bytes, std::uint64_t copied_version = 0);
    // A copy of `value` in a document: inline when it is small enough, else in a buffer of its own.
    static document* build_copy(document_pool* pool, std::string_view key, std::string_view content_type,
                                std::string_view value, std::uint64_t copied_version = 0);
    document() = default;
    ~document() {
        if (!(content_type_bytes_ & (inline_value_flag | file_value_flag))) delete[] outside()->data;
    }
    // The one word after key and content type of a document whose value is not inline.
    union outside_value {
        char* data;                 // owned (new[])
        std::uint64_t file_offset;  // file_value_flag
    };
    static constexpr std::size_t header_and_names(std::size_t key_bytes, std::size_t content_type_bytes) {
        return sizeof(document) + key_bytes + content_type_bytes;
    }
    static constexpr std::size_t outside_value_at(std::size_t names_end) {
        return (names_end + alignof(outside_value) - 1) / alignof(outside_value) * alignof(outside_value);
    }
    static constexpr std::size_t allocation_bytes(std::size_t key_bytes, std::size_t content_type_bytes,
                                                  value_place place, std::size_t value_bytes, bool copied) {
        const std::size_t names_end = header_and_names(key_bytes, content_type_bytes);
        return (place == value_place::inline_value ? names_end + value_bytes
                                                   : outside_value_at(names_end) + sizeof(outside_value)) +
               (copied ? copied_version_bytes : 0);
    }
    std::size_t allocation_bytes() const {
        const bool is_inline = content_type_bytes_ & inline_value_flag;
        return allocation_bytes(key_bytes_, inline_content_type_bytes(),
                                is_inline ? value_place::inline_value : value_place::buffer, value_bytes_, copied_);
    }
    // A copy's last 8 bytes (unaligned after an inline value: copied, not loaded in place).
    char* copied_version_data() const {
        return reinterpret_cast<char*>(const_cast<document*>(this)) + allocation_bytes() - copied_version_bytes;
    }
    std::uint64_t copied_version() const;
    const char* key_data() const { return reinterpret_cast<const char*>(this + 1); }
    const char* inline_value_data() const { return key_data() + key_bytes_ + inline_content_type_bytes(); }
    outside_value* outside() const {
        auto* at = reinterpret_cast<char*>(const_cast<document*>(this)) +
                   outside_value_at(header_and_names(key_bytes_, inline_content_type_bytes()));
        return std::launder(reinterpret_cast<outside_value*>(at));
    }

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
    std::uint32_t value_bytes_ : 31 = 0;  // at most max_value_bytes
    std::uint32_t pooled_ : 1 = 0;        // the memory is a document_pool's
    std::uint32_t segment_ : 31 = 0;      // the log segment holding this version's record (0: none yet)
    std::uint32_t copied_ : 1 = 0;        // a copy: its allocation ends with the copied version
    // followed by key bytes, content-type bytes (unless well known), then the value bytes (if
    // inline) or, aligned, an outside_value; then, for a copy, the copied version (u64)
};

// 24 bytes: with a 32-byte tree node (tree_node.hpp) and a 56-byte pooled block (13-byte key,
// 16-byte value, 53 rounded to a class), 59 B a document beyond key and value; the value's word
// (8 B) is paid only by the documents whose value is not inline.
static_assert(sizeof(document) == 24);
// The value's size fits the 31 bits left beside the pooled flag; a segment id the 31 left beside
// the copy flag (limits.hpp, max_segment_id: 2^31 - 1 segments, ~128 PiB of log).
static_assert(max_value_bytes < (std::size_t{1} << 31));
static_assert(max_segment_id < (std::uint64_t{1} << 31));
// A document with an empty key holds a free pool block's link; an inline value of the largest
// size with a key of some length fits a pool class.
static_assert(sizeof(document) >= document_pool::min_block_bytes);
static_assert(sizeof(document) + document::inline_value_max_bytes + 128 <= max_pooled_document_bytes);

// Returns a document in `pool` (owner thread) holding one reference, whose value lives only in the
// log: `value_bytes` at `offset` of `segment`. `copied_version` != 0: a copy with that ETag version.
document* file_document(document_pool& pool, std::string_view key, std::string_view content_type,
                        std::size_t value_bytes, std::uint32_t segment, std::uint64_t offset,
                        std::uint64_t copied_version = 0);

// Returns a document holding one reference and a copy of `value`; with a pool, in the pool (its
// owner thread only). `copied_version` != 0: a copy with that ETag version.
document* copy_document(std::string_view key, std::string_view content_type, std::string_view value);
document* copy_document(document_pool& pool, std::string_view key, std::string_view content_type,
                        std::string_view value, std::uint64_t copied_version = 0);

// `pool`'s owner thread, before publication. Returns `doc` made a copy whose ETag version is
// `copied_version` (!= 0): a new document (in `pool` when it fits, else from malloc) with doc's key,
// content type and value (its buffer taken over when no one else holds `doc`), whose one reference
// goes to the caller; releases `doc`, whose one reference the caller gives. REQUIRES: the value in
// memory (!in_file()). The store calls it on a follower's write (write_op::copied_version).
document* with_copied_version(document_pool& pool, document* doc, std::uint64_t copied_version);

// Returns a document holding one reference, owning `value` (may be null when value_bytes is 0).
// Throws std::length_error for a key over 65535 bytes, a content type over 8191 bytes or a value
// over max_value_bytes.
document* make_document(std::string_view key, std::string_view content_type, std::unique_ptr<char[]> value,
                        std::size_t value_bytes);

// `pool`'s owner thread. Returns a copy of `doc` in `pool` (versions and segment included) and
// releases `doc`, whose one reference the caller gives; or `doc` itself, unchanged, when it is
// pooled already, another holder has a reference to it, its value is not inline, or it does not fit
// the pool. A store calls it on the documents it takes from other threads.
document* move_to_pool(document_pool& pool, document* doc);

}  // namespace percore::store
