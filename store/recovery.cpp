#include "store/recovery.hpp"

#include "store/newest_segment.hpp"

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
    return v <= max_segment_id;  // the log never names one past it (limits.hpp)
}

std::string errno_text(int e) { return std::strerror(e); }


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

// One pass over one shard directory: recovery's (repair) or a check's (verify). Every decision of
// recovery.hpp's policy ends in damage(), remove_empty() or cut_torn_tail(), so both modes make the
// same decisions and only what follows from them differs.
struct scan {
    env& e;
    const std::string& directory;
    recovery_mode mode;
    recovery_stats& stats;
    std::vector<std::uint64_t> refused;   // segments that exist but were refused (verify reads on)
    std::string highest_file;             // where stats.max_version was found
    std::uint64_t highest_offset = 0;

    std::string path(std::uint64_t id) const { return directory + "/" + segment_file_name(id); }

    // Damage or a read error: recovery refuses with its line; a check notes it and reads on.
    result<void> damage(finding_kind kind, std::string file, std::uint64_t offset, std::string what) {
        recovery_finding f{kind, std::move(file), offset, 0, std::move(what)};
        if (mode == recovery_mode::repair) return std::unexpected(refusal_line(f));
        stats.findings.push_back(std::move(f));
        return {};
    }
    result<void> unreadable(const std::string& file, int error) {
        return damage(finding_kind::unreadable, file, 0, "cannot read segment " + file + ": " + errno_text(error));
    }
    // A segment that holds nothing acknowledged (never written, or compacted): recovery removes it;
    // a check notes that it would.
    result<void> remove_empty(finding_kind kind, const std::string& file) {
        const bool unwritten = kind == finding_kind::unwritten_segment;
        if (mode == recovery_mode::repair) {
            if (auto r = e.remove(file); !r) return std::unexpected("cannot remove " + file + ": " + errno_text(r.error()));
            stats.notes += "removed " + file + (unwritten ? " (header never written); " : " (compacted, left over); ");
        }
        stats.findings.push_back(
            {kind, file, 0, 0,
             "segment " + file +
                 (unwritten ? " never got its header: a crash while it was created, it holds nothing"
                            : " is a compaction leftover: the newest segment list leaves it out, its records were "
                              "copied forward")});
        return {};
    }
    void note_version(std::uint64_t version, std::uint64_t id, std::uint64_t offset) {
        if (version <= stats.max_version && !highest_file.empty()) return;
        stats.max_version = version;
        highest_file = path(id);
        highest_offset = offset;
    }
};

// Trailing segments whose creation never reached the disk hold nothing: set them aside first, so
// that the segment before them counts as the last one (its tail may be torn).
result<void> remove_unwritten_tail(scan& s, std::vector<std::uint64_t>& ids) {
    while (!ids.empty()) {
        std::string path = s.path(ids.back());
        auto reader = segment_reader::open(s.e, path);
        if (reader || reader.error() != EBADMSG || !holds_no_record(s.e, path)) break;
        if (auto r = s.remove_empty(finding_kind::unwritten_segment, path); !r) return r;
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

result<newest_segment_list> read_newest_list(scan& s, const std::vector<std::uint64_t>& ids) {
    newest_segment_list list;
    for (auto id = ids.rbegin(); id != ids.rend(); ++id) {
        auto reader = segment_reader::open(s.e, s.path(*id));
        record_view rec;
        std::uint64_t offset;
        if (!reader || !reader->next(rec, offset) || rec.kind != record_kind::segment_list) continue;
        // (decode_record already refused a list whose length is not a multiple of 8)
        auto listed = decode_segment_list(rec.value);
        if (!listed) {
            if (auto r = s.damage(finding_kind::malformed_list, s.path(*id), offset,
                                  "segment " + s.path(*id) + " has a malformed segment list at byte " +
                                      std::to_string(offset));
                !r)
                return std::unexpected(r.error());
            break;  // a check goes on as if no segment had a list
        }
        list.ids = std::move(*listed);
        list.holder = *id;
        break;
    }
    return list;
}

// The torn tail of the last segment: recovery cuts it at the end of its last valid record,
// durably; a check notes the cut it would make.
result<void> cut_torn_tail(scan& s, const std::string& path, const segment_reader& reader) {
    const std::uint64_t cut = reader.file_bytes() - reader.valid_bytes();
    s.stats.findings.push_back({finding_kind::torn_tail, path, reader.valid_bytes(), cut,
                                "segment " + path + " ends in a torn tail of " + std::to_string(cut) +
                                    " bytes at byte " + std::to_string(reader.valid_bytes()) +
                                    ": a batch a crash cut short, never acknowledged"});
    if (s.mode == recovery_mode::verify) return {};
    auto f = s.e.open_writable(path);
    if (!f) return std::unexpected("cannot open " + path + " to cut its torn tail: " + errno_text(f.error()));
    if (auto t = (*f)->truncate(reader.valid_bytes()); !t)
        return std::unexpected("cannot cut the torn tail of " + path + ": " + errno_text(t.error()));
    if (auto r = (*f)->sync(); !r) return std::unexpected("cannot sync " + path + ": " + errno_text(r.error()));
    s.stats.truncated_bytes += cut;
    s.stats.notes += "cut a torn tail of " + std::to_string(cut) + " bytes from " + path + "; ";
    return {};
}

// What the end of a segment read to its last valid record shows (recovery.hpp's policy).
result<void> judge_end(scan& s, const std::string& path, const segment_reader& reader, bool last) {
    switch (reader.end()) {
    case segment_reader::end_state::clean:
    case segment_reader::end_state::none:
        return {};
    case segment_reader::end_state::torn_tail:
        if (last) return cut_torn_tail(s, path, reader);
        return s.damage(finding_kind::cut_short, path, reader.valid_bytes(),
                        "segment " + path + " is cut short at byte " + std::to_string(reader.valid_bytes()) +
                            " but newer segments follow it: records are missing");
    case segment_reader::end_state::corrupt:
        return s.damage(finding_kind::damaged_record, path, reader.valid_bytes(),
                        "segment " + path + " has a damaged record at byte " + std::to_string(reader.valid_bytes()) +
                            " with valid records after it (bit rot?)");
    }
    return {};
}

// Reads one segment, hands its records to `apply` unless it is a leftover, and judges its end. A
// segment found to hold nothing is removed and not added to `present`.
result<void> replay_segment(scan& s, std::uint64_t id, bool last, bool replayed, const apply_function& apply,
                            const segment_done_function& segment_done, std::vector<std::uint64_t>& present) {
    std::string path = s.path(id);
    auto reader = segment_reader::open(s.e, path);
    if (!reader) {
        // created but its first write never reached the disk (or removed after a failed creation,
        // and brought back by a crash): it holds nothing acknowledged
        if (reader.error() == EBADMSG && holds_no_record(s.e, path))
            return s.remove_empty(finding_kind::unwritten_segment, path);
        s.refused.push_back(id);
        if (reader.error() != EBADMSG) return s.unreadable(path, reader.error());
        return s.damage(finding_kind::not_a_segment, path, 0,
                        "cannot read segment " + path + ": not a percore segment (no valid header at byte 0)");
    }
    // A valid header naming another segment: a segment copied or restored over this one. Its
    // records and segment list are not this file's (found by tests/fuzz, recovery target).
    if (reader->header().segment_id != id) {
        s.refused.push_back(id);
        return s.damage(finding_kind::wrong_header, path, 0,
                        "segment " + path + " has the header of segment " +
                            std::to_string(reader->header().segment_id) + ": not this file");
    }
    ++s.stats.segments;
    present.push_back(id);
    record_view rec;
    std::uint64_t offset;
    while (reader->next(rec, offset)) {
        if (rec.kind == record_kind::segment_list) {
            if (rec.version > 0) s.note_version(rec.version - 1, id, offset);
            continue;
        }
        // a copy's ETag version counts too: versions handed out later must be above it (shard_store.hpp)
        s.note_version(std::max(rec.version, rec.copied_version), id, offset);
        if (!replayed) continue;
        ++s.stats.records;
        apply(rec, id, offset);
    }
    if (reader->error() != 0) return s.unreadable(path, reader->error());
    s.stats.bytes += reader->valid_bytes();
    const std::size_t damage_before = s.stats.findings.size();
    if (auto r = judge_end(s, path, *reader, last); !r) return r;
    const bool damaged = s.stats.findings.size() > damage_before && s.stats.findings.back().damage();
    if (segment_done && !damaged) segment_done(id, reader->valid_bytes());
    return {};
}

// Every segment the newest list names must exist; an older one it leaves out is a compaction
// leftover, removed.
// The newest segment the log made (its newest_segment file) must be there: below it, every
// segment a power cut cannot take back, so a newest existing segment older than it means segments
// were deleted or lost. Checked before any repair: the segments listed are the directory's.
result<void> check_newest_segment(scan& s, const std::vector<std::uint64_t>& ids) {
    auto named = read_newest_segment(s.e, s.directory);
    const std::string file = s.directory + "/" + newest_segment_file_name;
    if (!named && named.error() == EBADMSG)
        return s.damage(finding_kind::damaged_newest_segment_file, file, 0,
                        file + " is damaged (not a percore newest_segment file)");
    if (!named) return s.damage(finding_kind::unreadable, file, 0, "cannot read " + file + ": " + errno_text(named.error()));
    if (!*named) return {};
    const std::uint64_t newest = **named;
    const std::uint64_t highest = ids.empty() ? 0 : ids.back();
    if (highest >= newest) return {};
    const std::string first = highest + 1 == newest ? s.path(newest)
                                                    : s.path(highest + 1) + " to " + segment_file_name(newest);
    return s.damage(finding_kind::missing_segment, s.path(newest), 0,
                    "segment " + first + " is missing (the newest segment the log made, " + file +
                        " says): the acknowledged writes in it would be lost");
}

result<void> check_listed_segments(scan& s, const newest_segment_list& list, std::vector<std::uint64_t>& present) {
    if (list.holder == 0) return {};
    auto there = [&](std::uint64_t id) {
        return std::binary_search(present.begin(), present.end(), id) ||
               std::find(s.refused.begin(), s.refused.end(), id) != s.refused.end();
    };
    for (std::uint64_t id : list.ids)
        if (!there(id))
            if (auto r = s.damage(finding_kind::missing_segment, s.path(id), 0,
                                  "segment " + s.path(id) +
                                      " is missing (the newest segment lists it): its records would be lost");
                !r)
                return r;
    for (std::size_t i = 0; i < present.size() && present[i] < list.holder; ++i) {
        if (std::find(list.ids.begin(), list.ids.end(), present[i]) != list.ids.end()) continue;
        if (auto r = s.remove_empty(finding_kind::leftover_segment, s.path(present[i])); !r)
            return r;
        present.erase(present.begin() + static_cast<std::ptrdiff_t>(i));
        --i;
    }
    return {};
}

}  // namespace

std::string refusal_line(const recovery_finding& f) {
    // an unreadable file says no more; the feed floor's own line says what to do (feed_floor.hpp)
    if (f.kind == finding_kind::unreadable || f.kind == finding_kind::damaged_feed_floor) return f.what;
    std::string line = f.what + "; refusing to start";
    switch (f.kind) {
    case finding_kind::damaged_record:
        return line + ". Restore the file, or move it away to give up its records";
    case finding_kind::wrong_header:
    case finding_kind::missing_segment:
        return line + ". Restore the file from a backup";
    default:
        return line;
    }
}

result<recovery_stats> recover_segments(env& e, const std::string& directory, const apply_function& apply,
                                        const segment_done_function& segment_done, recovery_mode mode) {
    auto start = std::chrono::steady_clock::now();
    recovery_stats stats;
    scan s{e, directory, mode, stats, {}, {}, 0};
    auto names = e.list(directory);
    if (!names) return std::unexpected("cannot list " + directory + ": " + errno_text(names.error()));
    std::vector<std::uint64_t> ids;
    for (const std::string& n : *names) {
        std::uint64_t id;
        if (parse_segment_name(n, id)) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    std::uint64_t highest = ids.empty() ? 0 : ids.back();
    if (auto r = check_newest_segment(s, ids); !r) return std::unexpected(r.error());
    if (auto r = remove_unwritten_tail(s, ids); !r) return std::unexpected(r.error());
    auto list = read_newest_list(s, ids);
    if (!list) return std::unexpected(list.error());
    std::vector<std::uint64_t> present;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        stats.next_segment_id = ids[i] + 1;
        if (auto r = replay_segment(s, ids[i], i + 1 == ids.size(), !list->leftover(ids[i]), apply, segment_done,
                                    present);
            !r)
            return std::unexpected(r.error());
    }
    // Versions continue above max_version and start at the wall clock in microseconds (about 2^51
    // today), so one at or past 2^63 is damage that passes its checksum; accepted, the versions
    // handed out next would soon wrap to 0 and repeat (found by tests/fuzz, recovery target).
    if (stats.max_version >= version_limit)
        if (auto r = s.damage(finding_kind::implausible_version, s.highest_file, s.highest_offset,
                              "a record in " + s.highest_file + " at byte " + std::to_string(s.highest_offset) +
                                  " has version " + std::to_string(stats.max_version) +
                                  ", beyond any version percore hands out (2^63)");
            !r)
            return std::unexpected(r.error());
    if (auto r = check_listed_segments(s, *list, present); !r) return std::unexpected(r.error());
    stats.segment_ids = present;
    stats.next_segment_id = std::max(stats.next_segment_id, highest + 1);
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
}

}  // namespace percore::store
