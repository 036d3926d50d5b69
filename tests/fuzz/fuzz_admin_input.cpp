// Fuzz target: what a client sends the administration and the access checks (SPEC §7) — the
// Authorization header and the JSON bodies of /_apps (and the catalog records read back from the log).
//
// The first byte picks what the rest is: 0 an Authorization value, 1 an app body, 2 a token body or
// record, 3 a change feed cursor (`since`, SPEC §8), 4 a delivery body, 5 a delivery record (SPEC §9).
// Checked:
// - nothing crashes, reads out of bounds or leaks (sanitizers);
// - bearer_token() answers empty or a suffix of the value made of token68 characters, after a scheme
//   that is "bearer" in any case and at least one space; token_id_of() of it, when found, is the 16
//   lowercase hex digits at offset 4 of a 64-byte token;
// - a body the JSON reader takes either has a quota that encodes and decodes to itself, or is
//   refused with a reason; parse_json is deterministic;
// - a token record that decodes encodes to a record that decodes to the same fields;
// - a cursor that parses prints back as the very same text (one text per cursor), so no two texts
//   name one position and a retyped cursor is refused;
// - a delivery body is taken or refused with a reason; a taken one has a url that parses again to the
//   same parts, a ca_pem only with https (a ca_file never); a delivery record that decodes encodes to itself.
#include <cstdint>
#include <string>
#include <string_view>

#include "shards/apps/access.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/deliveries/deliveries_admin.hpp"
#include "shards/deliveries/delivery_record.hpp"
#include "shards/feed/feed_cursor.hpp"
#include "shards/base/json_value.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace percore::fuzz {

namespace {

void check_authorization(std::string_view v) {
    std::string_view token = shards::bearer_token(v);
    const std::string what = "authorization=" + printable(v);
    if (token.empty()) return;
    FUZZ_CHECK(token.data() + token.size() == v.data() + v.size(), what);
    FUZZ_CHECK(v.size() > 7 && v[6] == ' ', what);
    for (std::size_t i = 0; i < 6; ++i) FUZZ_CHECK((v[i] | 0x20) == "bearer"[i], what);
    for (char c : token) FUZZ_CHECK(c != ' ' && c > 0x20 && c < 0x7f, what);
    if (auto id = shards::token_id_of(token)) {
        FUZZ_CHECK(token.size() == shards::token_bytes && id->data() == token.data() + 4 && id->size() == 16, what);
        for (char c : *id) FUZZ_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'), what);
    }
}

void check_app_body(std::string_view body) {
    const std::string what = "app body=" + printable(body);
    auto v = shards::parse_json(body);
    auto again = shards::parse_json(body);
    FUZZ_CHECK(v.has_value() == again.has_value(), what);
    if (!v) {
        FUZZ_CHECK(!v.error().reason.empty(), what);
        return;
    }
    auto q = shards::quota_from_json(v->find("quota"));
    if (!q) return;
    auto back = shards::decode_app_record(shards::encode_app_record(*q));
    FUZZ_CHECK(back && *back == *q, what);
}

void check_token_record(std::string_view body) {
    const std::string what = "token record=" + printable(body);
    auto t = shards::decode_token_record(body);
    if (!t) return;
    auto back = shards::decode_token_record(shards::encode_token_record(*t));
    FUZZ_CHECK(back && back->app == t->app && back->scope == t->scope && back->prefix == t->prefix &&
                   back->expires == t->expires && back->created == t->created && back->hash == t->hash,
               what);
}

void check_cursor(std::string_view text) {
    const std::string what = "cursor=" + printable(text);
    auto c = shards::parse_cursor(text);
    if (!c) return;
    FUZZ_CHECK(shards::cursor_text(*c) == text, what);
    FUZZ_CHECK(!c->versions.empty(), what);
}

void check_delivery_body(std::string_view body) {
    const std::string what = "delivery body=" + printable(body);
    auto d = shards::parse_delivery_request(body);
    if (!d) {
        FUZZ_CHECK(!d.error().reason.empty(), what);
        return;
    }
    auto again = shards::parse_delivery_url(d->url);
    FUZZ_CHECK(again && again->https == d->parsed.https && again->host == d->parsed.host &&
                   again->port == d->parsed.port && again->target == d->parsed.target,
               what);
    FUZZ_CHECK(d->parsed.port != 0 && d->parsed.target.starts_with('/') && !d->parsed.host.empty(), what);
    FUZZ_CHECK(d->ca_pem.empty() || d->parsed.https, what);
}

void check_delivery_record(std::string_view text) {
    const std::string what = "delivery record=" + printable(text);
    auto d = shards::decode_delivery_record(text);
    if (!d) return;
    const std::string encoded = shards::encode_delivery_record(*d);
    auto back = shards::decode_delivery_record(encoded);
    FUZZ_CHECK(back && shards::encode_delivery_record(*back) == encoded, what);
}

}  // namespace

int admin_input_one_input(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 6) {
    case 0: check_authorization(rest); break;
    case 1: check_app_body(rest); break;
    case 2: check_token_record(rest); break;
    case 3: check_cursor(rest); break;
    case 4: check_delivery_body(rest); break;
    default: check_delivery_record(rest); break;
    }
    return 0;
}

}  // namespace percore::fuzz

#ifdef PERCORE_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return percore::fuzz::admin_input_one_input(data, size);
}
#endif
