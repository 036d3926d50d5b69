#include "store/counter_file.hpp"

#include <cerrno>
#include <cstring>
#include <span>

#include "store/crc32c.hpp"

namespace percore::store {

namespace {

void put_u64(char* out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

std::uint64_t get_u64(const char* in) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(in[i]);
    return v;
}

}  // namespace

io_result<void> write_counter_file(env& e, const std::string& directory, const char* name,
                                   const char (&magic)[counter_magic_bytes + 1], std::uint64_t value, bool sync) {
    char bytes[counter_file_bytes];
    std::memcpy(bytes, magic, counter_magic_bytes);
    put_u64(bytes + 8, value);
    std::uint32_t crc = crc32c(bytes, 16);
    for (int i = 0; i < 4; ++i) bytes[16 + i] = static_cast<char>(crc >> (8 * i));
    const std::string tmp = directory + "/" + name + ".tmp";
    auto f = e.open_writable(tmp);
    if (!f) return std::unexpected(f.error());
    // a leftover of an interrupted write is overwritten, not appended to
    if (auto r = (*f)->truncate(0); !r) return r;
    if (auto r = (*f)->append(std::span<const char>(bytes, sizeof bytes)); !r) return r;
    if (sync)
        if (auto r = (*f)->sync(); !r) return r;
    f->reset();
    if (auto r = e.rename(tmp, directory + "/" + name); !r) return r;
    return sync ? e.sync_directory(directory) : io_result<void>{};
}

io_result<std::optional<std::uint64_t>> read_counter_file(env& e, const std::string& path,
                                                          const char (&magic)[counter_magic_bytes + 1]) {
    if (!e.exists(path)) return std::optional<std::uint64_t>();
    auto f = e.open_readable(path);
    if (!f) return std::unexpected(f.error());
    char bytes[counter_file_bytes + 1];
    auto n = (*f)->read_at(0, std::span<char>(bytes, sizeof bytes));
    if (!n) return std::unexpected(n.error());
    std::uint32_t crc = 0;
    for (int i = 3; i >= 0; --i) crc = crc << 8 | static_cast<unsigned char>(bytes[16 + i]);
    if (*n != counter_file_bytes || std::memcmp(bytes, magic, counter_magic_bytes) != 0 || crc32c(bytes, 16) != crc)
        return std::unexpected(EBADMSG);
    return std::optional<std::uint64_t>(get_u64(bytes + 8));
}

}  // namespace percore::store
