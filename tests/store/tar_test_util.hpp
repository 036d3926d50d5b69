// Helpers shared by the tar tests (tar_format_test, backup_restore_test): header blocks that other
// writers (or hostile archives) make, which encode_tar_header() never would.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

#include "store/tar_format.hpp"

namespace percore::store::test {

// The header of `h`, changed by `edit`, with its checksum made valid again (tar_format.hpp).
template <class Edit>
std::string edited_header(const tar_header& h, Edit edit) {
    std::string block(tar_block_bytes, '\0');
    encode_tar_header(h, block.data());
    edit(block);
    std::memset(block.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : block) sum += static_cast<unsigned char>(c);
    std::snprintf(block.data() + 148, 8, "%06o", sum);
    return block;
}

// A file's header naming `raw_name` as it is, whatever it holds.
inline std::string header_named(const char* raw_name, std::uint64_t size) {
    return edited_header(tar_header{"x", tar_type::file, 0644, size, 0},
                         [&](std::string& b) { std::strncpy(b.data(), raw_name, 100); });
}

}  // namespace percore::store::test
