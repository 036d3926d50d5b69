#include "shards/follower/diverged_capture.hpp"

#include <charconv>

#include "shards/apps/catalog.hpp"
#include "shards/base/document_value.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/runtime/check.hpp"
#include "store/tar_format.hpp"

namespace percore::shards {

const std::string led_epoch_key = std::string(follower_records) + "led-epoch";

std::string encode_led_epoch(std::uint64_t epoch) {
    PERCORE_REQUIRES(epoch != 0);
    return std::to_string(epoch);
}

std::optional<std::uint64_t> decode_led_epoch(std::string_view value) {
    std::uint64_t epoch = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), epoch);
    if (ec != std::errc() || end != value.data() + value.size() || epoch == 0) return std::nullopt;
    return epoch;
}

std::uint64_t recorded_led_epoch(store_client& stores) {
    PERCORE_REQUIRES(on_shard_thread(stores.self()));
    const store::snapshot* snap = stores.current(stores.owner_of(led_epoch_key));
    const store::document* doc = snap ? snap->find(led_epoch_key) : nullptr;
    if (!doc) return 0;
    std::string scratch;
    auto value = document_value(*snap, *doc, scratch);
    auto epoch = value ? decode_led_epoch(*value) : std::nullopt;
    return epoch.value_or(0);
}

keep_decision decide(const store::document& local, bool deleted, std::string_view content_type,
                     std::uint64_t etag_version) {
    PERCORE_REQUIRES(deleted || etag_version != 0);
    if (deleted) return keep_decision::keep;
    if (local.etag_version() != etag_version || local.content_type() != content_type) return keep_decision::keep;
    return keep_decision::compare_values;
}

result<void> diverged_capture::keep(const store::snapshot& snap, const store::document& doc) {
    PERCORE_REQUIRES(!archive_.holds(doc.key()));
    std::string scratch;
    auto value = document_value(snap, doc, scratch);
    if (!value) return std::unexpected("cannot read " + store::printable_name(doc.key()) + " to keep it: " + value.error().reason);
    if (auto r = archive_.add(doc.key(), doc.content_type(), *value, doc.etag_version()); !r)
        return std::unexpected(r.error());
    return {};
}

result<void> diverged_capture::before_change(store_client& stores, const std::string& store_key, bool deleted,
                                             std::string_view content_type, std::string_view value,
                                             std::uint64_t etag_version) {
    PERCORE_REQUIRES(!store_key.starts_with(follower_records));
    if (archive_.holds(store_key)) return {};
    const store::snapshot* snap = stores.current(stores.owner_of(store_key));
    const store::document* local = snap ? snap->find(store_key) : nullptr;
    if (!local) return {};
    switch (decide(*local, deleted, content_type, etag_version)) {
    case keep_decision::same: return {};
    case keep_decision::keep: return keep(*snap, *local);
    case keep_decision::compare_values: break;
    }
    std::string scratch;
    auto held = document_value(*snap, *local, scratch);
    if (!held) return std::unexpected("cannot read " + store::printable_name(store_key) + " to compare it: " + held.error().reason);
    return *held == value ? result<void>{} : keep(*snap, *local);
}

result<void> diverged_capture::before_erase(store_client& stores, const std::string& store_key) {
    PERCORE_REQUIRES(!store_key.starts_with(follower_records));
    if (archive_.holds(store_key)) return {};
    const store::snapshot* snap = stores.current(stores.owner_of(store_key));
    const store::document* local = snap ? snap->find(store_key) : nullptr;
    return local ? keep(*snap, *local) : result<void>{};
}

result<void> diverged_capture::sync() {
    PERCORE_ASSERT(archive_.epoch() != 0);
    if (auto r = archive_.sync(); !r) return std::unexpected(r.error());
    return {};
}

result<std::string> diverged_capture::finish() {
    PERCORE_ASSERT(archive_.epoch() != 0);
    auto tar = archive_.finish();
    if (!tar) return std::unexpected(tar.error());
    return *tar;
}

}  // namespace percore::shards
