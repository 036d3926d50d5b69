#include "shards/apps/app_erasures.hpp"

#include "shards/apps/catalog.hpp"
#include "shards/base/write_ticket.hpp"
#include "shards/runtime/check.hpp"
#include "store/document.hpp"

namespace percore::shards {

app_erasures::app_erasures(store_client& stores, const server_view& server)
    : stores_(stores), server_(server), cursors_(stores.shard_count()) {
    set_busy(false);  // busy while an app is being erased
}

void app_erasures::begin(app_entry* app) {
    PERCORE_REQUIRES(app != nullptr && app->state() == app_state::deleting);
    erasing_.emplace_back(app);
    set_busy(true);
}

bool app_erasures::has_work(time_point) const { return !stopped_ && !erasing_.empty() && server_.serving(); }

void app_erasures::begin_stop() { stopped_ = true; }

void app_erasures::write_done(const store::write_result& result) {
    PERCORE_REQUIRES(write_ticket::decode(result.tag).from() == issuer::app_erasure);
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    for (std::size_t i = 0; i < erase_tags_.size(); ++i) {
        if (erase_tags_[i].first != result.tag) continue;
        app_entry* app = erase_tags_[i].second;
        erase_tags_.erase(erase_tags_.begin() + static_cast<std::ptrdiff_t>(i));
        for (erasure& e : erasing_) {
            if (e.app != app) continue;
            PERCORE_ASSERT(e.in_flight > 0);
            --e.in_flight;
            if (result.outcome == store::write_outcome::precondition_failed) e.rescan = true;
        }
        return;
    }
    PERCORE_ASSERT(!"an erasure's result with no erase in flight");
}

std::size_t app_erasures::step(time_point) {
    if (stopped_ || erasing_.empty() || !server_.serving()) return 0;
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    std::size_t before = erase_tags_.size();
    for (std::size_t i = 0; i < erasing_.size();) {
        if (erase_step(erasing_[i])) {
            erasing_[i].app->reset_usage();
            erasing_[i].app->set_state(app_state::absent);
            erasing_.erase(erasing_.begin() + static_cast<std::ptrdiff_t>(i));
            set_busy(!erasing_.empty());
        } else {
            ++i;
        }
    }
    return erase_tags_.size() > before ? erase_tags_.size() - before : 0;
}

// Moves one erasure along; true once it is complete.
bool app_erasures::erase_step(erasure& e) {
    std::string prefix;
    switch (e.phase) {
    case erase_tokens: prefix.assign(token_records); break;
    case erase_deliveries: prefix = delivery_records_of(e.app->name()); break;
    case erase_documents: prefix.assign(e.app->name()).push_back('\0'); break;
    case erase_app_record: prefix = catalog_key(app_records, e.app->name()); break;
    case erase_deleted_record: prefix = catalog_key(deleted_records, e.app->name()); break;
    default: return true;
    }
    std::string key;
    std::uint64_t version = 0;
    bool scanned_to_end = false;
    while (e.in_flight < max_erase_writes_in_flight) {
        if (!next_key(prefix, e, key, version, e.phase == erase_tokens)) {
            scanned_to_end = true;
            break;
        }
        if (e.phase >= erase_app_record && key != prefix) continue;  // the exact record only
        send_erase(e, key, version);
        e.sent_in_pass = true;
    }
    if (!scanned_to_end || e.in_flight > 0) return false;
    e.after_set = false;
    e.after.clear();
    // A pass that sent erases, or lost a precondition, is followed by another, which also catches
    // writes admitted before the delete and applied after the scan passed their keys. A pass that
    // finds nothing ends the phase.
    if (e.sent_in_pass || e.rescan) {
        e.sent_in_pass = false;
        e.rescan = false;
        return false;
    }
    ++e.phase;
    return e.phase > erase_deleted_record;
}

// The next key with `prefix` after the scan's position, over every shard's snapshot; for the token
// phase only the records of this app.
bool app_erasures::next_key(std::string_view prefix, erasure& e, std::string& key, std::uint64_t& version,
                          bool tokens_of_app) {
    for (;;) {
        int best = -1;
        std::string_view seek = e.after_set ? std::string_view(e.after) : prefix;
        for (unsigned i = 0; i < stores_.shard_count(); ++i) {
            const store::snapshot* snap = stores_.current(i);
            cursors_[i] = store::snapshot::cursor();
            if (!snap) continue;
            cursors_[i].seek(*snap, seek, e.after_set);
            if (!cursors_[i].valid() || !cursors_[i].doc().key().starts_with(prefix)) continue;
            if (best < 0 || cursors_[i].doc().key() < cursors_[static_cast<unsigned>(best)].doc().key())
                best = static_cast<int>(i);
        }
        if (best < 0) return false;
        const store::document& doc = cursors_[static_cast<unsigned>(best)].doc();
        e.after.assign(doc.key());
        e.after_set = true;
        if (tokens_of_app) {
            if (doc.in_file()) continue;
            auto t = decode_token_record(doc.value());
            if (!t || t->app != e.app->name()) continue;
        }
        key.assign(doc.key());
        version = doc.etag_version();  // what its If-Match names
        return true;
    }
}

void app_erasures::send_erase(erasure& e, const std::string& key, std::uint64_t version) {
    store::write_op w;
    w.kind = store::write_kind::erase;
    w.key = key;
    w.pre.has_if_match = true;
    w.pre.if_match.push_back(version);
    if (e.phase == erase_documents) {
        w.gate = e.app;  // the app's usage goes down with its documents
        w.turn_class = e.app->index();
    }
    w.tag = write_ticket::background(stores_.self(), issuer::app_erasure, ++erase_sequence_).encode();
    erase_tags_.emplace_back(w.tag, e.app);
    ++e.in_flight;
    stores_.submit(stores_.owner_of(key), std::move(w));
}

}  // namespace percore::shards
