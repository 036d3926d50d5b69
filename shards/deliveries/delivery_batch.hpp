// delivery_batch: what one POST of a delivery carries (SPEC §9) — the JSON body of a batch of
// changes, bounded by the bytes of its values, and the Standard Webhooks headers that sign it
// (sealed first when the delivery seals).
//
//   {"app":"…","delivery":"…","changes":[{"key":"…","etag":"\"…\"","deleted":false,
//    "content_type":"…","value_base64":"…"},…],"cursor":"…"}
//
// A deleted key has "deleted":true and null content_type and value_base64. `cursor` is the feed
// cursor after the batch's last change: the delivery's durable cursor once a receiver took it.
//
// Contract
// - delivery_batch is a value built on one thread (the one that reads the feed); fill_batch() runs
//   inside a reader round (it reads snapshots, and values in segment files with pread).
// - A batch holds at most max_delivery_batch_value_bytes of values, except that a larger document
//   travels alone: fits() is true for any change while the batch is empty.
// - sign_batch(): webhook-id is the batch's id (the same on every retry), webhook-timestamp the unix
//   seconds of this try, webhook-signature "v1," + base64 HMAC-SHA256(key, id "." timestamp "."
//   body) with key = base64-decode of the secret after "whsec_". With seal the body is the sealed
//   form of the JSON under the delivery's seal key (crypto/seal.hpp, empty associated data:
//   docs/decisions.md) and Content-Type application/vnd.percore.sealed; the signature covers the
//   sealed bytes. Errors are values (the crypto module missing, a malformed secret).
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "shards/base/result.hpp"
#include "crypto/loader.hpp"
#include "shards/base/document_value.hpp"
#include "shards/feed/change_feed.hpp"
#include "shards/deliveries/delivery_record.hpp"

namespace percore::shards {

inline constexpr std::string_view batch_json_type = "application/json";
inline constexpr std::string_view batch_sealed_type = "application/vnd.percore.sealed";

// One change as a batch carries it. `value` and `content_type` are ignored when deleted.
struct batch_change {
    std::string_view key;  // without the app
    std::uint64_t version = 0;  // its ETag's (store::change::etag_version)
    bool deleted = false;
    std::string_view content_type;
    std::string_view value;
};

class delivery_batch {
public:
    // Builds into `body` (cleared; its capacity kept: a delivery reuses one buffer for its batches,
    // no fresh ~0.5 MiB allocation and its page faults per batch). `body` outlives the batch.
    delivery_batch(std::string& body, std::string_view app, std::string_view delivery);

    // Whether a change with `value_bytes` of value may join.
    bool fits(std::uint64_t value_bytes) const;
    // REQUIRES: fits(c.value.size()) (or c.deleted).
    void add(const batch_change& c);
    std::size_t changes() const { return changes_; }
    std::uint64_t value_bytes() const { return value_bytes_; }
    // Closes the body with the cursor after the last change. The batch is spent afterwards.
    void finish(std::string_view cursor);

private:
    std::string& body_;
    std::size_t changes_ = 0;
    std::uint64_t value_bytes_ = 0;
};

// Adds the changes after `pos` within `app_prefix` (app, NUL, the delivery's prefix) to `batch`
// while they fit (at most `limit`), moving `pos` past them; their values are read from the
// snapshot that listed them. Returns the number added, or an error when a value in a segment file
// could not be read (then `pos` stands after the changes added).
result<std::uint32_t> fill_batch(change_feed& feed, feed_cursor& pos,
                                                                   std::string_view app_prefix, std::uint32_t limit,
                                                                   delivery_batch& batch);

struct signed_batch {
    std::string content_type;  // batch_json_type or batch_sealed_type
    std::string sealed;        // the sealed body when the delivery seals (never empty then); else empty
    std::string id;            // webhook-id
    std::string timestamp;     // webhook-timestamp
    std::string signature;     // webhook-signature

    // The bytes to POST: the sealed form, or `plain` itself, the body it was signed from (not
    // copied: a batch is up to ~1 MiB of JSON, and the caller keeps it for the retries anyway).
    std::string_view body(std::string_view plain) const { return sealed.empty() ? plain : std::string_view(sealed); }
};

// "v1," + base64 HMAC-SHA256 of id "." timestamp "." body under the secret's key.
result<std::string> webhook_signature(const crypto::crypto_api& api,
                                                                        std::string_view signing_secret,
                                                                        std::string_view id, std::string_view timestamp,
                                                                        std::string_view body);

// The request of one try of a batch: its body sealed when d.seal, and the three headers.
result<signed_batch> sign_batch(const crypto::crypto_api& api,
                                                                  const delivery_record& d, std::string_view batch_id,
                                                                  std::int64_t unix_seconds, std::string_view body);

}  // namespace percore::shards
