// diverged_capture: the follower's side of SPEC §12 "A returning primary" — what a board that led an
// epoch keeps of its own documents while it copies a newer epoch's primary in full, so that no
// write it acknowledged is dropped without a trace (store/diverged_archive.hpp writes the tar).
//
// The led-epoch record: `_percore\0follower/led-epoch`, a local record (never replicated: the
// replication page passes follower_records over, catalog.hpp), value the epoch as decimal text
// ("1234"), content type text/plain. follower_slot writes it, durably, before the coordinator makes
// the board primary of that epoch; the follower erases it once a capturing resync has finished.
//
// Decisions (keep_decision): a local document is kept before the copy changes it when
// - a copied put would overwrite it and its ETag version or content type differ, or (same
//   version and type) its value differs: versions are per store, so two boards can give the same
//   version to different writes of one key — the bytes decide then;
// - a copied delete would remove it (it is live here);
// - the resync's last step would erase it (the primary did not show it).
// A key is kept once, the first time (later states of it are the new primary's copies), and only
// if the primary has not already shown it in this resync.
//
// Contract: shard 0's thread (the follower's); reads any shard's published snapshot within the
// round (store_client.hpp), and values that live in segment files through document_value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "shards/base/result.hpp"
#include "shards/base/store_client.hpp"
#include "store/diverged_archive.hpp"
#include "store/document.hpp"

namespace percore::shards {

extern const std::string led_epoch_key;  // follower_records + "led-epoch"

// The record's value for `epoch`, and the epoch a value names (nullopt: not a led-epoch value).
std::string encode_led_epoch(std::uint64_t epoch);
std::optional<std::uint64_t> decode_led_epoch(std::string_view value);

// The epoch recorded as led, 0 when none (or unreadable).
std::uint64_t recorded_led_epoch(store_client& stores);

enum class keep_decision : std::uint8_t {
    keep,            // differs: kept before the change
    same,            // the copy is what the board held
    compare_values,  // same version and type: the values decide
};
// What to do with `local` before a copied change (deleted, or a put of content type / ETag version).
keep_decision decide(const store::document& local, bool deleted, std::string_view content_type,
                     std::uint64_t etag_version);

class diverged_capture {
public:
    explicit diverged_capture(store::diverged_archive archive) : archive_(std::move(archive)) {}

    std::uint64_t epoch() const { return archive_.epoch(); }
    std::uint64_t documents() const { return archive_.documents(); }

    // Before a copied change of `store_key` (a put of content_type/value/etag_version, or a delete):
    // keeps the local document if it must (above).
    [[nodiscard]] result<void> before_change(store_client& stores, const std::string& store_key, bool deleted,
                                             std::string_view content_type, std::string_view value,
                                             std::uint64_t etag_version);
    // Before the resync's last step erases `store_key` (the primary did not show it).
    [[nodiscard]] result<void> before_erase(store_client& stores, const std::string& store_key);
    [[nodiscard]] result<void> sync();
    // The tar's path, empty when nothing was kept.
    [[nodiscard]] result<std::string> finish();

private:
    [[nodiscard]] result<void> keep(const store::snapshot& snap, const store::document& doc);

    store::diverged_archive archive_;
};

}  // namespace percore::shards
