#include "shards/base/metrics.hpp"

namespace percore::shards {

namespace {

void observe_duration(histogram<latency_bounds_seconds.size()>& h, std::uint64_t ns) {
    std::size_t b = 0;
    while (b < latency_bounds_ns.size() && ns > latency_bounds_ns[b]) ++b;
    add(h.buckets[b]);
    add(h.count);
    add(h.sum, ns);
}

}  // namespace

void shard_metrics::record_request(net::method m, int status, std::uint64_t latency) {
    const std::size_t mi = method_index(m);
    add(requests[mi][status_index(status)]);
    observe_duration(latency_ns[mi], latency);
}

void shard_metrics::record_sync(std::uint64_t duration) { observe_duration(sync_ns, duration); }

void shard_metrics::record_batch(std::uint64_t writes, std::uint64_t bytes) {
    std::size_t b = 0;
    while (b < batch_size_bounds.size() && writes > batch_size_bounds[b]) ++b;
    add(batch_writes.buckets[b]);
    add(batch_writes.count);
    add(batch_writes.sum, writes);
    add(batch_bytes, bytes);
}

}  // namespace percore::shards
