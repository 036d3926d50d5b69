#include "store/log_format.hpp"

#include <cerrno>
#include <cstring>

#include "shards/runtime/check.hpp"
#include "store/crc32c.hpp"

namespace percore::store {

namespace {

constexpr char segment_magic[8] = {'P', 'C', 'S', 'E', 'G', '\0', '\0', '\1'};
constexpr std::size_t segment_crc_offset = 28;
constexpr std::size_t record_checked_from = 4;
constexpr std::size_t record_body_from = 8;
constexpr std::size_t record_fixed_body = record_header_bytes - record_body_from;

void put_le(char* p, std::uint64_t v, std::size_t bytes) {
    for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

std::uint64_t get_le(const char* p, std::size_t bytes) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
    return v;
}

// Every kind's bytes (the format drawn in log_format.hpp); `copied` != 0: a copy's ETag version,
// between the content type and the value.
void encode_any(std::string& out, record_kind kind, std::uint64_t version, std::string_view key,
                std::string_view content_type, std::uint64_t copied, std::string_view value) {
    const std::size_t start = out.size();
    const std::size_t total = record_bytes(key.size(), content_type.size(), value.size(), copied != 0);
    out.reserve(start + total);
    out.resize(start + record_header_bytes);
    char* h = out.data() + start;
    put_le(h + 4, total - record_body_from, 4);
    h[8] = static_cast<char>(kind);
    put_le(h + 10, key.size(), 2);
    put_le(h + 12, content_type.size(), 2);
    put_le(h + 16, version, 8);
    put_le(h + 24, value.size(), 4);
    out.append(key);
    out.append(content_type);
    if (copied != 0) {
        char field[copied_version_bytes];
        put_le(field, copied, copied_version_bytes);
        out.append(field, sizeof field);
    }
    out.append(value);
    const std::uint32_t crc = crc32c(out.data() + start + record_checked_from, total - record_checked_from);
    put_le(out.data() + start, crc, 4);
}

}  // namespace

void encode_record(std::string& out, record_kind kind, std::uint64_t version, std::string_view key,
                   std::string_view content_type, std::string_view value) {
    // A record that breaks these would be written and then refused by recovery: data lost.
    const bool framing = kind == record_kind::segment_list || kind == record_kind::commit_mark;
    PERCORE_ASSERT(kind != record_kind::copy);  // encode_document_record
    PERCORE_ASSERT((framing ? key.empty() : !key.empty()) && key.size() <= max_key_bytes);
    PERCORE_ASSERT(content_type.size() <= max_content_type_bytes);
    PERCORE_ASSERT(value.size() <= max_record_value_bytes);
    PERCORE_ASSERT(kind == record_kind::put || kind == record_kind::segment_list || kind == record_kind::commit_mark ||
                   (content_type.empty() && value.empty()));
    PERCORE_ASSERT(kind != record_kind::segment_list || value.size() % segment_list_entry_bytes == 0);
    PERCORE_ASSERT(kind != record_kind::commit_mark ||
                   (content_type.empty() && value.size() == commit_mark_value_bytes && version == 0));
    encode_any(out, kind, version, key, content_type, 0, value);
}

void encode_document_record(std::string& out, std::uint64_t version, std::uint64_t etag_version, std::string_view key,
                            std::string_view content_type, std::string_view value) {
    PERCORE_ASSERT(etag_version != 0);
    if (etag_version == version) {
        encode_record(out, record_kind::put, version, key, content_type, value);
        return;
    }
    PERCORE_ASSERT(!key.empty() && key.size() <= max_key_bytes);
    PERCORE_ASSERT(content_type.size() <= max_content_type_bytes);
    PERCORE_ASSERT(value.size() <= max_record_value_bytes);
    encode_any(out, record_kind::copy, version, key, content_type, etag_version, value);
}

void encode_commit_mark(std::string& out, std::uint64_t segment_id, std::uint64_t offset) {
    char value[commit_mark_value_bytes];
    put_le(value, segment_id, 8);
    put_le(value + 8, offset, 8);
    encode_record(out, record_kind::commit_mark, 0, {}, {}, std::string_view(value, sizeof value));
}

commit_mark decode_commit_mark(std::string_view value) {
    PERCORE_REQUIRES(value.size() == commit_mark_value_bytes);
    return commit_mark{get_le(value.data(), 8), get_le(value.data() + 8, 8)};
}

std::string_view commit_mark_pattern() {
    static const std::string pattern = [] {
        std::string mark;
        encode_commit_mark(mark, 0, 0);
        return mark.substr(commit_mark_pattern_offset, record_header_bytes - commit_mark_pattern_offset);
    }();
    return pattern;
}

std::string encode_segment_list(std::span<const std::uint64_t> ids) {
    std::string out(ids.size() * segment_list_entry_bytes, '\0');
    for (std::size_t i = 0; i < ids.size(); ++i) put_le(out.data() + i * segment_list_entry_bytes, ids[i], 8);
    return out;
}

io_result<std::vector<std::uint64_t>> decode_segment_list(std::string_view value) {
    if (value.size() % segment_list_entry_bytes != 0) return std::unexpected(EBADMSG);
    std::vector<std::uint64_t> ids(value.size() / segment_list_entry_bytes);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = get_le(value.data() + i * segment_list_entry_bytes, 8);
    return ids;
}

void encode_segment_header(char (&out)[segment_header_bytes], std::uint32_t shard, std::uint64_t segment_id) {
    std::memset(out, 0, sizeof out);
    std::memcpy(out, segment_magic, sizeof segment_magic);
    put_le(out + 8, log_format_version, 4);
    put_le(out + 12, shard, 4);
    put_le(out + 16, segment_id, 8);
    put_le(out + segment_crc_offset, crc32c(out, segment_crc_offset), 4);
}

bool decode_segment_header(std::string_view bytes, segment_header& out) {
    if (bytes.size() < segment_header_bytes) return false;
    const char* p = bytes.data();
    if (std::memcmp(p, segment_magic, sizeof segment_magic) != 0) return false;
    if (get_le(p + segment_crc_offset, 4) != crc32c(p, segment_crc_offset)) return false;
    if (get_le(p + 24, 4) != 0) return false;
    const auto version = static_cast<std::uint32_t>(get_le(p + 8, 4));
    if (version < oldest_log_format_version || version > log_format_version) return false;
    out.format_version = version;
    out.shard = static_cast<std::uint32_t>(get_le(p + 12, 4));
    out.segment_id = get_le(p + 16, 8);
    return true;
}

// The header's fields are checked against each other before the body is looked at, so a damaged
// length is reported as corrupt rather than as a record that runs past the end; the lengths are
// only used to slice the bytes once the checksum has vouched for them.
decode_status decode_record(std::string_view bytes, record_view& out, std::size_t& record_size,
                            std::uint32_t format_version) {
    if (bytes.size() < record_header_bytes) return decode_status::incomplete;
    const char* h = bytes.data();
    const std::uint64_t body = get_le(h + 4, 4);
    const auto kind = static_cast<std::uint8_t>(h[8]);
    const std::uint64_t key_bytes = get_le(h + 10, 2);
    const std::uint64_t type_bytes = get_le(h + 12, 2);
    const std::uint64_t value_bytes = get_le(h + 24, 4);

    const bool list = kind == static_cast<std::uint8_t>(record_kind::segment_list);
    const bool mark = kind == static_cast<std::uint8_t>(record_kind::commit_mark);
    const bool copy = kind == static_cast<std::uint8_t>(record_kind::copy) && format_version >= first_format_with_copies;
    if (kind != static_cast<std::uint8_t>(record_kind::put) && kind != static_cast<std::uint8_t>(record_kind::tombstone) &&
        !list && !mark && !copy)
        return decode_status::corrupt;
    if (mark && (key_bytes != 0 || type_bytes != 0 || value_bytes != commit_mark_value_bytes || get_le(h + 16, 8) != 0))
        return decode_status::corrupt;
    if (h[9] != 0 || get_le(h + 14, 2) != 0 || get_le(h + 28, 4) != 0) return decode_status::corrupt;
    if (value_bytes > max_record_value_bytes) return decode_status::corrupt;
    if (list ? (key_bytes != 0 || type_bytes != 0 || value_bytes % segment_list_entry_bytes != 0)
             : (!mark && key_bytes == 0))
        return decode_status::corrupt;
    if (kind == static_cast<std::uint8_t>(record_kind::tombstone) && (type_bytes != 0 || value_bytes != 0))
        return decode_status::corrupt;
    const std::uint64_t copied_bytes = copy ? copied_version_bytes : 0;
    if (body != record_fixed_body + key_bytes + type_bytes + copied_bytes + value_bytes) return decode_status::corrupt;

    const std::size_t total = record_body_from + body;
    if (bytes.size() < total) return decode_status::incomplete;
    if (get_le(h, 4) != crc32c(h + record_checked_from, total - record_checked_from)) return decode_status::corrupt;

    const char* payload = h + record_header_bytes;
    const std::uint64_t copied = copy ? get_le(payload + key_bytes + type_bytes, copied_version_bytes) : 0;
    if (copy && copied == 0) return decode_status::corrupt;  // 0 stands for "no copied version"
    out.kind = static_cast<record_kind>(kind);
    out.version = get_le(h + 16, 8);
    out.copied_version = copied;
    out.key = std::string_view(payload, key_bytes);
    out.content_type = std::string_view(payload + key_bytes, type_bytes);
    out.value_offset = record_header_bytes + key_bytes + type_bytes + copied_bytes;
    out.value = std::string_view(h + out.value_offset, value_bytes);
    record_size = total;
    return decode_status::ok;
}

}  // namespace percore::store
