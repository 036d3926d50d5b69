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

using apply_function = std::function<void(const record_view&, std::uint64_t, std::uint64_t)>;
using segment_done_function = std::function<void(std::uint64_t, std::uint64_t)>;

// Trailing segments whose creation never reached the disk hold nothing: set them aside first, so
// that the segment before them counts as the last one (its tail may be torn).
result<void> remove_unwritten_tail(env& e, const std::string& directory, std::vector<std::uint64_t>& ids,
                                   recovery_stats& stats) {
    while (!ids.empty()) {
        std::string path = directory + "/" + segment_file_name(ids.back());
        auto reader = segment_reader::open(e, path);
        if (reader || reader.error() != EBADMSG || !holds_no_record(e, path)) break;
        if (auto r = e.remove(path); !r) return std::unexpected("cannot remove " + path + ": " + errno_text(r.error()));
        stats.notes += "removed " + path + " (header never written); ";
        ids.pop_back();
    }
    return {};
}

// The newest segment list (of the newest segment whose first record is one) says which older
// segments are compaction leftovers. Found first: a leftover's records were copied forward, so
// they are read and checked but not replayed. Replayed, they would be served now and gone after
// the next start, once the leftover is removed (found by tests/fuzz, recovery target).
struct newest_segment_list {
    std::vector<std::uint64_t> ids;
    std::uint64_t holder = 0;  // the segment it is in; 0: no segment has a list
    bool leftover(std::uint64_t id) const {
        return holder != 0 && id < holder && std::find(ids.begin(), ids.end(), id) == ids.end();
    }
};

result<newest_segment_list> read_newest_list(env& e, const std::string& directory, const std::vector<std::uint64_t>& ids) {
    newest_segment_list list;
    for (auto id = ids.rbegin(); id != ids.rend(); ++id) {
        auto reader = segment_reader::open(e, directory + "/" + segment_file_name(*id));
        record_view rec;
        std::uint64_t offset;
        if (!reader || !reader->next(rec, offset) || rec.kind != record_kind::segment_list) continue;
        // (decode_record already refused a list whose length is not a multiple of 8)
        auto listed = decode_segment_list(rec.value);
        if (!listed)
            return std::unexpected("segment " + directory + "/" + segment_file_name(*id) +
                                   " has a malformed segment list; refusing to start");
        list.ids = std::move(*listed);
        list.holder = *id;
        break;
    }
    return list;
}

// Cuts the torn tail of the last segment at the end of its last valid record, durably.
result<void> cut_torn_tail(env& e, const std::string& path, const segment_reader& reader, recovery_stats& stats) {
    std::uint64_t cut = reader.file_bytes() - reader.valid_bytes();
    auto f = e.open_writable(path);
    if (!f) return std::unexpected("cannot open " + path + " to cut its torn tail: " + errno_text(f.error()));
    if (auto t = (*f)->truncate(reader.valid_bytes()); !t)
        return std::unexpected("cannot cut the torn tail of " + path + ": " + errno_text(t.error()));
    if (auto s = (*f)->sync(); !s) return std::unexpected("cannot sync " + path + ": " + errno_text(s.error()));
    stats.truncated_bytes += cut;
    stats.notes += "cut a torn tail of " + std::to_string(cut) + " bytes from " + path + "; ";
    return {};
}

// Reads one segment, hands its records to `apply` unless it is a leftover, and repairs or refuses
// what its end shows (recovery.hpp's policy). A segment found to hold nothing is removed and not
// added to `present`.
result<void> replay_segment(env& e, const std::string& directory, std::uint64_t id, bool last, bool replayed,
                            const apply_function& apply, const segment_done_function& segment_done,
                            recovery_stats& stats, std::vector<std::uint64_t>& present) {
    std::string path = directory + "/" + segment_file_name(id);
    auto reader = segment_reader::open(e, path);
    if (!reader) {
        if (reader.error() == EBADMSG && holds_no_record(e, path)) {
            // created but its first write never reached the disk (or removed after a failed
            // creation, and brought back by a crash): it holds nothing acknowledged
            if (auto r = e.remove(path); !r) return std::unexpected("cannot remove " + path + ": " + errno_text(r.error()));
            stats.notes += "removed " + path + " (header never written); ";
            return {};
        }
        return std::unexpected("cannot read segment " + path + ": " +
                               (reader.error() == EBADMSG ? std::string("not a percore segment")
                                                          : errno_text(reader.error())));
    }
    // A valid header naming another segment: a segment copied or restored over this one. Its
    // records and segment list are not this file's (found by tests/fuzz, recovery target).
    if (reader->header().segment_id != id)
        return std::unexpected("segment " + path + " has the header of segment " +
                               std::to_string(reader->header().segment_id) +
                               ": not this file; refusing to start. Restore the file from a backup");
    ++stats.segments;
    present.push_back(id);
    record_view rec;
    std::uint64_t offset;
    while (reader->next(rec, offset)) {
        if (rec.kind == record_kind::segment_list) {
            if (rec.version > 0) stats.max_version = std::max(stats.max_version, rec.version - 1);
            continue;
        }
        stats.max_version = std::max(stats.max_version, rec.version);
        if (!replayed) continue;
        ++stats.records;
        apply(rec, id, offset);
    }
    if (reader->error() != 0) return std::unexpected("cannot read segment " + path + ": " + errno_text(reader->error()));
    stats.bytes += reader->valid_bytes();
    switch (reader->end()) {
    case segment_reader::end_state::clean:
    case segment_reader::end_state::none:
        break;
    case segment_reader::end_state::torn_tail:
        if (!last)
            return std::unexpected("segment " + path + " is cut short at byte " + std::to_string(reader->valid_bytes()) +
                                   " but newer segments follow it: records are missing; refusing to start");
        if (auto r = cut_torn_tail(e, path, *reader, stats); !r) return r;
        break;
    case segment_reader::end_state::corrupt:
        return std::unexpected("segment " + path + " has a damaged record at byte " +
                               std::to_string(reader->valid_bytes()) +
                               " with valid records after it (bit rot?); refusing to start. Restore the file, or "
                               "move it away to give up its records");
    }
    if (segment_done) segment_done(id, reader->valid_bytes());
    return {};
}

// Every segment the newest list names must exist; an older one it leaves out is a compaction
// leftover, removed.
result<void> check_listed_segments(env& e, const std::string& directory, const newest_segment_list& list,
                                   std::vector<std::uint64_t>& present, recovery_stats& stats) {
    if (list.holder == 0) return {};
    for (std::uint64_t id : list.ids)
        if (!std::binary_search(present.begin(), present.end(), id))
            return std::unexpected("segment " + directory + "/" + segment_file_name(id) +
                                   " is missing (the newest segment lists it): its records would be lost; refusing "
                                   "to start. Restore the file from a backup");
    for (std::size_t i = 0; i < present.size() && present[i] < list.holder; ++i) {
        if (std::find(list.ids.begin(), list.ids.end(), present[i]) != list.ids.end()) continue;
        std::string path = directory + "/" + segment_file_name(present[i]);
        if (auto r = e.remove(path); !r) return std::unexpected("cannot remove " + path + ": " + errno_text(r.error()));
        stats.notes += "removed " + path + " (compacted, left over); ";
        present.erase(present.begin() + static_cast<std::ptrdiff_t>(i));
        --i;
    }
    return {};
}

}  // namespace

result<recovery_stats> recover_segments(env& e, const std::string& directory, const apply_function& apply,
                                        const segment_done_function& segment_done) {
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
    std::uint64_t highest = ids.empty() ? 0 : ids.back();
    if (auto r = remove_unwritten_tail(e, directory, ids, stats); !r) return std::unexpected(r.error());
    auto list = read_newest_list(e, directory, ids);
    if (!list) return std::unexpected(list.error());
    std::vector<std::uint64_t> present;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        stats.next_segment_id = ids[i] + 1;
        if (auto r = replay_segment(e, directory, ids[i], i + 1 == ids.size(), !list->leftover(ids[i]), apply,
                                    segment_done, stats, present);
            !r)
            return std::unexpected(r.error());
    }
    // Versions continue above max_version and start at the wall clock in microseconds (about 2^51
    // today), so one at or past 2^63 is damage that passes its checksum; accepted, the versions
    // handed out next would soon wrap to 0 and repeat (found by tests/fuzz, recovery target).
    if (stats.max_version >= max_plausible_version)
        return std::unexpected("a record in " + directory + " has version " + std::to_string(stats.max_version) +
                               ", beyond any version percore hands out (2^63); refusing to start");
    if (auto r = check_listed_segments(e, directory, *list, present, stats); !r) return std::unexpected(r.error());
    stats.segment_ids = present;
    stats.next_segment_id = std::max(stats.next_segment_id, highest + 1);
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
}

}  // namespace percore::store
