#include "store/segment_reader.hpp"

#include <algorithm>
#include <cerrno>
#include "shards/runtime/check.hpp"

namespace percore::store {

namespace {

constexpr std::size_t read_chunk = std::size_t{1} << 20;
constexpr std::size_t record_length_offset = 4;
constexpr std::size_t record_body_from = 8;

std::uint64_t claimed_record_bytes(const char* header) {
    std::uint64_t body = 0;
    for (std::size_t i = 0; i < 4; ++i)
        body |= std::uint64_t(static_cast<unsigned char>(header[record_length_offset + i])) << (8 * i);
    return record_body_from + body;
}

// A record header whose fields agree with each other; decode_record() never calls a bare header ok,
// because every record has at least one key byte after it. `format_version`: the segment's.
bool consistent_header(std::string_view bytes, std::uint32_t format_version) {
    if (bytes.size() < record_header_bytes) return false;
    record_view unused;
    std::size_t unused_size = 0;
    return decode_record(bytes.substr(0, record_header_bytes), unused, unused_size, format_version) ==
           decode_status::incomplete;
}

}  // namespace

io_result<segment_reader> segment_reader::open(env& e, const std::string& path) {
    auto file = e.open_readable(path);
    if (!file) return std::unexpected(file.error());
    auto size = (*file)->size();
    if (!size) return std::unexpected(size.error());

    segment_reader reader;
    reader.file_ = std::move(*file);
    reader.file_bytes_ = *size;
    if (reader.file_bytes_ < segment_header_bytes) return std::unexpected(EBADMSG);
    auto got = reader.fill(0, segment_header_bytes);
    if (!got) return std::unexpected(got.error());
    if (*got < segment_header_bytes || !decode_segment_header(reader.view(0, segment_header_bytes), reader.header_))
        return std::unexpected(EBADMSG);
    reader.position_ = segment_header_bytes;
    reader.valid_bytes_ = segment_header_bytes;
    return reader;
}

bool segment_reader::next(record_view& out, std::uint64_t& record_offset) {
    if (end_ != end_state::none || error_ != 0) return false;
    if (position_ == file_bytes_) {
        end_ = end_state::clean;
        return false;
    }

    std::size_t wanted = record_header_bytes;
    for (;;) {
        auto got = fill(position_, wanted);
        if (!got) {
            error_ = got.error();
            return false;
        }
        const bool to_end_of_file = position_ + *got == file_bytes_;
        std::size_t size = 0;
        switch (decode_record(view(position_, *got), out, size, header_.format_version)) {
        case decode_status::ok:
            record_offset = position_;
            position_ += size;
            valid_bytes_ = position_;
            if (out.kind == record_kind::commit_mark) {   // framing, not data: the readers never see it
                ++commit_marks_;
                if (position_ == file_bytes_) {
                    end_ = end_state::clean;
                    return false;
                }
                wanted = record_header_bytes;
                continue;
            }
            return true;
        case decode_status::incomplete:
            if (to_end_of_file) {
                torn_unless_marked();
                return false;
            }
            PERCORE_ASSERT(*got >= record_header_bytes);
            wanted = static_cast<std::size_t>(claimed_record_bytes(view(position_, *got).data()));
            continue;
        case decode_status::corrupt:
            classify_damage();
            return false;
        }
    }
}

// The record at position_ is corrupt. It is a torn tail unless a valid record follows it somewhere: a
// write cut by a crash leaves nothing acknowledged behind it.
void segment_reader::classify_damage() {
    auto got = fill(position_, record_header_bytes);
    if (!got) {
        error_ = got.error();
        return;
    }
    std::string_view here = view(position_, *got);
    std::uint64_t search_from = position_ + 1;
    if (consistent_header(here, header_.format_version)) {
        std::uint64_t claimed_end = position_ + claimed_record_bytes(here.data());
        if (claimed_end >= file_bytes_) {
            torn_unless_marked();
            return;
        }
        // What lies inside its claimed body is its own (torn) value: a value may itself hold bytes
        // that decode as a record. Only a record after it tells of damage.
        search_from = claimed_end;
    }
    auto found = valid_record_after(search_from);
    if (!found) {
        error_ = found.error();
        return;
    }
    end_ = *found ? end_state::corrupt : end_state::torn_tail;
}

io_result<bool> segment_reader::valid_record_after(std::uint64_t from) {
    std::uint64_t at = from;
    while (at + record_header_bytes <= file_bytes_) {
        auto got = fill(at, record_header_bytes);
        if (!got) return std::unexpected(got.error());
        if (*got < record_header_bytes) return false;
        const std::string_view window = view(at, *got);
        std::size_t i = 0;
        while (i + record_header_bytes <= window.size() &&
               !consistent_header(window.substr(i), header_.format_version))
            ++i;
        at += i;
        if (i + record_header_bytes > window.size()) continue;

        const std::uint64_t size = claimed_record_bytes(window.data() + i);
        if (at + size <= file_bytes_) {
            auto whole = fill(at, static_cast<std::size_t>(size));
            if (!whole) return std::unexpected(whole.error());
            record_view record;
            std::size_t record_size = 0;
            if (decode_record(view(at, *whole), record, record_size, header_.format_version) == decode_status::ok)
                return true;
        }
        ++at;
    }
    return false;
}

// The record at position_ claims to run to the end of the file or past it: its bytes there are its
// own torn value, unless a commit mark lies among them (a record a mark follows was acknowledged).
void segment_reader::torn_unless_marked() {
    auto mark = commit_mark_after(position_ + 1);
    if (!mark) {
        error_ = mark.error();
        return;
    }
    end_ = *mark ? end_state::corrupt : end_state::torn_tail;
}

// A commit mark of this segment that names its own offset, anywhere in [from, end of file): the
// fixed pattern first, then the checksum, segment id and offset.
io_result<bool> segment_reader::commit_mark_after(std::uint64_t from) {
    const std::string_view pattern = commit_mark_pattern();
    std::uint64_t at = from;
    while (at + commit_mark_bytes <= file_bytes_) {
        auto got = fill(at, read_chunk);
        if (!got) return std::unexpected(got.error());
        if (*got < commit_mark_bytes) return false;
        const std::string_view window = view(at, *got);
        const std::size_t hit = window.find(pattern, commit_mark_pattern_offset);
        if (hit == std::string_view::npos) {
            at += *got - commit_mark_bytes + 1;   // a mark may start in the last bytes of this window
            continue;
        }
        const std::uint64_t mark_at = at + (hit - commit_mark_pattern_offset);
        if (mark_at + commit_mark_bytes > file_bytes_) return false;
        auto whole = fill(mark_at, commit_mark_bytes);
        if (!whole) return std::unexpected(whole.error());
        record_view record;
        std::size_t size = 0;
        if (decode_record(view(mark_at, *whole), record, size, header_.format_version) == decode_status::ok &&
            record.kind == record_kind::commit_mark) {
            const commit_mark mark = decode_commit_mark(record.value);
            if (mark.segment_id == header_.segment_id && mark.offset == mark_at) return true;
        }
        at = mark_at + 1;
    }
    return false;
}

io_result<std::size_t> segment_reader::fill(std::uint64_t offset, std::size_t length) {
    PERCORE_ASSERT(offset <= file_bytes_);
    const std::uint64_t remaining = file_bytes_ - offset;
    const std::size_t wanted = static_cast<std::size_t>(std::min<std::uint64_t>(length, remaining));
    const std::uint64_t buffer_end = buffer_offset_ + buffer_.size();
    const bool inside = offset >= buffer_offset_ && offset <= buffer_end;
    if (inside && buffer_end - offset >= wanted) return static_cast<std::size_t>(buffer_end - offset);

    std::size_t kept = 0;
    if (inside) {
        kept = static_cast<std::size_t>(buffer_end - offset);
        buffer_.erase(0, static_cast<std::size_t>(offset - buffer_offset_));
    } else {
        buffer_.clear();
    }
    buffer_offset_ = offset;
    const auto target = static_cast<std::size_t>(std::min<std::uint64_t>(std::max(wanted, read_chunk), remaining));
    buffer_.resize(target);
    auto n = file_->read_at(offset + kept, std::span<char>(buffer_.data() + kept, target - kept));
    if (!n) {
        buffer_.resize(kept);
        return std::unexpected(n.error());
    }
    buffer_.resize(kept + *n);
    if (buffer_.size() < target) file_bytes_ = offset + buffer_.size();  // the file shrank after open()
    return buffer_.size();
}

std::string_view segment_reader::view(std::uint64_t offset, std::size_t length) const {
    PERCORE_ASSERT(offset >= buffer_offset_ && offset + length <= buffer_offset_ + buffer_.size());
    return std::string_view(buffer_.data() + (offset - buffer_offset_), length);
}

}  // namespace percore::store
