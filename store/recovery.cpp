#include "store/recovery.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "store/segment_reader.hpp"
#include "store/shard_log.hpp"

namespace percore::store {

namespace {

bool parse_segment_name(const std::string& name, std::uint64_t& id) {
    if (name.size() != 20 || !name.ends_with(".seg")) return false;
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 16; ++i) {
        char c = name[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
        else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
        else return false;
        v = v << 4 | d;
    }
    id = v;
    return true;
}

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

std::expected<recovery_stats, std::string> recover_segments(
    env& e, const std::string& directory, const std::function<void(const record_view&, std::uint64_t)>& apply,
    const std::function<void(std::uint64_t, std::uint64_t)>& segment_done) {
    auto start = std::chrono::steady_clock::now();
    recovery_stats stats;
    auto names = e.list(directory);
    if (!names) return std::unexpected("cannot list " + directory + ": " + errno_text(names.error()));
    std::vector<std::uint64_t> ids;
    for (const std::string& n : *names) {
        std::uint64_t id;
        if (parse_segment_name(n, id)) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        bool last = i + 1 == ids.size();
        std::string path = directory + "/" + segment_file_name(ids[i]);
        stats.next_segment_id = ids[i] + 1;
        auto reader = segment_reader::open(e, path);
        if (!reader) {
            if (last && reader.error() == EBADMSG) {
                // created but its header never reached the disk: it holds nothing acknowledged
                auto file = e.open_readable(path);
                auto size = file ? (*file)->size() : io_result<std::uint64_t>(std::unexpected(file.error()));
                if (size && *size <= segment_header_bytes) {
                    if (auto r = e.remove(path); !r) return std::unexpected("cannot remove " + path + ": " + errno_text(r.error()));
                    stats.notes += "removed " + path + " (header never written); ";
                    continue;
                }
            }
            return std::unexpected("cannot read segment " + path + ": " +
                                   (reader.error() == EBADMSG ? std::string("not a percore segment")
                                                              : errno_text(reader.error())));
        }
        ++stats.segments;
        record_view rec;
        std::uint64_t offset;
        while (reader->next(rec, offset)) {
            ++stats.records;
            stats.max_version = std::max(stats.max_version, rec.version);
            apply(rec, ids[i]);
        }
        if (reader->error() != 0)
            return std::unexpected("cannot read segment " + path + ": " + errno_text(reader->error()));
        stats.bytes += reader->valid_bytes();
        switch (reader->end()) {
        case segment_reader::end_state::clean:
        case segment_reader::end_state::none:
            break;
        case segment_reader::end_state::torn_tail: {
            if (!last)
                return std::unexpected("segment " + path + " is cut short at byte " + std::to_string(reader->valid_bytes()) +
                                       " but newer segments follow it: records are missing; refusing to start");
            std::uint64_t cut = reader->file_bytes() - reader->valid_bytes();
            auto f = e.open_writable(path);
            if (!f) return std::unexpected("cannot open " + path + " to cut its torn tail: " + errno_text(f.error()));
            if (auto t = (*f)->truncate(reader->valid_bytes()); !t)
                return std::unexpected("cannot cut the torn tail of " + path + ": " + errno_text(t.error()));
            if (auto s = (*f)->sync(); !s) return std::unexpected("cannot sync " + path + ": " + errno_text(s.error()));
            stats.truncated_bytes += cut;
            stats.notes += "cut a torn tail of " + std::to_string(cut) + " bytes from " + path + "; ";
            break;
        }
        case segment_reader::end_state::corrupt:
            return std::unexpected("segment " + path + " has a damaged record at byte " +
                                   std::to_string(reader->valid_bytes()) +
                                   " with valid records after it (bit rot?); refusing to start. Restore the file, or "
                                   "move it away to give up its records");
        }
        if (segment_done) segment_done(ids[i], reader->valid_bytes());
    }
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
}

}  // namespace percore::store
