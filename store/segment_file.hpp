// segment_file: an open, read-only handle on one log segment, shared by the snapshots that name
// it and by readers sending values from it.
//
// Contract
// - Made by the owning shard's store; reference counted with an atomic count, so a reader on any
//   shard may retain() it while a socket sends a value from it (sendfile) and release() it after.
// - The last release() closes the file. Deleting the file (compaction) does not invalidate open
//   handles: a snapshot or reader that still holds one keeps reading the bytes it pinned.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "store/env.hpp"

namespace percore::store {

class segment_file {
public:
    segment_file(std::uint64_t id, std::unique_ptr<readable_file> file) : id_(id), file_(std::move(file)) {}

    std::uint64_t id() const { return id_; }
    int descriptor() const { return file_->descriptor(); }
    readable_file& file() const { return *file_; }

    void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() const {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

private:
    ~segment_file() = default;
    std::uint64_t id_;
    std::unique_ptr<readable_file> file_;
    mutable std::atomic<std::uint32_t> refs_{1};
};

// The open segments of one store at one publication: immutable, shared by snapshots.
struct segment_table {
    std::vector<const segment_file*> files;  // each holds one reference, sorted by id
    ~segment_table() {
        for (const segment_file* f : files) f->release();
    }
    const segment_file* find(std::uint64_t id) const {
        for (const segment_file* f : files)
            if (f->id() == id) return f;
        return nullptr;
    }
};

}  // namespace percore::store
