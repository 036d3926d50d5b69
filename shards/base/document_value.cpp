#include "shards/base/document_value.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "store/document.hpp"
#include "store/segment_file.hpp"

namespace percore::shards {

result<std::string_view> document_value(const store::snapshot& snap, const store::document& doc,
                                                             std::string& scratch) {
    if (!doc.in_file()) return doc.value();
    const store::segment_file* file = snap.segment(doc.segment());
    if (!file) return std::unexpected("the value's segment file is gone");
    scratch.resize(doc.value_size());
    std::size_t done = 0;
    while (done < scratch.size()) {
        ssize_t n = ::pread(file->descriptor(), scratch.data() + done, scratch.size() - done,
                            static_cast<off_t>(doc.file_offset() + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return std::unexpected(std::string("cannot read a value: ") + (n < 0 ? std::strerror(errno) : "short file"));
        done += static_cast<std::size_t>(n);
    }
    return std::string_view(scratch);
}

}  // namespace percore::shards
