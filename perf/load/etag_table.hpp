// etag_table: the last ETag one worker saw for each key (for --if-match).
//
// Contract
// - One table per worker thread, sized once (keys x max_etag_bytes); store()/get() never allocate.
// - An ETag longer than max_etag_bytes is not kept (the key then has none).
// - Workers do not share tables: a worker learns ETags only from its own answers.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace percore::load {

inline constexpr std::size_t max_etag_bytes = 127;

class etag_table {
public:
    void resize(std::uint64_t keys) {
        bytes_.assign(keys * max_etag_bytes, 0);
        lengths_.assign(keys, 0);
    }
    bool enabled() const { return !lengths_.empty(); }
    void store(std::uint64_t key, std::string_view etag) {
        if (!enabled()) return;
        if (etag.size() > max_etag_bytes) etag = {};
        std::memcpy(bytes_.data() + key * max_etag_bytes, etag.data(), etag.size());
        lengths_[key] = static_cast<std::uint8_t>(etag.size());
    }
    std::string_view get(std::uint64_t key) const {
        if (!enabled()) return {};
        return {bytes_.data() + key * max_etag_bytes, lengths_[key]};
    }

private:
    std::vector<char> bytes_;
    std::vector<std::uint8_t> lengths_;
};

}  // namespace percore::load
