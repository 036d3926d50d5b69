// Fuzz target: recovery (store/recovery, through shard_store::recover) over damaged segment files.
//
// Once per process, a data directory is written in a fault_env through the normal store path (a
// shard_store with its shard_log): four batches of puts, a replacement and a delete, over four
// small segments. Each input is a list of damage done to copies of those files:
//   op byte % 11:  0 overwrite  (segment, u16 offset, u8 length % 16 + 1, bytes)
//                  1 flip bits  (segment, u16 offset, u8 mask, 0 means 0x01)
//                  2 truncate   (segment, u16 size, modulo the file size + 1)
//                  3 append     (segment, u8 length, bytes)
//                  4 zero range (segment, u16 offset, u8 length)
//                  5 remove     (segment)
//                  6 replace    (segment; the rest of the input is its content)
//                  7 add a file (u8 id % 8: 0000000000000000.seg to ...07.seg; the rest is its content)
//                  8 reseal the record at an offset: its checksum made right (segment, u16 offset)
//                  9 reseal the segment header: its checksum made right (segment)
//                 10 insert a valid record (segment, u16 offset modulo size + 1, u8 kind % 3 + 1,
//                    u16 version (0xffff: the largest), u8 key length % 32, u8 value length, key,
//                    value; a put's content type is text/plain, a segment list's value its ids)
// where `segment` is a byte choosing among the segment files there are (in id order), and offsets
// are taken modulo the file's size. Ops 8 to 10 make damage that passes the checksums (a writer's
// bug, a file put together by hand), which the fuzzer could hardly find by itself. Then recovery
// runs. Checked:
// - it refuses with an error message, or it succeeds and every document it recovered is one that was
//   written (same key, content type, value and version), or one the input itself supplied as a
//   record that passes its checksum; nothing else is invented. Versions stay at or below the
//   recovered max_version and the next version is above them;
// - when the damage is only what a crash leaves (store/recovery.hpp, segment_reader.hpp): the
//   newest segment keeps a prefix of its bytes followed by anything in which no valid record starts
//   (cut short, zeros, garbage), every other segment intact, recovery must succeed with exactly the
//   documents of the records before the damage, and the newest segment is cut to that prefix (or
//   removed when its header went);
// - the repair holds: after a successful recovery, a write through a new log on the recovered store
//   succeeds with a version above every recovered one, and a second recovery succeeds with the same
//   documents plus that write and cuts nothing (or, when that version is at or past 2^63, refuses it
//   as damage, as recovery does);
// - `percore check`'s verdict is recovery's: the same scan in verify mode (store/recovery.hpp), run
//   first and changing nothing, finds damage exactly when recovery refuses, and the refusal_line()
//   of its first damage (or unreadable file) is recovery's error, word for word;
// - every document made is freed with the stores (no leak), and no crash, hang or sanitizer report.
// Any broken rule aborts (libFuzzer keeps the input).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "store/crc32c.hpp"
#include "store/document.hpp"
#include "store/document_stats.hpp"
#include "store/epoch.hpp"
#include "store/log_format.hpp"
#include "store/recovery.hpp"
#include "store/segment_reader.hpp"
#include "store/shard_log.hpp"
#include "store/shard_store.hpp"
#include "store/snapshot.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "tests/store/fault_env.hpp"

namespace percore::fuzz {

namespace {

using namespace percore::store;
using namespace std::literals;
using percore::store::testing::fault_env;

const std::string root = "/data";
const std::string dir = "/data/shard-000";

std::string seg_path(std::uint64_t id) { return dir + "/" + segment_file_name(id); }

struct doc_state {
    std::string content_type;
    std::string value;
    std::uint64_t version = 0;
    std::uint64_t copied_version = 0;  // a copy's ETag version (kind 5); 0: a put's (the version itself)
    bool operator==(const doc_state&) const = default;
};
using doc_map = std::map<std::string, doc_state>;

std::string describe(const doc_map& docs) {
    std::string out;
    for (const auto& [key, d] : docs)
        out += "  " + printable(key) + " = " + printable(d.value, 40) + " (" + d.content_type + ") v" +
               std::to_string(d.version) + "\n";
    return out.empty() ? std::string("  (none)\n") : out;
}

struct original_record {
    std::string path;
    std::uint64_t offset = 0;
    std::uint64_t end = 0;
    record_kind kind = record_kind::put;
    std::string key;
    doc_state doc;
};

struct pristine_dir {
    std::map<std::string, std::string> files;  // segment path -> bytes, in id order
    std::vector<original_record> records;      // every record, in log order
    std::string newest;                        // path of the newest segment
};

document* new_doc(std::string_view key, std::string_view content_type, std::string_view value) {
    std::unique_ptr<char[]> buffer;
    if (!value.empty()) {
        buffer = std::make_unique_for_overwrite<char[]>(value.size());
        std::memcpy(buffer.get(), value.data(), value.size());
    }
    return make_document(key, content_type, std::move(buffer), value.size());
}

void require(bool ok, const std::string& what) {
    if (!ok) fuzz_fail("building the data directory: " + what);
}

// Submits the ops as one batch and waits until the log made it durable.
std::vector<write_result> write_batch(shard_store& s, std::vector<write_op> ops) {
    const std::size_t n = ops.size();
    for (auto& op : ops) s.submit(std::move(op));
    std::vector<write_result> done;
    const auto start = std::chrono::steady_clock::now();
    while (done.size() < n) {
        if (s.in_flight() && !s.ready()) {
            std::this_thread::yield();
            require(std::chrono::steady_clock::now() - start < std::chrono::seconds(30), "the log never answered");
            continue;
        }
        s.advance_batches(done);
    }
    s.reclaim();
    return done;
}

write_op put(std::string_view key, std::string_view content_type, std::string_view value) {
    write_op op;
    op.kind = write_kind::put;
    op.doc = new_doc(key, content_type, value);
    return op;
}

write_op erase(std::string_view key) {
    write_op op;
    op.kind = write_kind::erase;
    op.key = std::string(key);
    return op;
}

std::vector<original_record> read_records(env& e, const std::string& path) {
    auto reader = segment_reader::open(e, path);
    require(reader.has_value(), "cannot open " + path);
    std::vector<original_record> out;
    record_view r;
    std::uint64_t offset = 0;
    while (reader->next(r, offset))
        out.push_back({path, offset, reader->valid_bytes(), r.kind, std::string(r.key),
                       {std::string(r.content_type), std::string(r.value), r.version}});
    require(reader->end() == segment_reader::end_state::clean, path + " does not end cleanly");
    return out;
}

const pristine_dir& pristine() {
    static const pristine_dir p = [] {
        pristine_dir out;
        fault_env fe(1);
        require(fe.create_directory(root).has_value() && fe.create_directory(dir).has_value() &&
                    fe.sync_directory(root).has_value(),
                "directories");
        {
            reader_epochs epochs(1);
            shard_store store(epochs, 1);
            auto r = store.recover(fe, dir);
            require(r.has_value(), "recovery of the empty directory");
            log_options o;
            o.directory = dir;
            o.segment_target_bytes = 200;  // about one batch per segment
            store.attach_log(std::make_unique<shard_log>(fe, o, r->next_segment_id, r->segment_ids, std::function<void()>{}));

            std::vector<std::vector<write_op>> batches(4);
            batches[0].push_back(put("app\0a"sv, "text/plain", "value a"));
            batches[0].push_back(put("app\0b"sv, "application/json", "{\"b\":1}"));
            batches[1].push_back(put("app\0c"sv, "application/octet-stream", std::string(100, 'c')));
            batches[1].push_back(erase("app\0a"sv));
            batches[2].push_back(put("app\0b"sv, "application/json", "{\"b\":2}"));
            batches[2].push_back(put("app\0d"sv, "text/plain", ""));
            batches[3].push_back(put("app\0e/\xc3\xa9"sv, "x/custom-type", "\0\xff zero and ff"sv));
            batches[3].push_back(put("app\0a"sv, "text/plain", "value a again"));
            for (auto& b : batches) {
                const std::size_t n = b.size();
                auto results = write_batch(store, std::move(b));
                require(results.size() == n, "a batch was not answered whole");
                for (const auto& w : results)
                    require(w.outcome == write_outcome::created || w.outcome == write_outcome::replaced ||
                                w.outcome == write_outcome::deleted,
                            "a write failed");
            }
        }
        for (const std::string& path : fe.files())
            if (path.starts_with(dir + "/") && path.ends_with(".seg")) out.files[path] = *fe.contents(path);
        require(out.files.size() >= 3, "expected several segments, got " + std::to_string(out.files.size()));
        for (const auto& [path, bytes] : out.files) {
            auto records = read_records(fe, path);
            out.records.insert(out.records.end(), records.begin(), records.end());
        }
        out.newest = out.files.rbegin()->first;
        return out;
    }();
    return p;
}

// The state the records replay to, in log order (put sets, tombstone erases).
doc_map replay(const std::vector<const original_record*>& records) {
    doc_map out;
    for (const original_record* r : records) {
        if (r->kind == record_kind::put) out[r->key] = r->doc;
        else if (r->kind == record_kind::tombstone) out.erase(r->key);
    }
    return out;
}

bool written(const std::string& key, const doc_state& d) {
    for (const original_record& r : pristine().records)
        if (r.kind == record_kind::put && r.key == key && r.doc == d) return true;
    return false;
}

// Whether one of the files holds, at any offset, a put or copy record of exactly this document.
bool supplied(const std::map<std::string, std::string>& files, const std::string& key, const doc_state& d) {
    for (const auto& [path, bytes] : files) {
        for (std::size_t at = 0; at + record_header_bytes <= bytes.size(); ++at) {
            record_view rec;
            std::size_t size = 0;
            if (decode_record(std::string_view(bytes).substr(at), rec, size) == decode_status::ok &&
                (rec.kind == record_kind::put || rec.kind == record_kind::copy) && rec.key == key &&
                rec.content_type == d.content_type && rec.value == d.value && rec.version == d.version &&
                rec.copied_version == d.copied_version)
                return true;
        }
    }
    return false;
}

bool any_record_from(std::string_view bytes, std::size_t from) {
    for (std::size_t at = from; at + record_header_bytes <= bytes.size(); ++at) {
        record_view rec;
        std::size_t size = 0;
        if (decode_record(bytes.substr(at), rec, size) == decode_status::ok) return true;
    }
    return false;
}

doc_map documents_of(const shard_store& s) {
    doc_map out;
    const snapshot* snap = s.current();
    snapshot::cursor c;
    c.seek(*snap, std::string_view(), false);
    for (; c.valid(); c.next()) {
        const document& d = c.doc();
        doc_state state{std::string(d.content_type()), std::string(), d.version(),
                        d.etag_version() == d.version() ? 0 : d.etag_version()};
        if (d.in_file()) {
            const segment_file* f = snap->segment(d.segment());
            FUZZ_CHECK(f != nullptr, "a value in segment " + std::to_string(d.segment()) + ", which is not open");
            state.value.resize(d.value_size());
            auto n = f->file().read_at(d.file_offset(), std::span<char>(state.value.data(), state.value.size()));
            FUZZ_CHECK(n.has_value() && *n == state.value.size(), "cannot read a value from its segment");
        } else {
            state.value = std::string(d.value());
        }
        FUZZ_CHECK(out.emplace(std::string(d.key()), std::move(state)).second, "a key twice in one snapshot");
    }
    FUZZ_CHECK(out.size() == snap->document_count(), "document_count() is " + std::to_string(snap->document_count()) +
                                                         ", the snapshot holds " + std::to_string(out.size()));
    return out;
}

class input_reader {
public:
    input_reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
    bool empty() const { return at_ == size_; }
    std::uint8_t u8() { return at_ < size_ ? data_[at_++] : 0; }
    std::uint16_t u16() {
        const std::uint16_t lo = u8();
        return static_cast<std::uint16_t>(lo | (u8() << 8));
    }
    std::string bytes(std::size_t n) {
        n = std::min(n, size_ - at_);
        std::string out(reinterpret_cast<const char*>(data_ + at_), n);
        at_ += n;
        return out;
    }
    std::string rest() { return bytes(size_ - at_); }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t at_ = 0;
};

void put_u32(std::string& bytes, std::size_t at, std::uint32_t v) {
    for (std::size_t i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Applies the damage the input describes to `files`.
void damage(input_reader& in, std::map<std::string, std::string>& files) {
    while (!in.empty()) {
        const std::uint8_t op = in.u8() % 11;
        if (op == 7) {
            const std::uint64_t id = in.u8() % 8;  // before rest(): `a = b` evaluates b first
            files[seg_path(id)] = in.rest();
            return;
        }
        if (files.empty()) return;
        auto it = files.begin();
        std::advance(it, in.u8() % files.size());
        std::string& bytes = it->second;
        switch (op) {
        case 0: {  // overwrite
            const std::size_t offset = in.u16();
            const std::string with = in.bytes(in.u8() % 16 + 1);
            if (bytes.empty()) break;
            const std::size_t at = offset % bytes.size();
            bytes.replace(at, std::min(with.size(), bytes.size() - at), with.substr(0, bytes.size() - at));
            break;
        }
        case 1: {  // flip bits
            const std::size_t offset = in.u16();
            std::uint8_t mask = in.u8();
            if (mask == 0) mask = 1;
            if (!bytes.empty()) bytes[offset % bytes.size()] = static_cast<char>(bytes[offset % bytes.size()] ^ mask);
            break;
        }
        case 2:  // truncate
            bytes.resize(in.u16() % (bytes.size() + 1));
            break;
        case 3:  // append
            bytes += in.bytes(in.u8());
            break;
        case 4: {  // zero a range
            const std::size_t offset = in.u16();
            const std::size_t length = in.u8();
            if (bytes.empty()) break;
            const std::size_t at = offset % bytes.size();
            std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), std::min(length, bytes.size() - at), '\0');
            break;
        }
        case 5:  // remove
            files.erase(it);
            break;
        case 6:  // replace
            bytes = in.rest();
            return;
        case 7:
            break;
        case 8: {  // reseal a record
            const std::size_t offset = in.u16();
            if (bytes.empty()) break;
            const std::size_t at = offset % bytes.size();
            if (at + record_header_bytes > bytes.size()) break;
            std::uint64_t body = 0;
            for (std::size_t i = 0; i < 4; ++i) body |= std::uint64_t(static_cast<unsigned char>(bytes[at + 4 + i])) << (8 * i);
            if (body > bytes.size() - at - 8) break;
            put_u32(bytes, at, crc32c(bytes.data() + at + 4, static_cast<std::size_t>(body) + 4));
            break;
        }
        case 9:  // reseal the header
            if (bytes.size() >= segment_header_bytes) put_u32(bytes, 28, crc32c(bytes.data(), 28));
            break;
        case 10: {  // insert a valid record
            const std::size_t at = in.u16() % (bytes.size() + 1);
            const auto kind = static_cast<record_kind>(in.u8() % 5 + 1);  // put .. copy (log_format.hpp)
            const std::uint16_t v = in.u16();
            const std::uint64_t version = v == 0xffff ? UINT64_MAX : v;
            const std::size_t key_bytes = in.u8() % 32;
            const std::size_t value_bytes = in.u8();
            std::string key = in.bytes(key_bytes);
            std::string value = in.bytes(value_bytes);
            std::string content_type = "text/plain";
            if (kind == record_kind::segment_list) {
                // the encoder refuses a list that is not whole ids (an always-on assert): a damaged
                // list's length is the job of the byte-level mutations above
                key.clear(), content_type.clear();
                value.resize(value.size() - value.size() % segment_list_entry_bytes);
            }
            if (kind != record_kind::segment_list && key.empty()) key = "k";
            if (kind == record_kind::tombstone) value.clear(), content_type.clear();
            std::string record;
            if (kind == record_kind::commit_mark) {
                // a mark naming this file's segment (from its header, when there is one) and the
                // place it goes: the kind recovery believes
                std::uint64_t segment = 0;
                for (std::size_t i = 0; i < 8 && bytes.size() >= segment_header_bytes; ++i)
                    segment |= std::uint64_t(static_cast<unsigned char>(bytes[16 + i])) << (8 * i);
                encode_commit_mark(record, segment, at);
            } else if (kind == record_kind::copy) {
                // another board's ETag version, never the local one (that is a plain put) nor 0
                const std::uint64_t copied = version == UINT64_MAX ? 1 : version + 1;
                encode_document_record(record, version, copied, key, content_type, value);
            } else {
                encode_record(record, kind, version, key, content_type, value);
            }
            bytes.insert(at, record);
            break;
        }
        }
    }
}

// When the damage is what a crash leaves (only the newest segment changed, its header intact or
// no longer valid, and from the first changed byte's record on no valid record starts), the documents recovery must find and the length
// the newest segment must be cut to (nullopt: removed, its header is gone).
struct crash_expectation {
    doc_map documents;
    std::optional<std::size_t> newest_size;
};

std::optional<crash_expectation> expect_crash_like(const std::map<std::string, std::string>& files) {
    const pristine_dir& p = pristine();
    if (files.size() != p.files.size()) return std::nullopt;
    for (const auto& [path, bytes] : p.files) {
        auto it = files.find(path);
        if (it == files.end()) return std::nullopt;
        if (path != p.newest && it->second != bytes) return std::nullopt;
    }
    const std::string& now = files.at(p.newest);
    const std::string& was = p.files.at(p.newest);
    std::size_t same = 0;
    while (same < now.size() && same < was.size() && now[same] == was[same]) ++same;
    // Where the valid prefix ends: the start of the record holding the first changed byte.
    std::size_t valid = same >= was.size() ? was.size() : same >= segment_header_bytes ? segment_header_bytes : 0;
    std::vector<const original_record*> kept;
    for (const original_record& r : p.records) {
        if (r.path != p.newest || r.end <= same) {
            kept.push_back(&r);
            if (r.path == p.newest) valid = std::max<std::size_t>(valid, r.end);
        }
    }
    if (same < segment_header_bytes) {
        // A crash leaves a header that is not valid; a valid other one (another segment's, another
        // shard's) is not a crash's doing.
        segment_header header;
        if (now.size() >= segment_header_bytes && decode_segment_header(now, header)) return std::nullopt;
        valid = 0;
    }
    if (any_record_from(now, valid)) return std::nullopt;  // a valid record after the damage: not a crash
    crash_expectation e;
    e.documents = replay(kept);
    if (valid >= segment_header_bytes) e.newest_size = valid;
    return e;
}

// What `percore check` would say of the files (verify mode, nothing changed): the refusal line of
// its first damage or unreadable file, or nothing when recovery may start.
std::optional<std::string> check_verdict(fault_env& fe, const std::string& what) {
    auto verified = recover_segments(fe, dir, [](const record_view&, std::uint64_t, std::uint64_t) {}, {},
                                     recovery_mode::verify);
    FUZZ_CHECK(verified.has_value(), what + "the verify scan could not list the directory");
    for (const recovery_finding& f : verified->findings)
        if (!f.repairable()) return refusal_line(f);
    return std::nullopt;
}

// Recovery on the damaged files, then a write and a second recovery when it succeeded.
void check_recovery(fault_env& fe, const std::map<std::string, std::string>& files,
                    const std::optional<crash_expectation>& crash, std::string what) {
    const pristine_dir& p = pristine();
    doc_map recovered;
    const std::optional<std::string> verdict = check_verdict(fe, what);
    {
        reader_epochs epochs(1);
        shard_store store(epochs, 1);
        auto r = store.recover(fe, dir);
        FUZZ_CHECK(verdict.has_value() == !r.has_value(),
                   what + "check and recovery disagree: check " + (verdict ? "refuses: " + *verdict : std::string("passes")) +
                       ", recovery " + (r ? std::string("starts") : "refuses: " + r.error()));
        if (!r) FUZZ_CHECK(*verdict == r.error(), what + "check's line: " + *verdict + "\nrecovery's: " + r.error());
        if (!r) {
            FUZZ_CHECK(!r.error().empty(), what + "recovery failed without a message");
            FUZZ_CHECK(!crash.has_value(), what + "recovery refused what a crash leaves: " + r.error() +
                                               "\nexpected:\n" + describe(crash->documents));
            return;
        }
        recovered = documents_of(store);
        what += "recovered (" + r->notes + "):\n" + describe(recovered);
        for (const auto& [key, d] : recovered) {
            FUZZ_CHECK(written(key, d) || supplied(files, key, d),
                       what + "invented: " + printable(key) + " = " + printable(d.value) + " v" + std::to_string(d.version));
            FUZZ_CHECK(d.version <= r->max_version, what + "a version above max_version " + std::to_string(r->max_version));
            FUZZ_CHECK(d.version < store.next_version(), what + "next_version " + std::to_string(store.next_version()) +
                                                             " is not above a recovered version");
        }
        if (crash) {
            FUZZ_CHECK(recovered == crash->documents, what + "expected:\n" + describe(crash->documents));
            if (crash->newest_size) {
                auto now = fe.contents(p.newest);
                FUZZ_CHECK(now && now->size() == *crash->newest_size && *now == p.files.at(p.newest).substr(0, now->size()),
                           what + "the newest segment is not cut to its " + std::to_string(*crash->newest_size) +
                               " valid bytes");
            } else {
                FUZZ_CHECK(!fe.exists(p.newest), what + "the newest segment lost its header but was not removed");
            }
        }

        // The recovered store takes a write, through a new log as the server would start it.
        log_options o;
        o.directory = dir;
        o.segment_target_bytes = 200;
        store.attach_log(std::make_unique<shard_log>(fe, o, r->next_segment_id, r->segment_ids, std::function<void()>{}));
        std::vector<write_op> ops;
        ops.push_back(put("app\0after"sv, "text/plain", "written after recovery"));
        auto results = write_batch(store, std::move(ops));
        FUZZ_CHECK(results.size() == 1, what + "the write after recovery was not answered");
        FUZZ_CHECK(results[0].outcome == write_outcome::created || results[0].outcome == write_outcome::replaced,
                   what + "the write after recovery failed: outcome " + std::to_string(static_cast<int>(results[0].outcome)));
        FUZZ_CHECK(results[0].version > r->max_version, what + "the write after recovery got version " +
                                                            std::to_string(results[0].version) + ", max_version " +
                                                            std::to_string(r->max_version));
        recovered["app\0after"s] = doc_state{"text/plain", "written after recovery", results[0].version};
    }

    // The repair holds: a second recovery finds the same documents plus the write, and cuts nothing.
    // (Unless the write took a version at or past 2^63, which recovery refuses as damage: only a
    // file damaged so that it passes its checksums gets there, 2^63 - 2^51 writes before a real one.)
    reader_epochs epochs(1);
    shard_store store(epochs, 1);
    auto r = store.recover(fe, dir);
    if (recovered.at("app\0after"s).version >= std::uint64_t{1} << 63) {
        FUZZ_CHECK(!r && r.error().find("beyond any version") != std::string::npos,
                   what + "a version at or past 2^63 was not refused");
        return;
    }
    FUZZ_CHECK(r.has_value(), what + "the second recovery failed: " + (r ? std::string() : r.error()));
    FUZZ_CHECK(r->truncated_bytes == 0, what + "the second recovery cut " + std::to_string(r->truncated_bytes) + " bytes");
    const doc_map again = documents_of(store);
    FUZZ_CHECK(again == recovered, what + "the second recovery found:\n" + describe(again));
}

}  // namespace

int recovery_one_input(const std::uint8_t* data, std::size_t size) {
    const pristine_dir& p = pristine();
    std::map<std::string, std::string> files = p.files;
    input_reader in(data, size);
    damage(in, files);
    const std::optional<crash_expectation> crash = expect_crash_like(files);

    std::string what = "damaged files:";
    for (const auto& [path, bytes] : files) {
        what += " " + path.substr(dir.size() + 1) + " (" + std::to_string(bytes.size()) + " bytes";
        auto was = p.files.find(path);
        if (was == p.files.end()) what += ", new)";
        else if (was->second == bytes) what += ", intact)";
        else what += ", was " + std::to_string(was->second.size()) + ")";
    }
    what += crash ? " - what a crash leaves\n" : "\n";

    const std::int64_t live_before = live_documents();
    {
        fault_env fe(2);
        FUZZ_CHECK(fe.create_directory(root).has_value() && fe.create_directory(dir).has_value(), "directories");
        for (const auto& [path, bytes] : files) fe.write_file(path, bytes);
        check_recovery(fe, files, crash, what);
    }
    FUZZ_CHECK(live_documents() == live_before,
               what + std::to_string(live_documents() - live_before) + " documents were not freed with the stores");
    return 0;
}

}  // namespace percore::fuzz

#ifdef PERCORE_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return percore::fuzz::recovery_one_input(data, size);
}
#endif
