#include "store/check.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "store/feed_floor.hpp"
#include "store/limits.hpp"

namespace percore::store {

namespace {

constexpr std::string_view layout_prefix = "layout-";

// The documents of a shard as recovery rebuilds them (shard_store::replay_record): the last record
// of a key is its state, a put (or a copy) makes it live and a tombstone removes it.
struct live_documents {
    std::unordered_map<std::string, std::uint64_t> value_bytes;  // by key

    void apply(const record_view& rec) {
        if (rec.holds_document()) value_bytes[std::string(rec.key)] = rec.value.size();
        else value_bytes.erase(std::string(rec.key));
    }
};

bool any_repairable(const std::vector<recovery_finding>& findings) {
    return std::any_of(findings.begin(), findings.end(), [](const recovery_finding& f) { return f.repairable(); });
}

// --repair in a shard the check found undamaged: recovery itself, the server's own repairs.
void repair_shard(env& e, shard_check& c) {
    auto fixed = recover_segments(e, c.directory, [](const record_view&, std::uint64_t, std::uint64_t) {}, {},
                                  recovery_mode::repair);
    if (!fixed) {
        c.findings.push_back({finding_kind::unreadable, c.directory, 0, 0, "--repair failed: " + fixed.error()});
        return;
    }
    c.repaired = std::move(fixed->findings);
    // recovery leaves its removals to the log's next directory sync; nothing follows a check
    if (auto r = e.sync_directory(c.directory); !r)
        c.findings.push_back({finding_kind::unreadable, c.directory, 0, 0,
                              "--repair cannot sync " + c.directory + ": " + std::strerror(r.error())});
}

// FORMAT is missing: damage when a layout holds segments (the server refuses it too), else not a
// data directory at all (the server would make a new one there).
result<check_report> without_format(env& e, check_report report, const std::vector<std::string>& names) {
    for (const std::string& n : names)
        if (n.starts_with(layout_prefix) && holds_segments(e, report.root + "/" + n))
            report.format_damage.push_back(report.root + " has no FORMAT but " + n + " holds log segments");
    if (report.format_damage.empty())
        return std::unexpected(report.root + " is not a percore data directory: it has no FORMAT");
    return report;
}

std::string counted(std::uint64_t n, const std::string& noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string shard_name(unsigned shard) {
    char name[16];
    std::snprintf(name, sizeof name, "shard %03u: ", shard);
    return name;
}

std::string finding_line(const shard_check& c, const recovery_finding& f, bool repair) {
    std::string line = shard_name(c.shard);
    if (f.damage()) return line + "damaged: " + f.what;
    if (f.kind == finding_kind::unreadable) return line + "unreadable: " + f.what;
    const bool torn = f.kind == finding_kind::torn_tail;
    line += (torn ? "torn tail: " : "leftover: ") + f.what;
    if (c.damaged()) return line + "; not repaired: the shard is damaged";
    if (repair) return line + "; not repaired";  // a repaired one is listed as such instead
    return line + (torn ? "; recovery or --repair cuts it" : "; recovery or --repair removes it");
}

std::string shard_status(const shard_check& c) {
    if (c.damaged()) return "damaged";
    if (c.unreadable()) return "unreadable";
    if (!c.repaired.empty()) return "repaired";
    if (any_repairable(c.findings)) return "repairable";
    return "clean";
}

std::string summary_line(const check_report& report) {
    std::size_t damaged = 0, repairable = 0, repaired = 0;
    std::uint64_t documents = 0;
    for (const shard_check& c : report.shards) {
        damaged += c.damaged();
        repaired += !c.repaired.empty();
        repairable += c.repaired.empty() && any_repairable(c.findings) && !c.damaged();
        documents += c.documents;
    }
    const std::string shards = counted(report.shards.size(), "shard");
    switch (report.outcome()) {
    case check_report::verdict::damaged:
        if (!report.format_damage.empty()) return "percore check: damaged (FORMAT or layout): no shard was checked";
        return "percore check: damaged (" + std::to_string(damaged) + " of " + shards +
               "): restore the damaged files from a backup, or move them away to give up their records" +
               (report.repair ? "; --repair changed nothing in a damaged shard" : "");
    case check_report::verdict::incomplete:
        return "percore check: incomplete: some files could not be read (above); nothing damaged was found in the rest";
    case check_report::verdict::clean:
        break;
    }
    std::string line = "percore check: clean (" + shards + ", " + counted(documents, "document") + ")";
    if (repaired) line += "; repaired " + counted(repaired, "shard");
    if (repairable) line += "; " + counted(repairable, "shard") + " with what recovery or --repair repairs (above)";
    return line;
}

}  // namespace

bool shard_check::damaged() const {
    return std::any_of(findings.begin(), findings.end(), [](const recovery_finding& f) { return f.damage(); });
}

bool shard_check::unreadable() const {
    return !damaged() && std::any_of(findings.begin(), findings.end(), [](const recovery_finding& f) {
        return f.kind == finding_kind::unreadable;
    });
}

check_report::verdict check_report::outcome() const {
    if (!format_damage.empty()) return verdict::damaged;
    if (std::any_of(shards.begin(), shards.end(), [](const shard_check& c) { return c.damaged(); }))
        return verdict::damaged;
    if (std::any_of(shards.begin(), shards.end(), [](const shard_check& c) { return c.unreadable(); }))
        return verdict::incomplete;
    return verdict::clean;
}

shard_check check_shard_directory(env& e, const std::string& directory, unsigned shard, bool repair) {
    shard_check c;
    c.shard = shard;
    c.directory = directory;
    // recovery reads the floor first (shard_store::recover): its damage comes first
    if (auto floor = read_feed_floor(e, directory); !floor)
        c.findings.push_back(
            {finding_kind::damaged_feed_floor, directory + "/" + feed_floor_file_name, 0, 0, floor.error()});
    live_documents live;
    auto stats = recover_segments(
        e, directory, [&](const record_view& rec, std::uint64_t, std::uint64_t) { live.apply(rec); }, {},
        recovery_mode::verify);
    if (!stats) {
        c.findings.push_back({finding_kind::unreadable, directory, 0, 0, stats.error()});
        return c;
    }
    c.segments = stats->segments;
    c.records = stats->records;
    c.segment_bytes = stats->bytes;
    c.findings.insert(c.findings.end(), stats->findings.begin(), stats->findings.end());
    c.documents = live.value_bytes.size();
    for (const auto& [key, bytes] : live.value_bytes) c.document_bytes += bytes;
    if (repair && !c.damaged() && !c.unreadable() && any_repairable(c.findings)) repair_shard(e, c);
    return c;
}

result<check_report> check_data_directory(env& e, const std::string& root, bool repair) {
    check_report report;
    report.root = root;
    report.repair = repair;
    report.layout = data_layout{root, 0, 0, 0};
    auto names = e.list(root);
    if (!names) return std::unexpected("cannot list " + root + ": " + std::strerror(names.error()));
    if (!e.exists(root + "/FORMAT")) return without_format(e, std::move(report), *names);
    auto layout = read_layout(e, root);
    if (!layout) {
        report.format_damage.push_back(layout.error());
        return report;
    }
    if (layout->shards == 0 || layout->shards > max_checked_shards) {
        report.format_damage.push_back(root + "/FORMAT names " + std::to_string(layout->shards) + " shards (1 to " +
                                       std::to_string(max_checked_shards) + " can be checked)");
        return report;
    }
    report.layout = *layout;
    const std::string current = std::string(layout_prefix) + std::to_string(layout->generation);
    for (const std::string& n : *names)
        if (n.starts_with(layout_prefix) && n != current)
            report.notes.push_back(root + "/" + n + " is a layout FORMAT does not name (left over from a resharding): "
                                   "the server removes it at start");
    for (unsigned i = 0; i < layout->shards; ++i) {
        const std::string directory = layout->shard_directory(i);
        if (e.exists(directory)) {
            report.shards.push_back(check_shard_directory(e, directory, i, repair));
            continue;
        }
        shard_check missing;
        missing.shard = i;
        missing.directory = directory;
        missing.findings.push_back(
            {finding_kind::missing_shard_directory, directory, 0, 0, "shard directory " + directory + " is missing"});
        report.shards.push_back(std::move(missing));
    }
    return report;
}

std::vector<std::string> report_lines(const check_report& report) {
    std::vector<std::string> lines;
    if (report.layout.shards != 0)
        lines.push_back("percore check: " + report.root + ": layout " + std::to_string(report.layout.generation) + ", " +
                        counted(report.layout.shards, "shard") + (report.repair ? ", --repair" : ""));
    for (const std::string& f : report.format_damage) lines.push_back("format: damaged: " + f);
    for (const std::string& n : report.notes) lines.push_back("note: " + n);
    for (const shard_check& c : report.shards) {
        lines.push_back(shard_name(c.shard) + counted(c.documents, "document") + " (" +
                        counted(c.document_bytes, "byte") + ") in " + counted(c.segments, "segment") + " (" +
                        counted(c.segment_bytes, "byte") + "), " + counted(c.records, "record") + "; " +
                        shard_status(c));
        for (const recovery_finding& f : c.findings)
            if (!f.repairable() || c.repaired.empty()) lines.push_back(finding_line(c, f, report.repair));
        for (const recovery_finding& f : c.repaired)
            lines.push_back(shard_name(c.shard) + "repaired: " + f.what +
                            (f.kind == finding_kind::torn_tail ? "; cut" : "; removed"));
    }
    lines.push_back(summary_line(report));
    return lines;
}

}  // namespace percore::store
