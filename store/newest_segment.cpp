#include "store/newest_segment.hpp"

#include "store/counter_file.hpp"

namespace percore::store {

namespace {
constexpr char magic[] = "PCNEWSG1";
}  // namespace

io_result<void> write_newest_segment(env& e, const std::string& directory, std::uint64_t segment_id, bool sync) {
    return write_counter_file(e, directory, newest_segment_file_name, magic, segment_id, sync);
}

io_result<std::optional<std::uint64_t>> read_newest_segment(env& e, const std::string& directory) {
    return read_counter_file(e, directory + "/" + newest_segment_file_name, magic);
}

}  // namespace percore::store
