#include "histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace percore::load {

namespace {
constexpr std::uint64_t sub_count = std::uint64_t{1} << histogram::sub_bucket_bits;
}

std::size_t histogram::index_of(std::uint64_t us) {
    us = std::min(us, max_trackable_us);
    if (us < sub_count) return static_cast<std::size_t>(us);
    unsigned e = static_cast<unsigned>(std::bit_width(us)) - 1;   // e >= sub_bucket_bits
    std::uint64_t sub = (us >> (e - sub_bucket_bits)) & (sub_count - 1);
    return static_cast<std::size_t>((e - sub_bucket_bits + 1) * sub_count + sub);
}

std::uint64_t histogram::low_of(std::size_t index) {
    if (index < sub_count) return index;
    unsigned e = static_cast<unsigned>(index / sub_count) + sub_bucket_bits - 1;
    std::uint64_t sub = index % sub_count;
    return (std::uint64_t{1} << e) + (sub << (e - sub_bucket_bits));
}

std::uint64_t histogram::high_of(std::size_t index) {
    if (index < sub_count) return index;
    unsigned e = static_cast<unsigned>(index / sub_count) + sub_bucket_bits - 1;
    return low_of(index) + (std::uint64_t{1} << (e - sub_bucket_bits)) - 1;
}

void histogram::record(std::uint64_t us) {
    ++counts_[index_of(us)];
    ++count_;
    max_ = std::max(max_, us);
}

void histogram::merge(const histogram& other) {
    for (std::size_t i = 0; i < bucket_count; ++i) counts_[i] += other.counts_[i];
    count_ += other.count_;
    max_ = std::max(max_, other.max_);
}

std::uint64_t histogram::percentile(double p) const {
    if (count_ == 0) return 0;
    auto rank = static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
    rank = std::clamp<std::uint64_t>(rank, 1, count_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < bucket_count; ++i) {
        seen += counts_[i];
        if (seen >= rank) return std::min(high_of(i), max_);
    }
    return max_;
}

std::vector<histogram::bucket> histogram::nonempty_buckets() const {
    std::vector<bucket> out;
    for (std::size_t i = 0; i < bucket_count; ++i)
        if (counts_[i]) out.push_back({low_of(i), high_of(i), counts_[i]});
    return out;
}

}  // namespace percore::load
