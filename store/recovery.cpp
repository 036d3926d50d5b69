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

constexpr std::uint64_t max_plausible_version = std::uint64_t{1} << 63;

// Records are appended only after a segment's header and segment list were synced, so a segment
// whose header is bad holds something acknowledged only if a record can be found in it.
// Small files only: a large one with a bad header is damage, not an interrupted creation.
bool holds_no_record(env& e, const std::string& path) {
    constexpr std::uint64_t max_scanned_bytes = 1 << 20;
    auto file = e.open_readable(path);
    if (!file) return false;
    auto size = (*file)->size();
    if (!size || *size > max_scanned_bytes) return false;
    std::string bytes(*size, '\0');
    auto n = (*file)->read_at(0, std::span<char>(bytes.data(), bytes.size()));
    if (!n) return false;
    bytes.resize(*n);
    for (std::size_t at = 0; at + record_header_bytes <= bytes.size(); ++at) {
        record_view rec;
        std::size_t record_size;
        if (decode_record(std::string_view(bytes).substr(at), rec, record_size) == decode_status::ok &&
            rec.kind != record_kind::segment_list)
            return false;
    }
    return true;
}

}  // namespace

result<recovery_stats> recover_segments(
    env& e, const std::string& directory,
    const std::function<void(const record_view&, std::uint64_t, std::uint64_t)>& apply,
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
    // Trailing segments whose creation never reached the disk hold nothing: set them aside first,
    // so that the segment before them counts as the last one (its tail may be torn).
    std::uint64_t highest = ids.empty() ? 0 : ids.back();
    while (!ids.empty()) {
        std::string path = directory + "/" + segment_file_name(ids.back());
        auto reader = segment_reader::open(e, path);
        if (reader || reader.error() != EBADMSG || !holds_no_record(e, path)) break;
        if (auto r = e.remove(path); !r) return std::unexpected("cannot remove " + path + ": " + errno_text(r.error()));
        stats.notes += "removed " + path + " (header never written); ";
        ids.pop_back();
    }
    // The newest segment list (of the newest segment whose first record is one) says which older
    // segments are compaction leftovers. Found first: a leftover's records were copied forward, so
    // they are read and checked but not replayed. Replayed, they would be served now and gone after
    // the next start, once the leftover is removed (found by tests/fuzz, recovery target).
    std::vector<std::uint64_t> newest_list;
    std::uint64_t list_holder = 0;
    for (auto id = ids.rbegin(); id != ids.rend() && list_holder == 0; ++id) {
        auto reader = segment_reader::open(e, directory + "/" + segment_file_name(*id));
        record_view rec;
        std::uint64_t offset;
        if (!reader || !reader->next(rec, offset) || rec.kind != record_kind::segment_list) continue;
        // (decode_record already refused a list whose length is not a multiple of 8)
        auto listed = decode_segment_list(rec.value);
        if (!listed)
            return std::unexpected("segment " + directory + "/" + segment_file_name(*id) +
                                   " has a malformed segment list; refusing to start");
        newest_list = std::move(*listed);
        list_holder = *id;
    }
    const auto leftover = [&](std::uint64_t id) {
        return list_holder != 0 && id < list_holder && std::find(newest_list.begin(), newest_list.end(), id) == newest_list.end();
    };
    std::vector<std::uint64_t> present;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        bool last = i + 1 == ids.size();
        std::string path = directory + "/" + segment_file_name(ids[i]);
        stats.next_segment_id = ids[i] + 1;
        auto reader = segment_reader::open(e, path);
        if (!reader) {
            if (reader.error() == EBADMSG && holds_no_record(e, path)) {
                // created but its first write never reached the disk (or removed after a failed
                // creation, and brought back by a crash): it holds nothing acknowledged
                if (auto r = e.remove(path); !r) return std::unexpected("cannot remove " + path + ": " + errno_text(r.error()));
                stats.notes += "removed " + path + " (header never written); ";
                continue;
            }
            return std::unexpected("cannot read segment " + path + ": " +
                                   (reader.error() == EBADMSG ? std::string("not a percore segment")
                                                              : errno_text(reader.error())));
        }
        // A valid header naming another segment: a segment copied or restored over this one. Its
        // records and segment list are not this file's (found by tests/fuzz, recovery target).
        if (reader->header().segment_id != ids[i])
            return std::unexpected("segment " + path + " has the header of segment " +
                                   std::to_string(reader->header().segment_id) +
                                   ": not this file; refusing to start. Restore the file from a backup");
        ++stats.segments;
        present.push_back(ids[i]);
        record_view rec;
        std::uint64_t offset;
        const bool replayed = !leftover(ids[i]);
        while (reader->next(rec, offset)) {
            if (rec.kind == record_kind::segment_list) {
                if (rec.version > 0) stats.max_version = std::max(stats.max_version, rec.version - 1);
                continue;
            }
            stats.max_version = std::max(stats.max_version, rec.version);
            if (!replayed) continue;
            ++stats.records;
            apply(rec, ids[i], offset);
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
    // Versions continue above max_version and start at the wall clock in microseconds (about 2^51
    // today), so one at or past 2^63 is damage that passes its checksum; accepted, the versions
    // handed out next would soon wrap to 0 and repeat (found by tests/fuzz, recovery target).
    if (stats.max_version >= max_plausible_version)
        return std::unexpected("a record in " + directory + " has version " + std::to_string(stats.max_version) +
                               ", beyond any version percore hands out (2^63); refusing to start");
    if (list_holder != 0) {
        for (std::uint64_t id : newest_list)
            if (!std::binary_search(present.begin(), present.end(), id))
                return std::unexpected("segment " + directory + "/" + segment_file_name(id) +
                                       " is missing (the newest segment lists it): its records would be lost; refusing "
                                       "to start. Restore the file from a backup");
        for (std::size_t i = 0; i < present.size() && present[i] < list_holder; ++i) {
            if (std::find(newest_list.begin(), newest_list.end(), present[i]) != newest_list.end()) continue;
            std::string path = directory + "/" + segment_file_name(present[i]);
            if (auto r = e.remove(path); !r) return std::unexpected("cannot remove " + path + ": " + errno_text(r.error()));
            stats.notes += "removed " + path + " (compacted, left over); ";
            present.erase(present.begin() + static_cast<std::ptrdiff_t>(i));
            --i;
        }
    }
    stats.segment_ids = present;
    stats.next_segment_id = std::max(stats.next_segment_id, highest + 1);
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
}

}  // namespace percore::store
