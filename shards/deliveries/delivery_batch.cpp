#include "shards/deliveries/delivery_batch.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "crypto/digest.hpp"
#include "crypto/seal.hpp"
#include "net/response.hpp"
#include "shards/base/document_value.hpp"
#include "shards/base/json_text.hpp"
#include "shards/base/encoding.hpp"
#include "shards/base/limits.hpp"
#include "shards/runtime/check.hpp"
#include "store/document.hpp"
#include "store/segment_file.hpp"

namespace percore::shards {

delivery_batch::delivery_batch(std::string& body, std::string_view app, std::string_view delivery) : body_(body) {
    body_.clear();
    body_.assign("{\"app\":");
    append_json_string(body_, app);
    body_.append(",\"delivery\":");
    append_json_string(body_, delivery);
    body_.append(",\"changes\":[");
}

bool delivery_batch::fits(std::uint64_t value_bytes) const {
    return changes_ == 0 || value_bytes_ + value_bytes <= max_delivery_batch_value_bytes;
}

namespace {

char* put_text(char* o, std::string_view s) {
    std::memcpy(o, s.data(), s.size());
    return o + s.size();
}

constexpr std::string_view deleted_tail = ",\"deleted\":true,\"content_type\":null,\"value_base64\":null}";
constexpr std::string_view put_middle = ",\"deleted\":false,\"content_type\":";

}  // namespace

// One growth of the body to the most this change can take, then stores, then the body cut to what
// was written: a change costs ~300 instructions here rather than ~1,200 of appends (callgrind).
void delivery_batch::add(const batch_change& c) {
    PERCORE_REQUIRES(c.deleted || fits(c.value.size()));
    const std::size_t most = 96 + json_string_max_bytes(c.key.size()) + net::etag_text_bytes + deleted_tail.size() +
                             (c.deleted ? 0 : json_string_max_bytes(c.content_type.size()) + base64_bytes(c.value.size()));
    const std::size_t at = body_.size();
    body_.resize(at + most);
    char* o = body_.data() + at;
    if (changes_) *o++ = ',';
    o = put_text(o, "{\"key\":");
    o = put_json_string(o, c.key);
    o = put_text(o, ",\"etag\":\"\\\"");
    char etag[net::etag_text_bytes];
    net::format_etag(c.version, etag);
    o = put_text(o, std::string_view(etag + 1, net::etag_text_bytes - 2));
    o = put_text(o, "\\\"\"");
    if (c.deleted) {
        o = put_text(o, deleted_tail);
    } else {
        o = put_text(o, put_middle);
        o = put_json_string(o, c.content_type);
        o = put_text(o, ",\"value_base64\":\"");
        o = put_base64(o, bytes_of(c.value));
        o = put_text(o, "\"}");
        value_bytes_ += c.value.size();
    }
    PERCORE_ASSERT(o <= body_.data() + at + most);
    body_.resize(static_cast<std::size_t>(o - body_.data()));
    ++changes_;
}

void delivery_batch::finish(std::string_view cursor) {
    body_.append("],\"cursor\":");
    append_json_string(body_, cursor);
    body_.push_back('}');
}

result<std::uint32_t> fill_batch(change_feed& feed, feed_cursor& pos, std::string_view app_prefix,
                                                     std::uint32_t limit, delivery_batch& batch) {
    const std::size_t app_bytes = app_prefix.find('\0') + 1;
    PERCORE_REQUIRES(app_bytes > 0);
    std::string file_value;
    std::string error;
    const std::uint32_t n = feed.visit(pos, app_prefix, limit,
                                       [&](const store::change& c, const store::snapshot& snap, const feed_cursor&) {
        batch_change b{c.key.substr(app_bytes), c.etag_version, c.deleted, {}, {}};
        if (!c.deleted) {
            if (!batch.fits(c.size)) return false;
            const store::document* doc = c.doc;
            if (!doc) {  // a snapshot lists only what it holds
                error = "a listed change has no document";
                return false;
            }
            b.content_type = doc->content_type();
            auto value = document_value(snap, *doc, file_value);
            if (!value) {
                error = std::move(value.error().reason);
                return false;
            }
            b.value = *value;
        }
        batch.add(b);
        return true;
    });
    if (!error.empty()) return std::unexpected(std::move(error));
    return n;
}

result<std::string> webhook_signature(const crypto::crypto_api& api, std::string_view signing_secret,
                                                          std::string_view id, std::string_view timestamp,
                                                          std::string_view body) {
    auto key = signing_key_of(signing_secret);
    if (!key) return std::unexpected("the signing secret is not whsec_ and base64");
    const std::span<const char> parts[] = {id, std::string_view("."), timestamp, std::string_view("."), body};
    auto mac = crypto::hmac_sha256(api, std::span<const char>(key->data(), key->size()), parts);
    key->assign(key->size(), '\0');
    if (!mac) return std::unexpected("cannot compute the signature: " + std::string(mac.error().message()));
    std::string out = "v1,";
    append_base64(out, *mac);
    return out;
}

result<signed_batch> sign_batch(const crypto::crypto_api& api, const delivery_record& d,
                                                    std::string_view batch_id, std::int64_t unix_seconds,
                                                    std::string_view body) {
    signed_batch out;
    out.content_type = d.seal ? batch_sealed_type : batch_json_type;
    out.id.assign(batch_id);
    append_uint(out.timestamp, static_cast<std::uint64_t>(unix_seconds > 0 ? unix_seconds : 0));
    if (d.seal) {
        auto key = crypto::seal_key::from_bytes(api, d.secrets.seal_key);
        if (!key) return std::unexpected("cannot make the seal key: " + std::string(key.error().message()));
        auto sealed = key->seal_to_vector(std::span<const char>(body.data(), body.size()));
        if (!sealed) return std::unexpected("cannot seal the batch: " + std::string(sealed.error().message()));
        out.sealed.assign(sealed->begin(), sealed->end());
    }
    auto signature = webhook_signature(api, d.secrets.signing_secret, out.id, out.timestamp, out.body(body));
    if (!signature) return std::unexpected(std::move(signature.error()));
    out.signature = std::move(*signature);
    return out;
}

}  // namespace percore::shards
