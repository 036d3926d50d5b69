// prometheus_writer: Prometheus's text exposition format (version 0.0.4) written into /_metrics'
// page — a family's HELP and TYPE lines, samples labelled with their shard (and further labels),
// unlabelled samples, and histograms as cumulative buckets with their sum and count.
//
// Contract
// - Appends to the caller's buffer, which it does not own (the page's text); any thread.
// - Checks nothing: names, types and help texts are the caller's constants, and `labels` is
//   already in the format (`name="value"` pairs, comma-separated, values quoted and escaped).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "shards/base/json_text.hpp"
#include "shards/base/metrics.hpp"

namespace percore::shards {

class prometheus_writer {
public:
    explicit prometheus_writer(std::string& out) : out_(out) {}

    // # HELP name help / # TYPE name type
    void family(std::string_view name, std::string_view type, std::string_view help);
    // name{shard="S",labels} v
    void sample(std::string_view name, unsigned shard, std::string_view labels, std::uint64_t v);
    // name{shard="S"} v, v a decimal
    void sample_double(std::string_view name, unsigned shard, double v);
    // name value (process-wide: no shard label)
    void plain(std::string_view name, std::string_view value);
    void plain(std::string_view name, std::uint64_t v);
    // name num/den, up to nine decimal places (append_ratio)
    void plain_ratio(std::string_view name, std::uint64_t num, std::uint64_t den);

    // name_bucket{shard="S",labels,le="bound"} cumulative, for every bound and +Inf; then
    // name_sum (the histogram's sum times sum_scale) and name_count.
    template <std::size_t N, class Bound>
    void histogram(std::string_view name, unsigned shard, const shards::histogram<N>& h,
                   const std::array<Bound, N>& bounds, double sum_scale, std::string_view labels = {}) {
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= N; ++i) {
            cumulative += read(h.buckets[i]);
            open_labels(name, "_bucket", shard, labels);
            out_.append(",le=\"");
            if (i == N) out_.append("+Inf");
            else append_decimal(out_, static_cast<double>(bounds[i]));
            out_.append("\"} ");
            append_uint(out_, cumulative);
            out_.push_back('\n');
        }
        open_labels(name, "_sum", shard, labels);
        out_.append("} ");
        append_decimal(out_, static_cast<double>(read(h.sum)) * sum_scale);
        out_.push_back('\n');
        open_labels(name, "_count", shard, labels);
        out_.append("} ");
        append_uint(out_, read(h.count));
        out_.push_back('\n');
    }

private:
    // name suffix{shard="S" then `labels` if any (the brace left open)
    void open_labels(std::string_view name, std::string_view suffix, unsigned shard, std::string_view labels);

    std::string& out_;
};

}  // namespace percore::shards
