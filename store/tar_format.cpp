#include "store/tar_format.hpp"

#include <algorithm>
#include <cstring>

#include "shards/runtime/check.hpp"

namespace percore::store {

namespace {

// Field offsets and widths (the header drawn in tar_format.hpp).
struct field {
    std::size_t offset;
    std::size_t width;
};
constexpr field name_field{0, 100};
constexpr field mode_field{100, 8};
constexpr field uid_field{108, 8};
constexpr field gid_field{116, 8};
constexpr field size_field{124, 12};
constexpr field mtime_field{136, 12};
constexpr field checksum_field{148, 8};
constexpr std::size_t typeflag_offset = 156;
constexpr field magic_field{257, 6};
constexpr field version_field{263, 2};
constexpr field prefix_field{345, 155};

constexpr char type_file = '0';
constexpr char type_file_old = '\0';  // pre-POSIX tars: a regular file
constexpr char type_directory = '5';

// `value` as width-1 octal digits, zero-filled, then a NUL.
void put_octal(char* block, field f, std::uint64_t value) {
    char* p = block + f.offset;
    p[f.width - 1] = '\0';
    for (std::size_t i = f.width - 1; i-- > 0;) {
        p[i] = static_cast<char>('0' + (value & 7));
        value >>= 3;
    }
}

// Octal digits after optional spaces, ended by a NUL, a space or the field's end; false on anything
// else (GNU's base-256, whose first byte has its high bit set, included).
bool get_octal(const char* block, field f, std::uint64_t& value) {
    const char* p = block + f.offset;
    const char* end = p + f.width;
    while (p < end && *p == ' ') ++p;
    value = 0;
    bool digits = false;
    for (; p < end && *p >= '0' && *p <= '7'; ++p) {
        if (value >> 61) return false;  // past 64 bits
        value = value << 3 | static_cast<std::uint64_t>(*p - '0');
        digits = true;
    }
    if (p < end && *p != '\0' && *p != ' ') return false;
    return digits;
}

std::uint64_t checksum_of(const char* block) {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < tar_block_bytes; ++i) {
        const bool in_field = i >= checksum_field.offset && i < checksum_field.offset + checksum_field.width;
        sum += in_field ? static_cast<unsigned char>(' ') : static_cast<unsigned char>(block[i]);
    }
    return sum;
}

std::string_view text_field(const char* block, field f) {
    const char* p = block + f.offset;
    return {p, static_cast<std::size_t>(std::find(p, p + f.width, '\0') - p)};
}

}  // namespace

void encode_tar_header(const tar_header& h, char* out) {
    PERCORE_REQUIRES(!h.name.empty() && h.name.size() + (h.type == tar_type::directory) <= max_tar_name_bytes);
    PERCORE_REQUIRES(h.size <= max_tar_entry_bytes && h.mode <= 07777);
    std::memset(out, 0, tar_block_bytes);
    std::memcpy(out + name_field.offset, h.name.data(), h.name.size());
    if (h.type == tar_type::directory) out[name_field.offset + h.name.size()] = '/';
    put_octal(out, mode_field, h.mode);
    put_octal(out, uid_field, 0);
    put_octal(out, gid_field, 0);
    put_octal(out, size_field, h.type == tar_type::directory ? 0 : h.size);
    put_octal(out, mtime_field, static_cast<std::uint64_t>(std::max<std::int64_t>(h.mtime, 0)));
    out[typeflag_offset] = h.type == tar_type::directory ? type_directory : type_file;
    std::memcpy(out + magic_field.offset, "ustar", 6);
    std::memcpy(out + version_field.offset, "00", 2);
    // 6 digits, NUL, space: what POSIX tar and GNU tar write
    std::uint64_t sum = checksum_of(out);
    char* c = out + checksum_field.offset;
    for (std::size_t i = 6; i-- > 0;) {
        c[i] = static_cast<char>('0' + (sum & 7));
        sum >>= 3;
    }
    c[6] = '\0';
    c[7] = ' ';
}

std::expected<tar_header, std::string> decode_tar_header(const char* block) {
    std::uint64_t stored = 0;
    if (!get_octal(block, checksum_field, stored) || stored != checksum_of(block))
        return std::unexpected("a tar header's checksum does not match: not a tar archive, or a damaged one");
    const bool posix = std::memcmp(block + magic_field.offset, "ustar\0", 6) == 0;
    const bool gnu = std::memcmp(block + magic_field.offset, "ustar ", 6) == 0;
    if (!posix && !gnu) return std::unexpected("a tar header is not in the ustar format");
    tar_header h;
    h.name.assign(text_field(block, name_field));
    if (std::string_view prefix = text_field(block, prefix_field); posix && !prefix.empty())
        h.name = std::string(prefix) + "/" + h.name;
    const std::string shown = printable_name(h.name);
    const char type = block[typeflag_offset];
    if (type != type_file && type != type_file_old && type != type_directory)
        return std::unexpected("entry '" + shown + "' is not a regular file or a directory (tar type '" +
                               printable_name(std::string_view(&type, 1)) + "')");
    h.type = type == type_directory ? tar_type::directory : tar_type::file;
    if (h.name.starts_with("./")) h.name.erase(0, 2);
    if (h.type == tar_type::directory && h.name.ends_with('/')) h.name.pop_back();
    if (!safe_relative_path(h.name))
        return std::unexpected("entry '" + shown + "' is not a relative path inside the archive");
    std::uint64_t mode = 0, size = 0, mtime = 0;
    if (!get_octal(block, mode_field, mode) || !get_octal(block, size_field, size) ||
        !get_octal(block, mtime_field, mtime))
        return std::unexpected("entry '" + shown + "' has a mode, size or time that is not octal");
    h.mode = static_cast<std::uint32_t>(mode & 07777);
    h.size = h.type == tar_type::directory ? 0 : size;
    h.mtime = static_cast<std::int64_t>(mtime);
    return h;
}

std::string printable_name(std::string_view name) {
    std::string out;
    for (char c : name.substr(0, 120)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
    return out;
}

bool is_zero_block(const char* block) {
    return std::all_of(block, block + tar_block_bytes, [](char c) { return c == 0; });
}

bool safe_relative_path(std::string_view path) {
    if (path.empty() || path.front() == '/') return false;
    while (!path.empty()) {
        std::size_t slash = path.find('/');
        std::string_view part = path.substr(0, slash);
        if (part.empty() || part == "." || part == "..") return false;
        if (slash == std::string_view::npos) break;
        path.remove_prefix(slash + 1);
        if (path.empty()) return false;  // a trailing '/'
    }
    return true;
}

}  // namespace percore::store
