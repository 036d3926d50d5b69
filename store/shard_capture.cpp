#include "store/shard_capture.hpp"

#include <cstring>

#include "store/feed_floor.hpp"
#include "store/shard_log.hpp"

namespace percore::store {

result<captured_file> capture_whole_file(env& e, const std::string& directory, const std::string& name) {
    const std::string path = directory + "/" + name;
    auto f = e.open_readable(path);
    if (!f) return std::unexpected("cannot open " + path + ": " + std::strerror(f.error()));
    auto size = (*f)->size();
    if (!size) return std::unexpected("cannot size " + path + ": " + std::strerror(size.error()));
    return captured_file{name, std::move(*f), *size};
}

result<shard_capture> capture_shard_files(env& e, const std::string& directory, const segment_set& segments) {
    shard_capture c;
    const auto& usage = segments.usage();
    const std::uint64_t newest = usage.empty() ? 0 : usage.rbegin()->first;
    for (const auto& [id, u] : usage) {
        auto f = capture_whole_file(e, directory, segment_file_name(id));
        if (!f) return std::unexpected(f.error());
        if (id == newest) {
            if (f->length < u.bytes)
                return std::unexpected(directory + "/" + f->name + " is " + std::to_string(f->length) +
                                       " bytes, shorter than the " + std::to_string(u.bytes) +
                                       " its shard wrote: changed behind the server's back");
            f->length = u.bytes;  // the end of the last settled batch
        }
        c.files.push_back(std::move(*f));
    }
    // Written only by this thread (the store's owner), by a rename: present or not, never half.
    if (e.exists(directory + "/" + feed_floor_file_name)) {
        auto f = capture_whole_file(e, directory, feed_floor_file_name);
        if (!f) return std::unexpected(f.error());
        c.files.push_back(std::move(*f));
    }
    return c;
}

}  // namespace percore::store
