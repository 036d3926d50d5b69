#include "shards/http/prometheus_writer.hpp"

namespace percore::shards {

void prometheus_writer::family(std::string_view name, std::string_view type, std::string_view help) {
    out_.append("# HELP ").append(name).push_back(' ');
    out_.append(help).push_back('\n');
    out_.append("# TYPE ").append(name).push_back(' ');
    out_.append(type).push_back('\n');
}

void prometheus_writer::sample(std::string_view name, unsigned shard, std::string_view labels, std::uint64_t v) {
    open_labels(name, {}, shard, labels);
    out_.append("} ");
    append_uint(out_, v);
    out_.push_back('\n');
}

void prometheus_writer::sample_double(std::string_view name, unsigned shard, double v) {
    open_labels(name, {}, shard, {});
    out_.append("} ");
    append_decimal(out_, v);
    out_.push_back('\n');
}

void prometheus_writer::plain(std::string_view name, std::string_view value) {
    out_.append(name).push_back(' ');
    out_.append(value).push_back('\n');
}

void prometheus_writer::plain(std::string_view name, std::uint64_t v) {
    out_.append(name).push_back(' ');
    append_uint(out_, v);
    out_.push_back('\n');
}

void prometheus_writer::plain_ratio(std::string_view name, std::uint64_t num, std::uint64_t den) {
    out_.append(name).push_back(' ');
    append_ratio(out_, num, den);
    out_.push_back('\n');
}

void prometheus_writer::open_labels(std::string_view name, std::string_view suffix, unsigned shard,
                                    std::string_view labels) {
    out_.append(name).append(suffix).append("{shard=\"");
    append_uint(out_, shard);
    out_.push_back('"');
    if (!labels.empty()) out_.push_back(',');
    out_.append(labels);
}

}  // namespace percore::shards
