#include "report.hpp"

#include <algorithm>
#include <bit>
#include <iomanip>

namespace percore::load {

namespace {

constexpr double percentiles[] = {50.0, 90.0, 99.0, 99.9};
constexpr const char* percentile_names[] = {"p50", "p90", "p99", "p99_9"};

double cpu_utilisation(const options& o, const run_result& r) {
    double wall = r.duration_s * o.threads;
    return wall > 0 ? (r.cpu_user_s + r.cpu_system_s) / wall : 0;
}

void json_string(std::ostream& out, std::string_view s) {
    out << '"';
    for (char c : s) {
        if (c == '"' || c == '\\') out << '\\' << c;
        else if (static_cast<unsigned char>(c) < 0x20) out << "\\u00" << "0123456789abcdef"[(c >> 4) & 0xf] << "0123456789abcdef"[c & 0xf];
        else out << c;
    }
    out << '"';
}

// The names of the --header fields, never their values (a value may be a bearer token).
std::string_view header_name(const std::string& field) { return std::string_view(field).substr(0, field.find(':')); }

}  // namespace

void write_text(std::ostream& out, const options& o, const run_result& r) {
    const stats& s = r.totals;
    out << std::fixed << std::setprecision(2);
    out << "percore-load " << o.host << " ";
    if (!o.path.empty()) out << o.path;
    else out << "/" << o.app << "/";
    out << " style=" << style_name(o.style) << " connections=" << o.connections
        << " threads=" << o.threads << " mode=" << (o.mode == connection_mode::close ? "close" : "keep-alive")
        << " pipeline=" << o.pipeline << " mix=get:" << o.get_percent << ",put:" << o.put_percent
        << " keys=" << o.keys << " size=" << o.size << (o.if_match ? " if-match" : "");
    if (o.rate > 0) out << " rate=" << o.rate;
    for (std::size_t i = 0; i < o.headers.size(); ++i) out << (i == 0 ? " headers=" : ",") << header_name(o.headers[i]);
    out << "\n";
    out << "  duration        " << r.duration_s << " s\n";
    out << "  requests sent   " << s.sent << "\n";
    out << "  answered        " << s.answered << "  (" << (r.duration_s > 0 ? s.answered / r.duration_s : 0) << " req/s)\n";
    out << "  status          1xx=" << s.status_class[1] << " 2xx=" << s.status_class[2] << " 3xx=" << s.status_class[3]
        << " 4xx=" << s.status_class[4] << " 5xx=" << s.status_class[5] << "\n";
    out << "  412 (if-match)  " << s.precondition_failed << "\n";
    out << "  wrong answers   " << s.wrong;
    if (!s.first_wrong.empty()) out << "  first: " << s.first_wrong;
    out << "\n";
    out << "  connects        " << s.connects << "  connect errors " << s.connect_errors
        << "  io errors " << s.io_errors << "  unanswered " << s.unanswered;
    if (o.rate > 0) out << "  due but unsent " << s.due_unsent;
    out << "\n";
    out << "  latency us      ";
    for (std::size_t i = 0; i < std::size(percentiles); ++i)
        out << percentile_names[i] << "=" << s.latency.percentile(percentiles[i]) << " ";
    out << "max=" << s.latency.max() << "\n";
    out << "  generator cpu   " << r.cpu_user_s + r.cpu_system_s << " s (user " << r.cpu_user_s << ", sys "
        << r.cpu_system_s << "), " << std::setprecision(1) << cpu_utilisation(o, r) * 100
        << "% of " << o.threads << " thread(s)\n";
    out << "  latency histogram (us, bucket low..high: count)\n";
    // coarse view: the log-linear buckets merged per power of two
    std::uint64_t group = 0, count = 0;
    auto flush_group = [&] {
        if (count > 0)
            out << "    " << std::setw(10) << group << ".." << std::setw(10) << (group == 0 ? 0 : group * 2 - 1)
                << ": " << count << "\n";
        count = 0;
    };
    for (const auto& b : s.latency.nonempty_buckets()) {
        std::uint64_t g = b.low_us == 0 ? 0 : std::bit_floor(b.low_us);
        if (g != group) flush_group();
        group = g;
        count += b.count;
    }
    flush_group();
    out << std::defaultfloat;
}

void write_json(std::ostream& out, const options& o, const run_result& r) {
    const stats& s = r.totals;
    out << std::setprecision(9);
    out << "{\"url\":";
    json_string(out, "http://" + o.host);
    out << ",\"app\":";
    json_string(out, o.app);
    out << ",\"path\":";
    if (o.path.empty()) out << "null";
    else json_string(out, o.path);
    out << ",\"style\":\"" << style_name(o.style) << "\"";
    out << ",\"connections\":" << o.connections << ",\"threads\":" << o.threads
        << ",\"mode\":\"" << (o.mode == connection_mode::close ? "close" : "keep-alive") << "\""
        << ",\"pipeline\":" << o.pipeline << ",\"mix\":{\"get\":" << o.get_percent << ",\"put\":" << o.put_percent << "}"
        << ",\"keys\":" << o.keys << ",\"size\":" << o.size << ",\"if_match\":" << (o.if_match ? "true" : "false")
        << ",\"rate\":" << o.rate << ",\"prepare\":" << (o.prepare ? "true" : "false")
        << ",\"headers\":[";
    for (std::size_t i = 0; i < o.headers.size(); ++i) {
        if (i > 0) out << ",";
        json_string(out, header_name(o.headers[i]));
    }
    out << "]"
        << ",\"duration_s\":" << r.duration_s
        << ",\"requests\":" << s.sent << ",\"answered\":" << s.answered
        << ",\"requests_per_s\":" << (r.duration_s > 0 ? s.answered / r.duration_s : 0)
        << ",\"status\":{\"1xx\":" << s.status_class[1] << ",\"2xx\":" << s.status_class[2] << ",\"3xx\":" << s.status_class[3]
        << ",\"4xx\":" << s.status_class[4] << ",\"5xx\":" << s.status_class[5] << "}"
        << ",\"precondition_failed\":" << s.precondition_failed
        << ",\"wrong\":" << s.wrong << ",\"first_wrong\":";
    if (s.first_wrong.empty()) out << "null";
    else json_string(out, s.first_wrong);
    out << ",\"connects\":" << s.connects << ",\"connect_errors\":" << s.connect_errors
        << ",\"io_errors\":" << s.io_errors << ",\"unanswered\":" << s.unanswered
        << ",\"due_unsent\":" << s.due_unsent
        << ",\"latency_us\":{\"count\":" << s.latency.count();
    for (std::size_t i = 0; i < std::size(percentiles); ++i)
        out << ",\"" << percentile_names[i] << "\":" << s.latency.percentile(percentiles[i]);
    out << ",\"max\":" << s.latency.max() << ",\"buckets\":[";
    bool first = true;
    for (const auto& b : s.latency.nonempty_buckets()) {
        out << (first ? "" : ",") << "[" << b.low_us << "," << b.high_us << "," << b.count << "]";
        first = false;
    }
    out << "]},\"cpu\":{\"user_s\":" << r.cpu_user_s << ",\"system_s\":" << r.cpu_system_s
        << ",\"utilisation\":" << cpu_utilisation(o, r) << "}}\n";
}

}  // namespace percore::load
