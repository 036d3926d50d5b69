#include "tests/store/fault_env.hpp"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>

namespace percore::store::testing {

struct fault_env::inode {
    // A write (append, write_at, zero_fill) or truncate since the last successful sync.
    struct pending_op {
        bool truncate = false;
        std::uint64_t offset = 0;  // of the data, or the size a truncate sets
        std::string data;
        bool lost = false;         // a failed sync covered it: never durable as written
    };
    std::string current;
    std::string durable;               // what a power cut keeps for sure
    std::vector<pending_op> pending;   // in the order they were made
};

class fault_env::readable final : public readable_file {
public:
    readable(fault_env& e, std::shared_ptr<inode> f, std::uint64_t generation)
        : env_(e), file_(std::move(f)), generation_(generation) {}
    io_result<std::size_t> read_at(std::uint64_t offset, std::span<char> out) override {
        return env_.read_file(*file_, generation_, offset, out);
    }
    io_result<std::uint64_t> size() override { return env_.file_size(*file_, generation_); }

private:
    fault_env& env_;
    std::shared_ptr<inode> file_;
    std::uint64_t generation_;
};

class fault_env::writable final : public writable_file {
public:
    writable(fault_env& e, std::shared_ptr<inode> f, std::uint64_t generation)
        : env_(e), file_(std::move(f)), generation_(generation) {}
    io_result<void> append(std::span<const char> data) override {
        return env_.write_data(*file_, generation_, std::nullopt, data);
    }
    io_result<void> write_at(std::uint64_t offset, std::span<const char> data) override {
        return env_.write_data(*file_, generation_, offset, data);
    }
    io_result<void> zero_fill(std::uint64_t size) override { return env_.zero_fill_file(*file_, generation_, size); }
    io_result<void> sync() override { return env_.sync_file(*file_, generation_); }
    io_result<void> truncate(std::uint64_t size) override { return env_.truncate_file(*file_, generation_, size); }
    std::uint64_t size() const override { return env_.append_position(*file_); }

private:
    fault_env& env_;
    std::shared_ptr<inode> file_;
    std::uint64_t generation_;
};

namespace {

std::size_t index(fault_op op) {
    assert(static_cast<std::size_t>(op) < fault_op_count);
    return static_cast<std::size_t>(op);
}

bool is_root(const std::string& path) { return path.empty() || path == "/" || path == "."; }

bool is_below(const std::string& path, const std::string& directory) {
    return path.size() > directory.size() + 1 && path.starts_with(directory) && path[directory.size()] == '/';
}

// 0, everything, or anything between, so both extremes come up often.
std::uint64_t random_amount(std::mt19937_64& rng, std::uint64_t most) {
    switch (rng() % 4) {
    case 0: return 0;
    case 1: return most;
    default: return rng() % (most + 1);
    }
}

// Applies the first `kept` bytes of a write (the last `zeros` of them as zeros), or a truncate. A lost
// write leaves the bytes that were there; where it passed the end, the file grew by zeros.
template <class Op>
void apply_op(std::string& image, const Op& op, std::uint64_t kept, std::uint64_t zeros) {
    if (op.truncate) {
        image.resize(op.offset, '\0');
        return;
    }
    if (kept == 0) return;
    const std::uint64_t end = op.offset + kept;
    if (image.size() < end) image.resize(end, '\0');
    if (op.lost) return;
    const auto at = static_cast<std::ptrdiff_t>(op.offset);
    const auto data = static_cast<std::ptrdiff_t>(kept - zeros);
    std::copy(op.data.begin(), op.data.begin() + data, image.begin() + at);
    std::fill(image.begin() + at + data, image.begin() + static_cast<std::ptrdiff_t>(end), '\0');
}

}  // namespace

fault_env::fault_env(std::uint64_t seed) : rng_(seed) {}
fault_env::~fault_env() = default;

std::string fault_env::normal(const std::string& path) {
    std::string out;
    out.reserve(path.size());
    for (char c : path)
        if (c != '/' || out.empty() || out.back() != '/') out.push_back(c);
    if (out.size() > 1 && out.back() == '/') out.pop_back();
    return out.empty() ? std::string(".") : out;
}

std::string fault_env::parent_of(const std::string& path) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

bool fault_env::is_directory(const std::string& path) const {
    if (is_root(path)) return true;
    auto it = names_.find(path);
    return it != names_.end() && !it->second.file;
}

bool fault_env::has_children(const std::string& directory) const {
    auto it = names_.lower_bound(directory + "/");
    return it != names_.end() && is_below(it->first, directory);
}

std::optional<int> fault_env::take_failure(fault_op op) {
    ++calls_[index(op)];
    failure& f = failures_[index(op)];
    if (f.count == 0) return std::nullopt;
    --f.count;
    return f.err;
}

void fault_env::record_change(pending_change change) { pending_.push_back(std::move(change)); }

io_result<std::unique_ptr<readable_file>> fault_env::open_readable(const std::string& raw) {
    std::lock_guard lock(mutex_);
    if (auto err = take_failure(fault_op::open)) return std::unexpected(*err);
    const std::string path = normal(raw);
    if (is_directory(path)) return std::unexpected(EISDIR);
    auto it = names_.find(path);
    if (it == names_.end()) return std::unexpected(ENOENT);
    return std::make_unique<readable>(*this, it->second.file, generation_);
}

io_result<std::unique_ptr<writable_file>> fault_env::open_writable(const std::string& raw) {
    std::lock_guard lock(mutex_);
    if (auto err = take_failure(fault_op::open)) return std::unexpected(*err);
    const std::string path = normal(raw);
    if (is_directory(path)) return std::unexpected(EISDIR);
    auto it = names_.find(path);
    if (it != names_.end()) return std::make_unique<writable>(*this, it->second.file, generation_);
    const std::string parent = parent_of(path);
    if (!is_directory(parent)) return std::unexpected(names_.contains(parent) ? ENOTDIR : ENOENT);
    node created{std::make_shared<inode>()};
    names_[path] = created;
    record_change({{{path, created}}, {parent}});
    return std::make_unique<writable>(*this, created.file, generation_);
}

io_result<std::vector<std::string>> fault_env::list(const std::string& raw) {
    std::lock_guard lock(mutex_);
    const std::string directory = normal(raw);
    if (!is_directory(directory)) return std::unexpected(names_.contains(directory) ? ENOTDIR : ENOENT);
    std::vector<std::string> out;
    for (const auto& [path, n] : names_) {
        if (parent_of(path) != directory) continue;
        out.push_back(path.substr(path.rfind('/') + 1));
    }
    return out;
}

io_result<void> fault_env::create_directory(const std::string& raw) {
    std::lock_guard lock(mutex_);
    if (auto err = take_failure(fault_op::create_directory)) return std::unexpected(*err);
    const std::string path = normal(raw);
    if (is_directory(path)) return {};
    if (names_.contains(path)) return std::unexpected(ENOTDIR);
    const std::string parent = parent_of(path);
    if (!is_directory(parent)) return std::unexpected(names_.contains(parent) ? ENOTDIR : ENOENT);
    names_[path] = node{};
    record_change({{{path, node{}}}, {parent}});
    return {};
}

io_result<void> fault_env::remove(const std::string& raw) {
    std::lock_guard lock(mutex_);
    if (auto err = take_failure(fault_op::remove)) return std::unexpected(*err);
    const std::string path = normal(raw);
    if (is_root(path)) return std::unexpected(EBUSY);
    auto it = names_.find(path);
    if (it == names_.end()) return std::unexpected(ENOENT);
    if (!it->second.file && has_children(path)) return std::unexpected(ENOTEMPTY);
    names_.erase(it);
    record_change({{{path, std::nullopt}}, {parent_of(path)}});
    return {};
}

io_result<void> fault_env::rename(const std::string& raw_from, const std::string& raw_to) {
    std::lock_guard lock(mutex_);
    if (auto err = take_failure(fault_op::rename)) return std::unexpected(*err);
    const std::string from = normal(raw_from);
    const std::string to = normal(raw_to);
    if (is_root(from) || is_root(to)) return std::unexpected(EBUSY);
    auto source = names_.find(from);
    if (source == names_.end()) return std::unexpected(ENOENT);
    const std::string to_parent = parent_of(to);
    if (!is_directory(to_parent)) return std::unexpected(names_.contains(to_parent) ? ENOTDIR : ENOENT);
    if (from == to) return {};
    const node moved = source->second;
    auto target = names_.find(to);

    pending_change change;
    change.directories = {parent_of(from), to_parent};
    if (moved.file) {
        if (target != names_.end() && !target->second.file) return std::unexpected(EISDIR);
        change.effects[from] = std::nullopt;
        change.effects[to] = moved;
    } else {
        if (is_below(to, from)) return std::unexpected(EINVAL);
        if (target != names_.end()) {
            if (target->second.file) return std::unexpected(ENOTDIR);
            if (has_children(to)) return std::unexpected(ENOTEMPTY);
        }
        change.effects[from] = std::nullopt;
        change.effects[to] = moved;
        for (auto it = names_.lower_bound(from + "/"); it != names_.end() && is_below(it->first, from); ++it) {
            change.effects[it->first] = std::nullopt;
            change.effects[to + it->first.substr(from.size())] = it->second;
        }
    }
    for (const auto& [path, value] : change.effects)
        if (!value) names_.erase(path);
    for (const auto& [path, value] : change.effects)
        if (value) names_[path] = *value;
    record_change(std::move(change));
    return {};
}

namespace {

// Applies a change's removals before its additions, so a rename onto itself's subtree stays whole.
template <class Map, class Change>
void apply_change(Map& names, const Change& change) {
    for (const auto& [path, value] : change.effects)
        if (!value) names.erase(path);
    for (const auto& [path, value] : change.effects)
        if (value) names[path] = *value;
}

template <class Change>
bool touches(const Change& change, const std::set<std::string>& paths) {
    for (const auto& [path, value] : change.effects)
        if (paths.contains(path)) return true;
    return false;
}

}  // namespace

// Commits the pending changes in `directory`, and every earlier change they build on (one that
// touches the same names, or creates a directory they put names in).
io_result<void> fault_env::sync_directory(const std::string& raw) {
    std::lock_guard lock(mutex_);
    if (auto err = take_failure(fault_op::sync_directory)) return std::unexpected(*err);
    const std::string directory = normal(raw);
    if (!is_directory(directory)) return std::unexpected(names_.contains(directory) ? ENOTDIR : ENOENT);

    std::vector<bool> commit(pending_.size(), false);
    std::set<std::string> needed;
    for (std::size_t i = pending_.size(); i-- > 0;) {
        const pending_change& change = pending_[i];
        if (!change.directories.contains(directory) && !touches(change, needed)) continue;
        commit[i] = true;
        for (const auto& [path, value] : change.effects) {
            for (std::string p = path; !is_root(p); p = parent_of(p)) needed.insert(p);
        }
    }
    std::vector<pending_change> still_pending;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
        if (commit[i])
            apply_change(durable_names_, pending_[i]);
        else
            still_pending.push_back(std::move(pending_[i]));
    }
    pending_ = std::move(still_pending);
    return {};
}

bool fault_env::exists(const std::string& raw) {
    std::lock_guard lock(mutex_);
    const std::string path = normal(raw);
    return is_root(path) || names_.contains(path);
}

void fault_env::power_cut(std::uint64_t seed) {
    std::lock_guard lock(mutex_);
    std::mt19937_64 rng(seed);
    finish_power_cut(&rng, 0, false);
}

void fault_env::power_cut_keep(std::uint64_t unsynced_bytes_kept, bool keep_directory_changes) {
    std::lock_guard lock(mutex_);
    finish_power_cut(nullptr, unsynced_bytes_kept, keep_directory_changes);
}

void fault_env::finish_power_cut(std::mt19937_64* rng, std::uint64_t keep, bool keep_directory_changes) {
    name_map after = durable_names_;
    for (const pending_change& change : pending_) {
        const bool kept = rng ? ((*rng)() & 1) != 0 : keep_directory_changes;
        if (!kept) continue;
        bool parents_exist = true;
        for (const auto& [path, value] : change.effects) {
            const std::string parent = parent_of(path);
            if (value && !is_root(parent) && !change.effects.contains(parent) && !after.contains(parent))
                parents_exist = false;
        }
        if (parents_exist) apply_change(after, change);
    }
    pending_.clear();
    names_ = after;
    durable_names_ = std::move(after);

    std::set<inode*> done;
    for (auto& [path, n] : names_) {
        if (!n.file || !done.insert(n.file.get()).second) continue;
        inode& f = *n.file;
        std::uint64_t unsynced = 0;
        for (const auto& op : f.pending) unsynced += op.data.size();
        std::uint64_t budget = rng ? random_amount(*rng, unsynced) : std::min(keep, unsynced);
        // the pending operations kept: a prefix, its last write possibly torn
        std::vector<std::uint64_t> kept(f.pending.size(), 0);
        std::size_t applied = 0;
        std::uint64_t kept_bytes = 0;
        for (std::size_t i = 0; i < f.pending.size(); ++i) {
            const auto& op = f.pending[i];
            if (op.truncate) {
                if (rng && ((*rng)() & 1) == 0) break;
                applied = i + 1;
                continue;
            }
            kept[i] = std::min<std::uint64_t>(op.data.size(), budget);
            budget -= kept[i];
            kept_bytes += kept[i];
            if (kept[i] == 0) break;
            applied = i + 1;
            if (kept[i] < op.data.size()) break;
        }
        std::uint64_t zeros = 0;
        if (rng && zero_fill_torn_tails_ && kept_bytes > 0 && ((*rng)() & 1) != 0) zeros = 1 + (*rng)() % kept_bytes;
        std::vector<std::uint64_t> zeroed(applied, 0);
        for (std::size_t i = applied; i-- > 0 && zeros > 0;) {
            zeroed[i] = std::min(zeros, kept[i]);
            zeros -= zeroed[i];
        }
        std::string survived = f.durable;
        for (std::size_t i = 0; i < applied; ++i) apply_op(survived, f.pending[i], kept[i], zeroed[i]);
        f.current = survived;
        f.durable = std::move(survived);
        f.pending.clear();
    }
    ++generation_;
}

void fault_env::fail_next(fault_op op, int err, std::uint32_t count) {
    std::lock_guard lock(mutex_);
    assert(err != 0);
    failures_[index(op)] = {err, count};
}

void fault_env::clear_failures() {
    std::lock_guard lock(mutex_);
    for (failure& f : failures_) f = {};
}

void fault_env::set_partial_failed_appends(bool on) {
    std::lock_guard lock(mutex_);
    partial_failed_appends_ = on;
}

void fault_env::set_zero_fill_torn_tails(bool on) {
    std::lock_guard lock(mutex_);
    zero_fill_torn_tails_ = on;
}

void fault_env::set_capacity_bytes(std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    capacity_ = bytes;
}

std::optional<std::string> fault_env::contents(const std::string& path) const {
    std::lock_guard lock(mutex_);
    auto it = names_.find(normal(path));
    if (it == names_.end() || !it->second.file) return std::nullopt;
    return it->second.file->current;
}

std::optional<std::string> fault_env::durable_contents(const std::string& path) const {
    std::lock_guard lock(mutex_);
    auto it = names_.find(normal(path));
    if (it == names_.end() || !it->second.file) return std::nullopt;
    return it->second.file->durable;
}

std::vector<std::string> fault_env::files() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [path, n] : names_)
        if (n.file) out.push_back(path);
    return out;
}

std::vector<std::string> fault_env::durable_files() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [path, n] : durable_names_)
        if (n.file) out.push_back(path);
    return out;
}

std::uint64_t fault_env::calls(fault_op op) const {
    std::lock_guard lock(mutex_);
    return calls_[index(op)];
}

std::uint64_t fault_env::used_locked() const {
    std::uint64_t total = 0;
    for (const auto& [path, n] : names_)
        if (n.file) total += n.file->current.size();
    return total;
}

std::uint64_t fault_env::bytes_used() const {
    std::lock_guard lock(mutex_);
    return used_locked();
}

void fault_env::write_file(const std::string& raw, std::string_view bytes) {
    std::lock_guard lock(mutex_);
    const std::string path = normal(raw);
    for (std::string p = parent_of(path); !is_root(p); p = parent_of(p)) {
        assert(!names_.contains(p) || !names_.at(p).file);
        names_.try_emplace(p, node{});
        durable_names_.try_emplace(p, node{});
    }
    assert(!is_directory(path));
    node n{std::make_shared<inode>()};
    n.file->current = std::string(bytes);
    n.file->durable = n.file->current;
    names_[path] = n;
    durable_names_[path] = n;
}

void fault_env::overwrite(const std::string& path, std::uint64_t offset, std::string_view bytes) {
    std::lock_guard lock(mutex_);
    auto it = names_.find(normal(path));
    assert(it != names_.end() && it->second.file);
    inode& f = *it->second.file;
    assert(offset + bytes.size() <= f.current.size());
    auto patch = [&](std::string& target, std::uint64_t target_offset) {
        const std::uint64_t from = std::max(offset, target_offset);
        const std::uint64_t to = std::min<std::uint64_t>(offset + bytes.size(), target_offset + target.size());
        if (from >= to) return;
        target.replace(from - target_offset, to - from, bytes.substr(from - offset, to - from));
    };
    patch(f.current, 0);
    patch(f.durable, 0);
    for (auto& op : f.pending)
        if (!op.truncate) patch(op.data, op.offset);
}

io_result<std::size_t> fault_env::read_file(const inode& f, std::uint64_t generation, std::uint64_t offset,
                                            std::span<char> out) {
    std::lock_guard lock(mutex_);
    if (auto err = take_failure(fault_op::read)) return std::unexpected(*err);
    if (generation != generation_) return std::unexpected(EIO);
    if (offset >= f.current.size()) return 0;
    const auto n = std::min<std::uint64_t>(out.size(), f.current.size() - offset);
    std::memcpy(out.data(), f.current.data() + offset, n);
    return n;
}

io_result<std::uint64_t> fault_env::file_size(const inode& f, std::uint64_t generation) {
    std::lock_guard lock(mutex_);
    if (generation != generation_) return std::unexpected(EIO);
    return f.current.size();
}

void fault_env::write_locked(inode& f, std::uint64_t offset, std::string_view data) {
    if (data.empty()) return;
    if (f.current.size() < offset + data.size()) f.current.resize(offset + data.size(), '\0');
    f.current.replace(offset, data.size(), data);
    f.pending.push_back({false, offset, std::string(data), false});
}

io_result<void> fault_env::write_data(inode& f, std::uint64_t generation, std::optional<std::uint64_t> at,
                                      std::span<const char> data) {
    std::lock_guard lock(mutex_);
    const std::uint64_t offset = at.value_or(f.current.size());
    if (auto err = take_failure(fault_op::write)) {
        if (generation == generation_ && partial_failed_appends_ && !data.empty())
            write_locked(f, offset, std::string_view(data.data(), rng_() % data.size()));
        return std::unexpected(*err);
    }
    if (generation != generation_) return std::unexpected(EIO);
    const std::uint64_t end = offset + data.size();
    const std::uint64_t growth = end > f.current.size() ? end - f.current.size() : 0;
    if (capacity_ != UINT64_MAX && used_locked() + growth > capacity_) return std::unexpected(ENOSPC);
    write_locked(f, offset, std::string_view(data.data(), data.size()));
    return {};
}

io_result<void> fault_env::zero_fill_file(inode& f, std::uint64_t generation, std::uint64_t size) {
    std::lock_guard lock(mutex_);
    const std::uint64_t from = f.current.size();
    const std::uint64_t growth = size > from ? size - from : 0;
    if (auto err = take_failure(fault_op::write)) {
        if (generation == generation_ && partial_failed_appends_ && growth > 0)
            write_locked(f, from, std::string(rng_() % growth, '\0'));
        return std::unexpected(*err);
    }
    if (generation != generation_) return std::unexpected(EIO);
    if (capacity_ != UINT64_MAX && used_locked() + growth > capacity_) return std::unexpected(ENOSPC);
    write_locked(f, from, std::string(growth, '\0'));
    return {};
}

io_result<void> fault_env::sync_file(inode& f, std::uint64_t generation) {
    std::lock_guard lock(mutex_);
    if (auto err = take_failure(fault_op::sync)) {
        if (generation == generation_)
            for (auto& op : f.pending) op.lost = true;
        return std::unexpected(*err);
    }
    if (generation != generation_) return std::unexpected(EIO);
    for (const auto& op : f.pending) apply_op(f.durable, op, op.data.size(), 0);
    f.pending.clear();
    return {};
}

io_result<void> fault_env::truncate_file(inode& f, std::uint64_t generation, std::uint64_t size) {
    std::lock_guard lock(mutex_);
    if (auto err = take_failure(fault_op::truncate)) return std::unexpected(*err);
    if (generation != generation_) return std::unexpected(EIO);
    f.current.resize(size, '\0');
    f.pending.push_back({true, size, {}, false});
    return {};
}

std::uint64_t fault_env::append_position(const inode& f) const {
    std::lock_guard lock(mutex_);
    return f.current.size();
}

}  // namespace percore::store::testing
