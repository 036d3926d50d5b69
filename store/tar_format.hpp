// tar_format: the archive a backup is (GET /_backup, `percore restore`; SPEC §11) — a POSIX ustar
// tar, whose 512-byte header is written and read here. Pure: bytes in, bytes out; nothing of files
// or sockets.
//
// An archive is a sequence of entries, each one header block, then (a regular file) its bytes
// padded with zeros to a multiple of 512; two zero blocks end it (POSIX.1-2001 pax, "ustar").
//
// Header block (512 bytes; text fields NUL-padded; numbers octal ASCII ended by a NUL):
//   offset size  field
//      0   100   name       the entry's path ("layout-1/shard-000/0000000000000001.seg"); a
//                           directory's ends in '/'
//    100     8   mode       7 octal digits: "0000644"
//    108     8   uid        "0000000" (a restore does not chown)
//    116     8   gid        "0000000"
//    124    12   size       11 octal digits: at most max_tar_entry_bytes (8 GiB - 1)
//    136    12   mtime      11 octal digits: seconds since the epoch
//    148     8   chksum     the sum of the 512 bytes as unsigned, this field counted as 8 spaces;
//                           6 octal digits, NUL, space
//    156     1   typeflag   '0' regular file, '5' directory
//    157   100   linkname   empty
//    257     6   magic      "ustar" NUL
//    263     2   version    "00"
//    265    32   uname      empty
//    297    32   gname      empty
//    329     8   devmajor   empty
//    337     8   devminor   empty
//    345   155   prefix     empty when written (every path a backup holds is under 100 bytes); read:
//                           the path is prefix '/' name
//    500    12   zeros
//
// Contract
// - encode_tar_header() REQUIRES (PERCORE_REQUIRES): a name of 1 to max_tar_name_bytes bytes, a
//   size of at most max_tar_entry_bytes (octal's 11 digits: a segment is at most its target, 2 GiB
//   at most, plus one record, 1 GiB: far inside), mode at most 07777.
// - decode_tar_header() reads what GNU tar and bsdtar write too (the "ustar  " magic of GNU's
//   format included), and refuses, with a one-line reason: a bad checksum, another magic, a size
//   in GNU's base-256 (never needed here), any type but a regular file or a directory (links,
//   devices, pax and GNU long-name headers), and a path that is absolute, empty, or has a `..` or
//   empty component (safe_relative_path()). A leading "./" is dropped, as is a directory's
//   trailing '/'.
// - Thread: any (functions of their arguments).
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace percore::store {

inline constexpr std::size_t tar_block_bytes = 512;
inline constexpr std::size_t max_tar_name_bytes = 99;            // the name field, NUL included
inline constexpr std::uint64_t max_tar_entry_bytes = (1ull << 33) - 1;  // 11 octal digits
// What ends an archive.
inline constexpr std::size_t tar_end_blocks = 2;

enum class tar_type : std::uint8_t { file, directory };

struct tar_header {
    std::string name;          // without a directory's trailing '/'
    tar_type type = tar_type::file;
    std::uint32_t mode = 0644;
    std::uint64_t size = 0;    // a directory: 0
    std::int64_t mtime = 0;
};

// Writes the header block of `h` into out[0, tar_block_bytes).
void encode_tar_header(const tar_header& h, char* out);

// The header in block[0, tar_block_bytes) (contract above); the error is one line.
std::expected<tar_header, std::string> decode_tar_header(const char* block);

// Zeros that follow an entry's `size` bytes up to the next block.
inline std::size_t tar_padding(std::uint64_t size) {
    return static_cast<std::size_t>((tar_block_bytes - size % tar_block_bytes) % tar_block_bytes);
}

bool is_zero_block(const char* block);

// A relative path of components that are neither empty, "." nor "..": what may be created under a
// directory without leaving it.
bool safe_relative_path(std::string_view path);

// An entry's name as a log line may show it: its first 120 bytes, anything but printable ASCII as
// '?' (an archive's names are not trusted to be text).
std::string printable_name(std::string_view name);

}  // namespace percore::store
