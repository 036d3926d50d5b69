#include "shards/backup/backup_stream.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "shards/base/limits.hpp"
#include "shards/runtime/check.hpp"
#include "shards/base/log_line.hpp"
#include "store/env.hpp"

namespace percore::shards {

namespace {

constexpr std::string_view token_file_name = "admin.token";
// As the server makes them (SPEC §6: the directory 0700, every file 0600): a tar unpacked by
// another tool than `percore restore` (GNU tar keeps the modes) is private too.
constexpr std::uint32_t file_mode = 0600;
constexpr std::uint32_t token_mode = 0600;   // admin_token.cpp
constexpr std::uint32_t directory_mode = 0700;

std::string layout_name(std::uint64_t generation) { return "layout-" + std::to_string(generation); }

std::string shard_name(std::uint64_t generation, unsigned shard) {
    char name[16];
    std::snprintf(name, sizeof name, "/shard-%03u", shard);
    return layout_name(generation) + name;
}

// "percore-backup-20260130T014200Z.tar"
std::string file_name_at(std::time_t now) {
    std::tm utc{};
    ::gmtime_r(&now, &utc);
    char name[48];
    std::strftime(name, sizeof name, "percore-backup-%Y%m%dT%H%M%SZ.tar", &utc);
    return name;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

bool backup_streams::full() const { return backups_.size() >= max_backups_per_shard; }

void backup_streams::begin(net::answer_ticket ticket, bool head_only) {
    PERCORE_REQUIRES(can_back_up() && !full());
    PERCORE_REQUIRES(on_shard_thread(self_));
    auto b = std::make_unique<backup>();
    b->ticket = ticket;
    b->id = next_id_++;
    b->head_only = head_only;
    b->started = std::chrono::steady_clock::now();
    if (!head_only) {
        b->parts.resize(shards_);
        auto own = std::make_unique<backup_part>();
        own->shard = self_;
        own->files = captures_->capture_own();
        b->parts[self_] = std::move(own);
        b->arrived = 1;
        if (shards_ > 1) captures_->request_captures(backup_tag{self_, b->id}.encode());
    }
    backups_.push_back(std::move(b));
    set_busy(true);
}

void backup_streams::captured(std::uint64_t tag, std::unique_ptr<backup_part> part) {
    const backup_tag t = backup_tag::decode(tag);
    for (auto& b : backups_) {
        if (b->id != t.id || b->ended || b->head_only || part->shard >= shards_ || b->parts[part->shard]) continue;
        b->parts[part->shard] = std::move(part);
        ++b->arrived;
        return;
    }
    // the backup ended meanwhile: its part's files close here
}

bool backup_streams::can_write(const backup& b, std::chrono::steady_clock::time_point now) const {
    return now >= b.next_piece && sink_->stream_room(b.ticket) >= backup_chunk_bytes;
}

bool backup_streams::has_work(time_point now) const {
    if (backups_.empty()) return false;
    for (const auto& b : backups_) {
        if (b->ended) continue;
        if (!b->begun ? b->head_only || b->arrived == shards_ : can_write(*b, now)) return true;
    }
    return false;
}

shard_task::time_point backup_streams::wake_by() const {
    auto at = time_point::max();
    for (const auto& b : backups_)
        if (b->begun && !b->ended) at = std::min(at, b->next_piece);
    return at;
}

std::size_t backup_streams::step(time_point now) {
    if (backups_.empty()) return 0;
    PERCORE_REQUIRES(on_shard_thread(self_));
    std::size_t work = 0;
    stepping_ = true;
    for (std::size_t i = 0; i < backups_.size(); ++i) {
        backup& b = *backups_[i];
        if (b.ended) continue;
        if (!b.begun) {
            if (!b.head_only && b.arrived < shards_) continue;
            start(b);
            ++work;
        } else if (can_write(b, now)) {
            write_piece(b);
            ++work;
        }
    }
    stepping_ = false;
    drop_ended();
    return work;
}

// Every part is in: the archive's entries, then the head.
void backup_streams::start(backup& b) {
    if (!b.head_only) {
        if (std::string why = build_entries(b); !why.empty()) {
            log_line("backup refused: " + why);
            b.ended = true;
            sink_->complete(b.ticket, net::simple_answer{500, false, 0, "cannot capture the data directory"});
            return;
        }
    }
    const std::string disposition = "attachment; filename=\"" + file_name_at(std::time(nullptr)) + "\"";
    if (sink_->stream_begin(b.ticket, 200, "application/x-tar", "Content-Disposition", disposition) !=
        net::stream_status::sent) {
        b.ended = true;
        return;
    }
    b.begun = true;
    if (b.head_only) {
        b.ended = true;
        sink_->stream_end(b.ticket);
        return;
    }
    std::uint64_t files = 0, bytes = 0;
    for (const entry& e : b.entries) {
        files += e.file != nullptr;
        bytes += e.header.size;
    }
    log_line("backup started: " + std::to_string(shards_) + " shards, " + std::to_string(files) + " files, " +
             std::to_string(bytes) + " bytes");
}

// The entries of the archive (backup_stream.hpp); the reason when it cannot be made.
std::string backup_streams::build_entries(backup& b) {
    for (const auto& part : b.parts)
        if (!part->files) return "shard " + std::to_string(part->shard) + ": " + part->files.error();
    store::env& files = store::posix_env();
    auto format = store::capture_whole_file(files, source_.root, "FORMAT");
    if (!format) return format.error();
    b.root_files.push_back(std::move(*format));
    if (files.exists(source_.root + "/" + std::string(token_file_name))) {
        auto token = store::capture_whole_file(files, source_.root, std::string(token_file_name));
        if (!token) return token.error();
        b.root_files.push_back(std::move(*token));
    }
    const std::int64_t now = std::time(nullptr);
    auto add = [&](std::string name, store::tar_type type, std::uint32_t mode, store::captured_file* f) {
        b.entries.push_back(entry{store::tar_header{std::move(name), type, mode, f ? f->length : 0, now},
                                  f ? f->file.get() : nullptr});
    };
    for (store::captured_file& f : b.root_files)
        add(f.name, store::tar_type::file, f.name == token_file_name ? token_mode : file_mode, &f);
    add(layout_name(source_.generation), store::tar_type::directory, directory_mode, nullptr);
    for (auto& part : b.parts) {
        const std::string dir = shard_name(source_.generation, part->shard);
        add(dir, store::tar_type::directory, directory_mode, nullptr);
        for (store::captured_file& f : part->files->files) {
            if (f.length > store::max_tar_entry_bytes) return dir + "/" + f.name + " is too large for a tar entry";
            add(dir + "/" + f.name, store::tar_type::file, file_mode, &f);
        }
    }
    return {};
}

void backup_streams::write_piece(backup& b) {
    const auto began = std::chrono::steady_clock::now();
    if (std::string why = fill(b); !why.empty()) {
        fail(b, why);
        return;
    }
    if (!piece_.empty()) {
        if (sink_->stream_write(b.ticket, piece_) != net::stream_status::sent) {
            b.ended = true;  // closed() was told, and logged it
            return;
        }
        b.sent += piece_.size();
    }
    const auto done = std::chrono::steady_clock::now();
    b.next_piece = done + (done - began) * backup_pace_factor;
    if (!b.end_sent) return;
    b.ended = true;
    sink_->stream_end(b.ticket);
    log_line("backup sent " + std::to_string(b.sent) + " bytes in " + std::to_string(seconds_since(b.started)) + " s");
}

// The archive's next bytes into piece_: at most backup_chunk_bytes, at most one file read. Empty
// when it went well; else why not.
std::string backup_streams::fill(backup& b) {
    using store::tar_block_bytes;
    piece_.clear();
    bool read = false;
    for (;;) {
        const std::size_t space = backup_chunk_bytes - piece_.size();
        if (b.next == b.entries.size()) {
            if (space < store::tar_end_blocks * tar_block_bytes) break;
            piece_.append(store::tar_end_blocks * tar_block_bytes, '\0');
            b.end_sent = true;
            break;
        }
        entry& e = b.entries[b.next];
        if (!b.header_sent) {
            if (space < tar_block_bytes) break;
            char header[tar_block_bytes];
            store::encode_tar_header(e.header, header);
            piece_.append(header, sizeof header);
            b.header_sent = true;
        } else if (b.offset < e.header.size) {
            if (read || space == 0) break;
            const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(e.header.size - b.offset, space));
            const std::size_t at = piece_.size();
            piece_.resize(at + want);
            auto n = e.file->read_at(b.offset, std::span<char>(piece_.data() + at, want));
            if (!n) return "cannot read " + e.header.name + ": " + std::strerror(n.error());
            if (*n != want) return e.header.name + " is shorter than when it was captured";
            b.offset += want;
            read = true;
        } else {
            const std::size_t pad = store::tar_padding(e.header.size);
            if (space < pad) break;
            piece_.append(pad, '\0');
            ++b.next;
            b.header_sent = false;
            b.offset = 0;
        }
    }
    return {};
}

void backup_streams::fail(backup& b, const std::string& why) {
    log_line("backup failed after " + std::to_string(b.sent) + " bytes: " + why +
             "; the stream is cut off without its end");
    b.ended = true;
    sink_->stream_abort(b.ticket);
}

void backup_streams::closed(net::answer_ticket ticket) {
    for (auto& b : backups_) {
        if (b->ended || b->ticket.index != ticket.index || b->ticket.generation != ticket.generation) continue;
        if (b->begun)
            log_line("backup stopped after " + std::to_string(b->sent) + " bytes: the client's connection ended");
        b->ended = true;
    }
    if (!stepping_) drop_ended();
}

void backup_streams::begin_stop() {
    stepping_ = true;
    for (auto& b : backups_) {
        if (b->ended) continue;
        b->ended = true;
        if (!b->begun) {
            sink_->complete(b->ticket, net::simple_answer{503, false, 0, "the server is stopping"});
            continue;
        }
        log_line("backup stopped after " + std::to_string(b->sent) + " bytes: the server stops");
        sink_->stream_abort(b->ticket);
    }
    stepping_ = false;
    drop_ended();
}

void backup_streams::drop_ended() {
    std::erase_if(backups_, [](const std::unique_ptr<backup>& b) { return b->ended; });
    set_busy(!backups_.empty());
}

}  // namespace percore::shards
