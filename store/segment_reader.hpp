// segment_reader: reads one segment file from the start and hands out its valid records in order,
// verifying every checksum: what recovery and compaction read with.
//
// Contract
// - open() checks the segment header (format 2, framed batches; or format 1, bare records).
//   next() returns records until the end of the valid prefix; then end() tells why it stopped:
//     clean            the file ends exactly after the last batch (record);
//     torn_tail        what follows is a write cut by a crash, nothing after it ever acknowledged:
//                      safe to truncate at valid_bytes();
//     torn_or_damaged  (format 2) the last batch fails its check, and both a torn write and damage
//                      to that batch after its sync returned explain the bytes: no reader can tell
//                      which (docs/store-format.md gives the argument). valid_bytes() is its start;
//                      zeros_at() the lost bytes a tear would explain it by;
//     corrupt          damage that no crash leaves: not safe to drop silently. damage_at() is the
//                      first failing byte; whole_last_batch() says the damaged batch is the last
//                      one and whole (bit rot in an acknowledged write) rather than followed by
//                      later writes.
// - Format 2. A batch's records are handed out only after the whole batch checked (its frame and
//   every record), so a cut batch never had a record replayed. The model of a torn write, what a
//   power cut does to a write whose fdatasync never returned: the file ends anywhere inside it, and
//   any of its bytes may be lost, where a lost byte reads as zero (the data of a block that never
//   reached the disk: ext4 data=ordered, XFS and btrfs never show stale blocks in a file; the
//   zeroed window's bytes were synced zeros), lost in whole loss_block_bytes-aligned blocks of the
//   file, or as a zero tail that may start at any byte (a size that reached the disk before its
//   data). A failing batch is then classified:
//     the file ends inside its header or before its claimed end    torn_tail (bit rot does not
//                                      shorten a file; a damaged length fails the header's crc);
//     all zeros from its first byte                                torn_tail;
//     a whole valid batch follows it, or any nonzero byte after    corrupt (written after its
//                                      its claimed end             sync returned);
//     the first failing record (or the frame) reaches the zeros    torn_or_damaged;
//       that end the file, or overlaps an aligned block that is
//       all zeros within the batch
//     otherwise: whole and no lost byte explains it                corrupt, whole_last_batch().
//   Every batch ends in the trailer mark "PCBE" and begins with "PCBH" (no zero byte), so a zero
//   tail or a lost first block always shows.
// - Format 1: the first record that does not decode ends the valid prefix. It is a torn_tail when
//   its header is consistent and the length it claims reaches the end of the file (a damaged last
//   record, whether cut short or failing its checksum, cannot be told from a torn write), or when no
//   complete record that passes its checksum starts anywhere after its first byte (zeros from
//   preallocation, garbage); otherwise corrupt.
// - On an I/O error next() returns false with error() set and end() still none.
// - Values are read into the reader's buffer: a record_view is valid until the next call.
// - Reads the file in large sequential chunks; a batch is held whole (at most max_batch_bytes of
//   records, or one record of up to max_record_value_bytes).
// Thread: one reader, one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/env.hpp"
#include "store/log_format.hpp"

namespace percore::store {

class segment_reader {
public:
    enum class end_state : std::uint8_t { none, clean, torn_tail, torn_or_damaged, corrupt };
    // The smallest unit a disk writes: a block lost by a torn write is at least this, aligned in
    // the file. The smallest there is, so no larger sector or page size is assumed (a larger lost
    // unit is made of these); 4 KiB would call more damage undecidable, never less.
    static constexpr std::uint64_t loss_block_bytes = 512;

    // Errors: an errno from the file system, or EBADMSG for a missing or foreign segment header.
    static io_result<segment_reader> open(env& e, const std::string& path);

    // True and a record while valid records remain; false at the end (see end()) or on an I/O
    // error (see error()).
    [[nodiscard]] bool next(record_view& out, std::uint64_t& record_offset);

    end_state end() const { return end_; }
    int error() const { return error_; }
    std::uint64_t valid_bytes() const { return valid_bytes_; }  // header + valid records
    std::uint64_t file_bytes() const { return file_bytes_; }
    const segment_header& header() const { return header_; }
    std::uint64_t damage_at() const { return damage_at_; }       // torn_or_damaged, corrupt, torn_tail
    std::uint64_t zeros_at() const { return zeros_at_; }         // torn_or_damaged
    bool whole_last_batch() const { return whole_last_batch_; }  // corrupt

private:
    segment_reader() = default;
    // Makes the buffer hold [offset, offset + length) (less only at the end of the file); returns
    // how many bytes from offset it holds.
    io_result<std::size_t> fill(std::uint64_t offset, std::size_t length);
    std::string_view view(std::uint64_t offset, std::size_t length) const;
    bool next_unframed(record_view& out, std::uint64_t& record_offset);
    void classify_damage();
    io_result<bool> valid_record_after(std::uint64_t from);

    struct batch_check {
        enum kind_t : std::uint8_t { whole, short_file, failed } kind = whole;
        std::uint64_t start = 0;
        std::uint64_t end = 0;        // 0: its header failed, its end is unknown
        std::uint64_t fail_from = 0;  // the first failing record (or frame part)
        std::uint64_t fail_to = 0;    // its end, as far as its header tells
    };
    struct batch_record {
        record_view record;
        std::uint64_t offset = 0;
    };
    static constexpr std::uint64_t no_zero_block = UINT64_MAX;
    bool next_framed(record_view& out, std::uint64_t& record_offset);
    io_result<batch_check> check_batch(std::uint64_t at, bool collect);
    void classify_batch(const batch_check& c);
    io_result<bool> valid_batch_after(std::uint64_t from);
    io_result<std::uint64_t> trailing_zeros_from(std::uint64_t from);
    io_result<std::uint64_t> zero_block_in(std::uint64_t batch, std::uint64_t zeros, std::uint64_t a, std::uint64_t b);

    std::unique_ptr<readable_file> file_;
    segment_header header_;
    std::string buffer_;
    std::uint64_t buffer_offset_ = 0;  // file offset of buffer_[0]
    std::uint64_t position_ = 0;       // file offset of the next record
    std::uint64_t valid_bytes_ = 0;
    std::uint64_t file_bytes_ = 0;
    end_state end_ = end_state::none;
    int error_ = 0;
    std::vector<batch_record> batch_;  // the checked batch's records, handed out from batch_next_
    std::size_t batch_next_ = 0;
    std::uint64_t damage_at_ = 0;
    std::uint64_t zeros_at_ = 0;
    bool whole_last_batch_ = false;
};

}  // namespace percore::store
