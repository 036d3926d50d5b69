#include "store/feed_floor.hpp"

#include <cstring>
#include <span>

#include "store/crc32c.hpp"

namespace percore::store {

namespace {

constexpr char magic[8] = {'P', 'C', 'F', 'L', 'O', 'O', 'R', '1'};

void put_u64(char* out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

std::uint64_t get_u64(const char* in) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(in[i]);
    return v;
}

}  // namespace

io_result<void> write_feed_floor(env& e, const std::string& directory, std::uint64_t floor) {
    char bytes[feed_floor_file_bytes];
    std::memcpy(bytes, magic, sizeof magic);
    put_u64(bytes + 8, floor);
    std::uint32_t crc = crc32c(bytes, 16);
    for (int i = 0; i < 4; ++i) bytes[16 + i] = static_cast<char>(crc >> (8 * i));
    const std::string tmp = directory + "/" + feed_floor_file_name + ".tmp";
    auto f = e.open_writable(tmp);
    if (!f) return std::unexpected(f.error());
    // a leftover of an interrupted write is overwritten, not appended to
    if (auto r = (*f)->truncate(0); !r) return r;
    if (auto r = (*f)->append(std::span<const char>(bytes, sizeof bytes)); !r) return r;
    if (auto r = (*f)->sync(); !r) return r;
    f->reset();
    if (auto r = e.rename(tmp, directory + "/" + feed_floor_file_name); !r) return r;
    return e.sync_directory(directory);
}

result<std::uint64_t> read_feed_floor(env& e, const std::string& directory) {
    const std::string path = directory + "/" + feed_floor_file_name;
    if (!e.exists(path)) return std::uint64_t{0};
    auto f = e.open_readable(path);
    if (!f) return std::unexpected("cannot open " + path + ": " + std::strerror(f.error()));
    char bytes[feed_floor_file_bytes + 1];
    auto n = (*f)->read_at(0, std::span<char>(bytes, sizeof bytes));
    if (!n) return std::unexpected("cannot read " + path + ": " + std::strerror(n.error()));
    std::uint32_t crc = 0;
    for (int i = 3; i >= 0; --i) crc = crc << 8 | static_cast<unsigned char>(bytes[16 + i]);
    if (*n != feed_floor_file_bytes || std::memcmp(bytes, magic, sizeof magic) != 0 || crc32c(bytes, 16) != crc)
        return std::unexpected(path + " is damaged (not a percore feed floor); refusing to start. Restore it, or "
                                      "remove it if no change feed client of this shard must resume (its floor is then 0)");
    return get_u64(bytes + 8);
}

}  // namespace percore::store
