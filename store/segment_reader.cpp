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
// because every record has at least one key byte after it.
bool consistent_header(std::string_view bytes) {
    if (bytes.size() < record_header_bytes) return false;
    record_view unused;
    std::size_t unused_size = 0;
    return decode_record(bytes.substr(0, record_header_bytes), unused, unused_size) == decode_status::incomplete;
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
    return header_.format_version == unframed_log_format_version ? next_unframed(out, record_offset)
                                                                 : next_framed(out, record_offset);
}

// Format 1: bare records, the policy of segment_reader.hpp's last paragraph.
bool segment_reader::next_unframed(record_view& out, std::uint64_t& record_offset) {
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
        switch (decode_record(view(position_, *got), out, size)) {
        case decode_status::ok:
            record_offset = position_;
            position_ += size;
            valid_bytes_ = position_;
            return true;
        case decode_status::incomplete:
            if (to_end_of_file) {
                end_ = end_state::torn_tail;
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
    if (consistent_header(here)) {
        std::uint64_t claimed_end = position_ + claimed_record_bytes(here.data());
        if (claimed_end >= file_bytes_) {
            end_ = end_state::torn_tail;
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
    damage_at_ = position_;
}

io_result<bool> segment_reader::valid_record_after(std::uint64_t from) {
    std::uint64_t at = from;
    while (at + record_header_bytes <= file_bytes_) {
        auto got = fill(at, record_header_bytes);
        if (!got) return std::unexpected(got.error());
        if (*got < record_header_bytes) return false;
        const std::string_view window = view(at, *got);
        std::size_t i = 0;
        while (i + record_header_bytes <= window.size() && !consistent_header(window.substr(i))) ++i;
        at += i;
        if (i + record_header_bytes > window.size()) continue;

        const std::uint64_t size = claimed_record_bytes(window.data() + i);
        if (at + size <= file_bytes_) {
            auto whole = fill(at, static_cast<std::size_t>(size));
            if (!whole) return std::unexpected(whole.error());
            record_view record;
            std::size_t record_size = 0;
            if (decode_record(view(at, *whole), record, record_size) == decode_status::ok) return true;
        }
        ++at;
    }
    return false;
}

// Format 2: a batch's records are handed out only once the whole batch checked (frame and every
// record): a torn batch is cut whole, and none of its records was replayed before the cut.
bool segment_reader::next_framed(record_view& out, std::uint64_t& record_offset) {
    if (batch_next_ < batch_.size()) {
        out = batch_[batch_next_].record;
        record_offset = batch_[batch_next_].offset;
        ++batch_next_;
        return true;
    }
    if (end_ != end_state::none || error_ != 0) return false;
    if (position_ == file_bytes_) {
        end_ = end_state::clean;
        return false;
    }
    batch_.clear();
    batch_next_ = 0;
    auto checked = check_batch(position_, true);
    if (!checked) {
        error_ = checked.error();
        return false;
    }
    switch (checked->kind) {
    case batch_check::whole:
        position_ = checked->end;
        valid_bytes_ = position_;
        return next_framed(out, record_offset);
    case batch_check::short_file:
        // the file ends inside the batch's header or before the end its header claims: bit rot does
        // not shorten a file, and a damaged length fails the header's checksum. A torn write.
        end_ = end_state::torn_tail;
        damage_at_ = position_;
        return false;
    case batch_check::failed:
        batch_.clear();
        classify_batch(*checked);
        return false;
    }
    return false;
}

io_result<segment_reader::batch_check> segment_reader::check_batch(std::uint64_t at, bool collect) {
    batch_check c;
    c.start = at;
    if (file_bytes_ - at < batch_header_bytes) {
        c.kind = batch_check::short_file;
        return c;
    }
    auto got = fill(at, batch_header_bytes);
    if (!got) return std::unexpected(got.error());
    std::uint32_t n = 0;
    if (*got < batch_header_bytes || !decode_batch_header(view(at, batch_header_bytes), n)) {
        c.kind = batch_check::failed;
        c.fail_from = at;
        c.fail_to = at + batch_header_bytes;
        return c;
    }
    const std::uint64_t size = batch_frame_bytes + std::uint64_t{n};
    if (size > file_bytes_ - at) {
        c.kind = batch_check::short_file;
        return c;
    }
    c.end = at + size;
    got = fill(at, static_cast<std::size_t>(size));
    if (!got) return std::unexpected(got.error());
    if (*got < size) {  // the file shrank after open()
        c.kind = batch_check::short_file;
        return c;
    }
    const std::string_view b = view(at, static_cast<std::size_t>(size));
    const std::size_t records_end = batch_header_bytes + n;
    std::size_t i = batch_header_bytes;
    while (i < records_end) {
        record_view rec;
        std::size_t record_size = 0;
        const std::string_view rest = b.substr(i, records_end - i);
        if (decode_record(rest, rec, record_size) == decode_status::ok) {
            if (collect) batch_.push_back({rec, at + i});
            i += record_size;
            continue;
        }
        // the failing record's bytes, as far as its header can tell (a consistent one claims a length)
        const std::uint64_t claimed = consistent_header(rest) ? claimed_record_bytes(rest.data()) : record_header_bytes;
        c.kind = batch_check::failed;
        c.fail_from = at + i;
        c.fail_to = at + std::min<std::uint64_t>(i + claimed, records_end);
        return c;
    }
    if (!batch_trailer_matches(b.substr(records_end), b.substr(0, batch_header_bytes))) {
        c.kind = batch_check::failed;
        c.fail_from = at + records_end;
        c.fail_to = c.end;
        return c;
    }
    c.kind = batch_check::whole;
    return c;
}

// The batch at c.start fails its check (segment_reader.hpp: which failures a torn write explains).
void segment_reader::classify_batch(const batch_check& c) {
    damage_at_ = c.fail_from;
    auto fail = [this](int e) { error_ = e; end_ = end_state::none; };
    // a whole valid batch after it was written after this one's sync returned
    auto found = valid_batch_after(c.end != 0 ? c.end : c.start + 1);
    if (!found) return fail(found.error());
    if (*found) {
        end_ = end_state::corrupt;
        return;
    }
    auto z = trailing_zeros_from(c.start);
    if (!z) return fail(z.error());
    if (*z == c.start) {  // nothing but zeros from the batch's first byte: zeroed space, or a size without data
        end_ = end_state::torn_tail;
        damage_at_ = c.start;
        return;
    }
    if (c.end != 0 && *z > c.end) {  // bytes after its end: a later write began, so its sync had returned
        end_ = end_state::corrupt;
        return;
    }
    if (c.fail_to > *z) {  // the failure reaches the zeros that end the file: a lost tail
        end_ = end_state::torn_or_damaged;
        zeros_at_ = *z;
        return;
    }
    auto block = zero_block_in(c.start, *z, c.fail_from, c.fail_to);
    if (!block) return fail(block.error());
    if (*block != no_zero_block) {
        end_ = end_state::torn_or_damaged;
        zeros_at_ = *block;
        return;
    }
    end_ = end_state::corrupt;  // whole, and no lost byte explains the failure: damage after the sync
    whole_last_batch_ = true;
}

io_result<bool> segment_reader::valid_batch_after(std::uint64_t from) {
    static constexpr char mark[4] = {'P', 'C', 'B', 'H'};
    std::uint64_t at = from;
    while (at + batch_header_bytes <= file_bytes_) {
        auto got = fill(at, read_chunk);
        if (!got) return std::unexpected(got.error());
        const std::string_view window = view(at, *got);
        const std::size_t i = window.find(std::string_view(mark, sizeof mark));
        if (i == std::string_view::npos) {
            if (*got < sizeof mark) return false;
            at += *got - (sizeof mark - 1);
            continue;
        }
        at += i;
        std::uint32_t n = 0;
        if (at + batch_header_bytes <= file_bytes_) {
            auto header = fill(at, batch_header_bytes);
            if (!header) return std::unexpected(header.error());
            if (*header >= batch_header_bytes && decode_batch_header(view(at, batch_header_bytes), n)) {
                auto c = check_batch(at, false);
                if (!c) return std::unexpected(c.error());
                if (c->kind == batch_check::whole) return true;
            }
        }
        ++at;
    }
    return false;
}

// The least z >= from such that [z, end of file) is all zeros.
io_result<std::uint64_t> segment_reader::trailing_zeros_from(std::uint64_t from) {
    std::uint64_t z = file_bytes_;
    while (z > from) {
        const std::uint64_t start = std::max<std::uint64_t>(from, z >= read_chunk ? z - read_chunk : 0);
        auto got = fill(start, static_cast<std::size_t>(z - start));
        if (!got) return std::unexpected(got.error());
        const std::string_view bytes = view(start, static_cast<std::size_t>(std::min<std::uint64_t>(*got, z - start)));
        const std::size_t last = bytes.find_last_not_of('\0');
        if (last != std::string_view::npos) return start + last + 1;
        z = start;
    }
    return z;
}

// The offset of a lost block that the failing bytes [a, b) overlap: a loss_block_bytes-aligned block
// whose part inside [batch, zeros) is all zeros; no_zero_block when there is none.
io_result<std::uint64_t> segment_reader::zero_block_in(std::uint64_t batch, std::uint64_t zeros, std::uint64_t a,
                                                       std::uint64_t b) {
    for (std::uint64_t block = a / loss_block_bytes * loss_block_bytes; block < std::min(b, zeros);
         block += loss_block_bytes) {
        const std::uint64_t from = std::max(block, batch);
        const std::uint64_t to = std::min(block + loss_block_bytes, zeros);
        if (from >= to) continue;
        auto got = fill(from, static_cast<std::size_t>(to - from));
        if (!got) return std::unexpected(got.error());
        const std::string_view piece = view(from, static_cast<std::size_t>(std::min<std::uint64_t>(*got, to - from)));
        if (piece.size() == to - from && piece.find_first_not_of('\0') == std::string_view::npos) return from;
    }
    return no_zero_block;
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
