// segment_reader: reads one segment file from the start and hands out its valid records in order,
// verifying every checksum: what recovery and compaction read with.
//
// Contract
// - open() checks the segment header. next() returns records until the end of the valid prefix;
//   then end() tells why it stopped:
//     clean      the file ends exactly after the last record;
//     torn_tail  the rest of the file is an incomplete record or zero bytes (a write cut by a crash:
//                nothing after it was ever acknowledged), safe to truncate at valid_bytes();
//     corrupt    a record fails its checksum (or is malformed) and valid-looking bytes follow it
//                (bit rot or a foreign write in the middle): not safe to drop silently.
//   Precisely: the first record that does not decode ends the valid prefix. It is a torn_tail when
//   its header is consistent and the length it claims reaches the end of the file (a damaged last
//   record, whether cut short or failing its checksum, cannot be told from a torn write), or when no
//   complete record that passes its checksum starts anywhere after its first byte (zeros from
//   preallocation, garbage); otherwise corrupt. A damaged length field breaks the header's
//   consistency (body = 24 + key + type + value), so a middle record whose length was hit is still
//   found corrupt; only damage that keeps the header consistent while claiming a length past the end
//   of the file would pass for a torn tail.
// - Commit marks (log_format.hpp) are framing: next() skips them. Every byte before one was
//   acknowledged, so damage that a mark follows is corrupt, never torn_tail — also when the damaged
//   record claims a length past the end of the file (the mark is searched for by its fixed bytes,
//   and must name this segment and its own offset). This is what tells bit rot in the last batch
//   from a torn write: without a mark after it (a crash within commit_mark_idle of the batch's
//   sync), a damaged last batch still reads as torn_tail.
// - On an I/O error next() returns false with error() set and end() still none.
// - Values are read into the reader's buffer: a record_view is valid until the next call.
// - Reads the file in large sequential chunks; a value may be up to max_record_value_bytes.
// Thread: one reader, one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "store/env.hpp"
#include "store/log_format.hpp"

namespace percore::store {

class segment_reader {
public:
    enum class end_state : std::uint8_t { none, clean, torn_tail, corrupt };

    // Errors: an errno from the file system, or EBADMSG for a missing or foreign segment header.
    static io_result<segment_reader> open(env& e, const std::string& path);

    // True and a record while valid records remain; false at the end (see end()) or on an I/O
    // error (see error()).
    [[nodiscard]] bool next(record_view& out, std::uint64_t& record_offset);

    end_state end() const { return end_; }
    int error() const { return error_; }
    std::uint64_t valid_bytes() const { return valid_bytes_; }  // header + valid records
    std::uint64_t file_bytes() const { return file_bytes_; }
    std::uint64_t commit_marks() const { return commit_marks_; }  // read so far (next() skips them)
    const segment_header& header() const { return header_; }

private:
    segment_reader() = default;
    // Makes the buffer hold [offset, offset + length) (less only at the end of the file); returns
    // how many bytes from offset it holds.
    io_result<std::size_t> fill(std::uint64_t offset, std::size_t length);
    std::string_view view(std::uint64_t offset, std::size_t length) const;
    void classify_damage();
    io_result<bool> valid_record_after(std::uint64_t from);
    io_result<bool> commit_mark_after(std::uint64_t from);
    void torn_unless_marked();

    std::unique_ptr<readable_file> file_;
    segment_header header_;
    std::string buffer_;
    std::uint64_t buffer_offset_ = 0;  // file offset of buffer_[0]
    std::uint64_t position_ = 0;       // file offset of the next record
    std::uint64_t valid_bytes_ = 0;
    std::uint64_t file_bytes_ = 0;
    std::uint64_t commit_marks_ = 0;
    end_state end_ = end_state::none;
    int error_ = 0;
};

}  // namespace percore::store
