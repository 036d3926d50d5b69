// shard_metrics (shards/base/metrics.hpp): where an answer is counted — its method's and status's
// slot, and its latency's bucket.
#include <doctest.h>

#include <cstddef>
#include <cstdint>

#include "shards/base/metrics.hpp"

using namespace percore::shards;

namespace {

// The bucket record_request() counted a latency in (its method's histogram, which starts empty).
std::size_t bucket_of(std::uint64_t latency_ns) {
    shard_metrics m;
    m.record_request(percore::net::method::get, 200, latency_ns);
    for (std::size_t b = 0; b < m.latency_ns[0].buckets.size(); ++b)
        if (read(m.latency_ns[0].buckets[b]) == 1) return b;
    FAIL("no bucket counted the latency");
    return 0;
}

}  // namespace

TEST_CASE("every counted status has its own slot and any other status shares the last") {
    for (std::size_t i = 0; i + 1 < metric_statuses.size(); ++i) CHECK(status_index(metric_statuses[i]) == i);
    const std::size_t other = metric_statuses.size() - 1;
    CHECK(status_index(202) == other);
    CHECK(status_index(99) == other);
    CHECK(status_index(600) == other);
    CHECK(status_index(-1) == other);
}

TEST_CASE("a latency equal to a bound is counted in that bound's bucket, a nanosecond more in the next") {
    CHECK(bucket_of(0) == 0);
    CHECK(bucket_of(100'000) == 0);   // 0.0001 s
    CHECK(bucket_of(100'001) == 1);
    CHECK(bucket_of(2'500'000'000) == latency_bounds_seconds.size() - 1);   // 2.5 s
    CHECK(bucket_of(2'500'000'001) == latency_bounds_seconds.size());       // +Inf
}

TEST_CASE("an answer is counted under its method and status") {
    shard_metrics m;
    m.record_request(percore::net::method::put, 204, 1);
    m.record_request(percore::net::method::patch, 418, 1);
    CHECK(read(m.requests[method_index(percore::net::method::put)][status_index(204)]) == 1);
    CHECK(read(m.requests[metric_methods.size() - 1][metric_statuses.size() - 1]) == 1);
    CHECK(read(m.latency_ns[2].count) == 1);
}
