#include "store/feed_floor.hpp"

#include <cerrno>
#include <cstring>

#include "store/counter_file.hpp"

namespace percore::store {

namespace {
constexpr char magic[] = "PCFLOOR1";
}  // namespace

io_result<void> write_feed_floor(env& e, const std::string& directory, std::uint64_t floor) {
    return write_counter_file(e, directory, feed_floor_file_name, magic, floor);
}

result<std::uint64_t> read_feed_floor(env& e, const std::string& directory) {
    const std::string path = directory + "/" + feed_floor_file_name;
    auto read = read_counter_file(e, path, magic);
    if (read) return read->value_or(0);
    if (read.error() == EBADMSG)
        return std::unexpected(path + " is damaged (not a percore feed floor); refusing to start. Restore it, or "
                                      "remove it if no change feed client of this shard must resume (its floor is then 0)");
    return std::unexpected("cannot read " + path + ": " + std::strerror(read.error()));
}

}  // namespace percore::store
