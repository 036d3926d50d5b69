// fault_env: an in-memory env for tests that simulates what a crash and a failing disk do to the
// store's files, deterministically from seeds.
//
// Model
// - A file has its current bytes (what reads see), its durable bytes (what a power cut keeps for
//   sure) and its pending operations: every write (append, write_at, zero_fill; appends and
//   overwrites alike) and truncate since the last successful sync, in the order they were made.
//   sync() applies the pending operations to the durable bytes.
// - The namespace (which names exist and which file or directory each one is) changes with
//   open_writable (create), create_directory, rename, remove. Each change stays pending until
//   sync_directory() of a directory it touches (for a rename: either one), which also commits the
//   earlier changes it builds on (to the same names, or creating a directory on its paths); a
//   rename of a directory moves everything below it as one change.
// - power_cut(seed): every pending namespace change is, independently and in order, kept or undone
//   (a kept rename is whole: never neither name nor a half). Every file keeps its durable bytes
//   plus a random prefix (possibly empty, possibly all) of its pending operations: a number of their
//   bytes is drawn, the writes are applied in order until it runs out, the last one kept possibly
//   torn at any byte (a torn write), and each truncate met on the way is kept or undone, ending the
//   prefix when undone. With zero_fill_torn_tails, the last kept bytes may be zeros instead of the
//   data (a size that reached the disk before the data did).
//   Every file object opened before becomes dead: its operations fail with EIO.
// - power_cut_keep(n): the same, deterministic: each file keeps exactly min(n, unsynced) bytes of
//   its pending writes in order, pending truncates are kept, pending namespace changes are undone
//   (or all kept with keep_directory_changes).
// - fail_next(op, err, count): the next `count` calls of op fail with err. fault_op::write (the same
//   as fault_op::append) is every call that writes data: append, write_at, zero_fill. A failed write
//   writes nothing, or with partial_failed_appends a random strict prefix of its data first (as a
//   real write cut by ENOSPC would; size() then counts what passed the end). A failed sync leaves
//   the pending writes in the current contents but never durable as written (fsyncgate): whether a
//   power cut keeps them or a later sync succeeds, the disk keeps the bytes it had there, and zeros
//   where they passed its end, as the kernel dropped the dirty pages. Only truncating them away or
//   writing over them again clears that.
// - set_capacity_bytes(n): a write that would take the bytes of all files past n fails with ENOSPC
//   and writes nothing. Overwriting bytes a file already has takes no space.
// Paths are plain strings; "a//b/" is "a/b". The parent of a path must exist as a directory
// ("/", "." and "" always do). Thread-safe: one mutex around everything.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "store/env.hpp"

namespace percore::store::testing {

enum class fault_op : std::uint8_t {
    append,
    write = append,
    sync,
    open,
    rename,
    remove,
    truncate,
    sync_directory,
    read,
    create_directory,
};
inline constexpr std::size_t fault_op_count = 9;

class fault_env final : public env {
public:
    explicit fault_env(std::uint64_t seed = 1);
    ~fault_env() override;
    fault_env(const fault_env&) = delete;
    fault_env& operator=(const fault_env&) = delete;

    io_result<std::unique_ptr<readable_file>> open_readable(const std::string& path) override;
    io_result<std::unique_ptr<writable_file>> open_writable(const std::string& path) override;
    io_result<std::vector<std::string>> list(const std::string& directory) override;
    io_result<void> create_directory(const std::string& path) override;
    io_result<void> remove(const std::string& path) override;
    io_result<void> rename(const std::string& from, const std::string& to) override;
    io_result<void> sync_directory(const std::string& path) override;
    bool exists(const std::string& path) override;

    void power_cut(std::uint64_t seed);
    void power_cut_keep(std::uint64_t unsynced_bytes_kept, bool keep_directory_changes = false);

    void fail_next(fault_op op, int err, std::uint32_t count = 1);
    void clear_failures();
    void set_partial_failed_appends(bool on);
    void set_zero_fill_torn_tails(bool on);
    void set_capacity_bytes(std::uint64_t bytes);  // UINT64_MAX: no limit (the default)

    // Inspection and setup for tests.
    std::optional<std::string> contents(const std::string& path) const;          // current bytes
    std::optional<std::string> durable_contents(const std::string& path) const;  // as of the last sync
    std::vector<std::string> files() const;          // every file path, sorted
    std::vector<std::string> durable_files() const;  // the file paths a power cut would surely keep
    std::uint64_t calls(fault_op op) const;          // attempts, failed ones included
    std::uint64_t bytes_used() const;                // current bytes of all files
    // Creates or replaces a file with these bytes, durable, its name durable too.
    void write_file(const std::string& path, std::string_view bytes);
    // Changes bytes of an existing file in place, in both the current and the durable contents (bit rot).
    void overwrite(const std::string& path, std::uint64_t offset, std::string_view bytes);

private:
    struct inode;
    struct node {
        std::shared_ptr<inode> file;  // null for a directory
        bool operator==(const node&) const = default;
    };
    using name_map = std::map<std::string, node>;
    struct pending_change {
        std::map<std::string, std::optional<node>> effects;  // nullopt: the name goes away
        std::set<std::string> directories;                   // syncing any of these commits it
    };
    class readable;
    class writable;
    friend class readable;
    friend class writable;

    static std::string normal(const std::string& path);
    static std::string parent_of(const std::string& path);
    bool is_directory(const std::string& path) const;
    bool has_children(const std::string& directory) const;
    std::optional<int> take_failure(fault_op op);
    void record_change(pending_change change);
    void finish_power_cut(std::mt19937_64* rng, std::uint64_t keep, bool keep_directory_changes);
    std::uint64_t used_locked() const;

    io_result<std::size_t> read_file(const inode& f, std::uint64_t generation, std::uint64_t offset, std::span<char> out);
    io_result<std::uint64_t> file_size(const inode& f, std::uint64_t generation);
    void write_locked(inode& f, std::uint64_t offset, std::string_view data);
    io_result<void> write_data(inode& f, std::uint64_t generation, std::optional<std::uint64_t> at,
                               std::span<const char> data);
    io_result<void> zero_fill_file(inode& f, std::uint64_t generation, std::uint64_t size);
    io_result<void> sync_file(inode& f, std::uint64_t generation);
    io_result<void> truncate_file(inode& f, std::uint64_t generation, std::uint64_t size);
    std::uint64_t append_position(const inode& f) const;

    mutable std::mutex mutex_;
    std::mt19937_64 rng_;
    name_map names_;          // current
    name_map durable_names_;  // as a power cut with every pending change undone would leave it
    std::vector<pending_change> pending_;
    std::uint64_t generation_ = 0;
    struct failure {
        int err = 0;
        std::uint32_t count = 0;
    };
    failure failures_[fault_op_count];
    std::uint64_t calls_[fault_op_count] = {};
    bool partial_failed_appends_ = false;
    bool zero_fill_torn_tails_ = false;
    std::uint64_t capacity_ = UINT64_MAX;
};

}  // namespace percore::store::testing
