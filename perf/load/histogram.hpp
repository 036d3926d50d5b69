// histogram: a log-linear latency histogram in microseconds (HdrHistogram-like, fixed size).
//
// Contract
// - record() never allocates: values below 2^sub_bucket_bits us get a bucket each, above that
//   every power of two is split into 2^sub_bucket_bits equal buckets (relative error <= 1/32).
//   Values beyond max_trackable_us land in the last bucket; max() is exact.
// - percentile(p) returns the upper bound of the bucket holding the p-th percentile (0 when empty).
// - merge() adds another histogram's counts; histograms are used by one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace percore::load {

class histogram {
public:
    static constexpr unsigned sub_bucket_bits = 5;
    static constexpr unsigned max_exponent = 40;   // up to ~2^40 us (12 days)
    static constexpr std::uint64_t max_trackable_us = (std::uint64_t{1} << max_exponent) - 1;
    static constexpr std::size_t bucket_count =
        (max_exponent - sub_bucket_bits + 1) * (std::size_t{1} << sub_bucket_bits);

    void record(std::uint64_t us);
    void merge(const histogram& other);

    std::uint64_t count() const { return count_; }
    std::uint64_t max() const { return max_; }
    std::uint64_t percentile(double p) const;

    struct bucket { std::uint64_t low_us, high_us, count; };
    // The non-empty buckets, lowest first (allocates; for reports only).
    std::vector<bucket> nonempty_buckets() const;

private:
    static std::size_t index_of(std::uint64_t us);
    static std::uint64_t low_of(std::size_t index);
    static std::uint64_t high_of(std::size_t index);

    std::array<std::uint64_t, bucket_count> counts_{};
    std::uint64_t count_ = 0;
    std::uint64_t max_ = 0;
};

}  // namespace percore::load
