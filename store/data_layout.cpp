#include "store/data_layout.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <sys/random.h>

#include "store/epoch.hpp"
#include "store/log_format.hpp"
#include "store/recovery.hpp"
#include "store/shard_log.hpp"
#include "store/shard_store.hpp"

namespace percore::store {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

std::string layout_directory(const std::string& root, std::uint64_t generation) {
    return root + "/layout-" + std::to_string(generation);
}

struct format_file {
    std::uint32_t version = 0;
    std::uint64_t generation = 0;
    unsigned shards = 0;
    std::uint64_t directory_id = 0;  // 0: a FORMAT written before the line existed
};

// A fresh directory id: 64 random bits (getrandom; the kernel's pool is ready once the machine has
// booted). Never 0, which stands for "none" in format_file.
std::uint64_t new_directory_id() {
    std::uint64_t id = 0;
    while (id == 0) {
        if (::getrandom(&id, sizeof id, 0) != static_cast<ssize_t>(sizeof id)) {
            // no entropy source at all: the clock still tells two directories apart in practice
            id = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) |
                 1;
        }
    }
    return id;
}

result<format_file> read_format(env& e, const std::string& path) {
    auto f = e.open_readable(path);
    if (!f) return std::unexpected("cannot open " + path + ": " + errno_text(f.error()));
    char buf[256];
    auto n = (*f)->read_at(0, std::span<char>(buf, sizeof buf - 1));
    if (!n) return std::unexpected("cannot read " + path + ": " + errno_text(n.error()));
    buf[*n] = 0;
    format_file ff;
    unsigned long long generation = 0;
    unsigned version = 0, shards = 0;
    if (std::sscanf(buf, "percore-data %u\nlayout %llu\nshards %u\n", &version, &generation, &shards) != 3)
        return std::unexpected(path + " is not a percore FORMAT file: refusing to use this data directory");
    ff.version = version;
    ff.generation = generation;
    ff.shards = shards;
    if (const char* line = std::strstr(buf, "\ndirectory "))
        ff.directory_id = std::strtoull(line + 11, nullptr, 16);
    return ff;
}

result<void> write_format(env& e, const std::string& root, std::uint64_t generation, unsigned shards,
                          std::uint64_t directory_id) {
    char id[32];
    std::snprintf(id, sizeof id, "directory %016llx\n", static_cast<unsigned long long>(directory_id));
    std::string text = "percore-data " + std::to_string(data_format_version) + "\nlayout " + std::to_string(generation) +
                       "\nshards " + std::to_string(shards) + "\n" + id;
    std::string tmp = root + "/FORMAT.tmp";
    (void)e.remove(tmp);  // a leftover of an interrupted write, or none (ENOENT): not an error either way
    auto f = e.open_writable(tmp);
    if (!f) return std::unexpected("cannot create " + tmp + ": " + errno_text(f.error()));
    if (auto r = (*f)->append(std::span<const char>(text.data(), text.size())); !r)
        return std::unexpected("cannot write " + tmp + ": " + errno_text(r.error()));
    if (auto r = (*f)->sync(); !r) return std::unexpected("cannot sync " + tmp + ": " + errno_text(r.error()));
    f->reset();
    if (auto r = e.rename(tmp, root + "/FORMAT"); !r)
        return std::unexpected("cannot replace " + root + "/FORMAT: " + errno_text(r.error()));
    if (auto r = e.sync_directory(root); !r) return std::unexpected("cannot sync " + root + ": " + errno_text(r.error()));
    return {};
}

result<void> remove_tree(env& e, const std::string& path) {
    auto names = e.list(path);
    if (!names) return {};  // gone already
    for (const std::string& n : *names) {
        std::string child = path + "/" + n;
        if (e.list(child)) {
            if (auto r = remove_tree(e, child); !r) return r;
        } else if (auto r = e.remove(child); !r) {
            return std::unexpected("cannot remove " + child + ": " + errno_text(r.error()));
        }
    }
    if (auto r = e.remove(path); !r) return std::unexpected("cannot remove " + path + ": " + errno_text(r.error()));
    return {};
}

result<void> create_shard_directories(env& e, const data_layout& l) {
    std::string dir = layout_directory(l.root, l.generation);
    if (auto r = e.create_directory(dir); !r) return std::unexpected("cannot create " + dir + ": " + errno_text(r.error()));
    for (unsigned i = 0; i < l.shards; ++i)
        if (auto r = e.create_directory(l.shard_directory(i)); !r)
            return std::unexpected("cannot create " + l.shard_directory(i) + ": " + errno_text(r.error()));
    for (unsigned i = 0; i < l.shards; ++i)
        if (auto r = e.sync_directory(l.shard_directory(i)); !r)
            return std::unexpected("cannot sync " + l.shard_directory(i) + ": " + errno_text(r.error()));
    if (auto r = e.sync_directory(dir); !r) return std::unexpected("cannot sync " + dir + ": " + errno_text(r.error()));
    if (auto r = e.sync_directory(l.root); !r) return std::unexpected("cannot sync " + l.root + ": " + errno_text(r.error()));
    return {};
}

// Copies every live document of `from` into a new layout `to`, each into its owner's first segment.
result<std::uint64_t> copy_documents(env& e, const data_layout& from, const data_layout& to,
                                                         const owner_function& owner_of) {
    // Versions continue above every version any old shard handed out, deleted keys' included, and
    // above every copy's ETag version (recovery's max_version counts them): each new segment starts
    // with a segment list that carries that floor (log_format.hpp).
    std::uint64_t floor = 1;
    for (unsigned s = 0; s < from.shards; ++s) {
        auto stats = recover_segments(e, from.shard_directory(s), [](const record_view&, std::uint64_t, std::uint64_t) {});
        if (!stats) return std::unexpected(stats.error());
        floor = std::max(floor, stats->max_version + 1);
    }
    if (auto r = create_shard_directories(e, to); !r) return std::unexpected(r.error());
    std::vector<std::unique_ptr<writable_file>> out(to.shards);
    for (unsigned i = 0; i < to.shards; ++i) {
        std::string path = to.shard_directory(i) + "/" + segment_file_name(1);
        auto f = e.open_writable(path);
        if (!f) return std::unexpected("cannot create " + path + ": " + errno_text(f.error()));
        char header[segment_header_bytes];
        encode_segment_header(header, i, 1);
        std::string first(header, sizeof header);
        encode_record(first, record_kind::segment_list, floor, {}, {}, encode_segment_list({}));  // no older segment
        if (auto r = (*f)->append(std::span<const char>(first.data(), first.size())); !r)
            return std::unexpected("cannot write " + path + ": " + errno_text(r.error()));
        out[i] = std::move(*f);
    }
    std::uint64_t documents = 0;
    std::string record;
    for (unsigned s = 0; s < from.shards; ++s) {
        reader_epochs epochs(1);
        shard_store old(epochs, 1);
        auto rec = old.recover(e, from.shard_directory(s));
        if (!rec) return std::unexpected(rec.error());
        const snapshot* snap = old.current();
        snapshot::cursor c;
        std::string value;
        for (c.seek(*snap, {}, false); c.valid(); c.next()) {
            const document& d = c.doc();
            unsigned owner = owner_of(d.key(), to.shards);
            if (auto r = old.read_value(d, value); !r)
                return std::unexpected("cannot read a value from " + from.shard_directory(s) + ": " + errno_text(r.error()));
            record.clear();
            // a copy stays one: its ETag version is its primary's (log_format.hpp, kind 5)
            encode_document_record(record, d.version(), d.etag_version(), d.key(), d.content_type(), value);
            if (auto r = out[owner]->append(std::span<const char>(record.data(), record.size())); !r)
                return std::unexpected("cannot write the new layout: " + errno_text(r.error()));
            ++documents;
        }
    }
    for (unsigned i = 0; i < to.shards; ++i)
        if (auto r = out[i]->sync(); !r) return std::unexpected("cannot sync the new layout: " + errno_text(r.error()));
    for (unsigned i = 0; i < to.shards; ++i)
        if (auto r = e.sync_directory(to.shard_directory(i)); !r)
            return std::unexpected("cannot sync " + to.shard_directory(i) + ": " + errno_text(r.error()));
    return documents;
}

}  // namespace

bool holds_segments(env& e, const std::string& layout) {
    auto shards = e.list(layout);
    if (!shards) return false;
    for (const std::string& shard : *shards) {
        auto files = e.list(layout + "/" + shard);
        if (!files) continue;
        for (const std::string& f : *files)
            if (f.ends_with(".seg")) return true;
    }
    return false;
}

result<data_layout> read_layout(env& e, const std::string& root) {
    auto format = read_format(e, root + "/FORMAT");
    if (!format) return std::unexpected(format.error());
    if (format->version != data_format_version)
        return std::unexpected(root + " was written by an incompatible percore (data format " +
                               std::to_string(format->version) + ", this build reads " +
                               std::to_string(data_format_version) + "): refusing to use it");
    return data_layout{root, format->generation, format->shards, format->directory_id};
}

std::string data_layout::shard_directory(unsigned shard) const {
    char name[32];
    std::snprintf(name, sizeof name, "/shard-%03u", shard);
    return layout_directory(root, generation) + name;
}

result<data_layout> open_layout(env& e, const std::string& root, unsigned shards,
                                                    const owner_function& owner_of, const log_function& log) {
    std::string format_path = root + "/FORMAT";
    data_layout current{root, 1, shards, new_directory_id()};
    if (!e.exists(format_path)) {
        auto names = e.list(root);
        if (!names) return std::unexpected("cannot list " + root + ": " + errno_text(names.error()));
        for (const std::string& n : *names)
            if (n != "LOCK" && n != "FORMAT.tmp" && !n.starts_with("layout-"))
                return std::unexpected(root + " holds files but no FORMAT: not a percore data directory, refusing to use it");
        for (const std::string& n : *names) {
            if (!n.starts_with("layout-")) continue;
            // a layout without FORMAT is a first start cut short, unless it already holds segments
            if (holds_segments(e, root + "/" + n))
                return std::unexpected(root + " has no FORMAT but " + n +
                                       " holds log segments: refusing to start rather than discard them");
            if (auto r = remove_tree(e, root + "/" + n); !r) return std::unexpected(r.error());
        }
        if (auto r = create_shard_directories(e, current); !r) return std::unexpected(r.error());
        if (auto r = write_format(e, root, current.generation, shards, current.directory_id); !r)
            return std::unexpected(r.error());
        log("created a new data directory " + root + " for " + std::to_string(shards) + " shards");
        return current;
    }
    auto format = read_layout(e, root);
    if (!format) return std::unexpected(format.error());
    current.generation = format->generation;
    current.shards = format->shards;
    if (format->directory_id != 0) {
        current.directory_id = format->directory_id;
    } else if (auto r = write_format(e, root, current.generation, current.shards, current.directory_id); !r) {
        return std::unexpected("cannot give " + root + " a directory id: " + r.error());  // FORMAT unchanged
    }
    // leftovers of an interrupted resharding, or of the layout before the last one
    if (auto names = e.list(root)) {
        std::string keep = "layout-" + std::to_string(current.generation);
        for (const std::string& n : *names)
            if (n.starts_with("layout-") && n != keep)
                if (auto r = remove_tree(e, root + "/" + n); !r) return std::unexpected(r.error());
    }
    for (unsigned i = 0; i < current.shards; ++i)
        if (!e.exists(current.shard_directory(i)))
            return std::unexpected("shard directory " + current.shard_directory(i) + " is missing: refusing to start");
    if (current.shards == shards) return current;

    auto start = std::chrono::steady_clock::now();
    log("resharding " + root + " from " + std::to_string(current.shards) + " to " + std::to_string(shards) + " shards");
    data_layout next{root, current.generation + 1, shards, current.directory_id};
    auto copied = copy_documents(e, current, next, owner_of);
    if (!copied) return std::unexpected("resharding failed (the data is unchanged): " + copied.error());
    if (auto r = write_format(e, root, next.generation, shards, next.directory_id); !r)
        return std::unexpected("resharding failed (the data is unchanged): " + r.error());
    if (auto r = remove_tree(e, layout_directory(root, current.generation)); !r)
        log("could not remove the old layout (it is removed at the next start): " + r.error());
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log("resharded " + std::to_string(*copied) + " documents in " + std::to_string(seconds) + " s");
    return next;
}

}  // namespace percore::store
