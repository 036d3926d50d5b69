#include <doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "crypto/digest.hpp"
#include "crypto/loader.hpp"
#include "crypto/seal.hpp"
#include "shards/deliveries/delivery_batch.hpp"
#include "shards/base/encoding.hpp"
#include "shards/base/json_value.hpp"
#include "shards/base/key_owner.hpp"
#include "shards/base/limits.hpp"
#include "store/document.hpp"
#include "store/epoch.hpp"
#include "store/shard_store.hpp"

using namespace percore;
using namespace percore::shards;

namespace {

// The body a batch built into its buffer, once closed (what the engine then sends).
std::string finished(delivery_batch& b, std::string& body, std::string_view cursor) {
    b.finish(cursor);
    return body;
}

const crypto::crypto_api& api() {
    auto loaded = crypto::load_crypto_module();
    if (!loaded) FAIL(std::string(loaded.error().message()));
    return **loaded;
}

json_value parsed(const std::string& body) {
    auto v = parse_json(body);
    REQUIRE_MESSAGE(v, body);
    return std::move(*v);
}

delivery_record record_with(bool seal) {
    delivery_record d;
    d.url = "https://example.com/in";
    d.seal = seal;
    d.secrets = make_delivery_secrets();
    return d;
}

// Two in-memory stores (no log: a batch publishes when advanced) behind a store_client.
struct two_stores final : store_client {
    static constexpr unsigned count = 2;
    store::reader_epochs epochs{1};
    std::vector<std::unique_ptr<store::shard_store>> stores;

    two_stores() {
        for (unsigned i = 0; i < count; ++i) stores.push_back(std::make_unique<store::shard_store>(epochs, 1000));
        epochs.begin_round(0);
    }
    ~two_stores() { epochs.quiesce(0); }
    unsigned shard_count() const override { return count; }
    unsigned self() const override { return 0; }
    unsigned owner_of(std::string_view key) const override { return shards::owner_of(key, count); }
    const store::snapshot* current(unsigned owner) const override { return stores[owner]->current(); }
    void submit(unsigned owner, store::write_op op) override { stores[owner]->submit(std::move(op)); }

    void write(std::string_view key, std::string_view value, bool erase = false) {
        const std::string full = std::string("app") + '\0' + std::string(key);
        store::write_op w;
        if (erase) {
            w.kind = store::write_kind::erase;
            w.key = full;
        } else {
            w.doc = store::copy_document(full, "text/plain", value);
        }
        submit(owner_of(full), std::move(w));
        for (auto& s : stores) {
            std::vector<store::write_result> done;
            (void)s->advance_batches(done);
        }
    }
};

constexpr std::string_view app_prefix("app\0", 4);

// The keys a body lists, in order (read as text: a body of large values is past the JSON
// reader's 64 KiB bound for administration bodies; these keys need no unescaping).
std::vector<std::string> keys_of(const std::string& body) {
    std::vector<std::string> keys;
    constexpr std::string_view mark = "{\"key\":\"";
    for (std::size_t at = body.find(mark); at != std::string::npos; at = body.find(mark, at + 1)) {
        const std::size_t begin = at + mark.size();
        keys.push_back(body.substr(begin, body.find('"', begin) - begin));
    }
    return keys;
}

}  // namespace

TEST_CASE("fill_batch stops before the value that would pass 1 MiB, and the next batch starts with it") {
    two_stores s;
    const std::string big(600 * 1024, 'v');
    s.write("a", big);
    s.write("b", big);
    s.write("c", "small");
    change_feed feed(s, {1, 1});
    auto pos = feed.start("0");
    REQUIRE(pos);
    std::string first_body;
    delivery_batch first(first_body, "app", "hook");
    auto n = fill_batch(feed, *pos, app_prefix, 100, first);
    REQUIRE(n);
    CHECK(*n == 1);
    // between shards the feed's order is by version, so which large value comes first depends on
    // where the keys live; either way one travels alone and the other with the small one
    auto keys = keys_of(finished(first, first_body, cursor_text(*pos)));
    REQUIRE(keys.size() == 1);
    CHECK((keys[0] == "a" || keys[0] == "b"));
    std::string second_body;
    delivery_batch second(second_body, "app", "hook");
    REQUIRE(fill_batch(feed, *pos, app_prefix, 100, second));
    auto rest = keys_of(finished(second, second_body, cursor_text(*pos)));
    rest.push_back(keys[0]);
    std::sort(rest.begin(), rest.end());
    CHECK(rest == std::vector<std::string>{"a", "b", "c"});
    std::string none_body;
    delivery_batch none(none_body, "app", "hook");
    auto empty = fill_batch(feed, *pos, app_prefix, 100, none);
    REQUIRE(empty);
    CHECK(*empty == 0);
}

TEST_CASE("fill_batch carries values and deletes as the feed lists them, within the prefix") {
    two_stores s;
    s.write("p/1", "one");
    s.write("q/1", "other");
    s.write("p/2", "two");
    s.write("p/1", {}, true);
    change_feed feed(s, {1, 1});
    auto pos = feed.start("0");
    REQUIRE(pos);
    std::string b_body;
    delivery_batch b(b_body, "app", "hook");
    REQUIRE(fill_batch(feed, *pos, std::string("app\0p/", 6), 100, b));
    json_value v = parsed(finished(b, b_body, cursor_text(*pos)));
    const auto& changes = v.find("changes")->items;
    REQUIRE(changes.size() == 2);
    CHECK(changes[0].find("key")->text == "p/2");
    CHECK(changes[0].find("value_base64")->text == "dHdv");
    CHECK(changes[0].find("content_type")->text == "text/plain");
    CHECK(changes[1].find("key")->text == "p/1");
    CHECK(changes[1].find("deleted")->flag);
}

TEST_CASE("the Standard Webhooks example gives the signature its specification shows") {
    auto s = webhook_signature(api(), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                               "1614265330", R"({"test": 2432232314})");
    REQUIRE(s);
    CHECK(*s == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

TEST_CASE("a signature is the base64 HMAC-SHA256 of id, timestamp and body under the decoded secret") {
    delivery_record d = record_with(false);
    auto s = sign_batch(api(), d, "msg_1", 1700000000, "{\"x\":1}");
    REQUIRE(s);
    auto key = signing_key_of(d.secrets.signing_secret);
    REQUIRE(key);
    const std::string text = "msg_1.1700000000.{\"x\":1}";
    auto mac = crypto::hmac_sha256(api(), std::span<const char>(key->data(), key->size()),
                                   std::span<const char>(text.data(), text.size()));
    REQUIRE(mac);
    std::string expected = "v1,";
    append_base64(expected, *mac);
    CHECK(s->signature == expected);
    CHECK(s->id == "msg_1");
    CHECK(s->timestamp == "1700000000");
    CHECK(s->content_type == "application/json");
    CHECK(s->sealed.empty());  // the body is sent as it was signed, not copied
}

TEST_CASE("a malformed signing secret is an error, not a signature") {
    CHECK(!webhook_signature(api(), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "id", "1", "b"));
    CHECK(!webhook_signature(api(), "whsec_not base64", "id", "1", "b"));
}

TEST_CASE("a batch body names the app, the delivery, each change and the cursor") {
    std::string b_body;
    delivery_batch b(b_body, "notes", "hook");
    b.add({"a/1", 0x1f, false, "text/plain", "hello"});
    json_value v = parsed(finished(b, b_body, "cur-1"));
    CHECK(v.find("app")->text == "notes");
    CHECK(v.find("delivery")->text == "hook");
    CHECK(v.find("cursor")->text == "cur-1");
    const json_value& changes = *v.find("changes");
    REQUIRE(changes.items.size() == 1);
    const json_value& c = changes.items[0];
    CHECK(c.find("key")->text == "a/1");
    CHECK(c.find("etag")->text == "\"000000000000001f\"");
    CHECK(c.find("deleted")->flag == false);
    CHECK(c.find("content_type")->text == "text/plain");
    CHECK(c.find("value_base64")->text == "aGVsbG8=");
}

TEST_CASE("a binary value travels as base64 that decodes to its bytes") {
    std::string value;
    for (int i = 0; i < 256; ++i) value.push_back(static_cast<char>(i));
    std::string b_body;
    delivery_batch b(b_body, "notes", "hook");
    b.add({"bin", 2, false, "application/octet-stream", value});
    json_value v = parsed(finished(b, b_body, "c"));
    auto bytes = decode_base64(v.find("changes")->items[0].find("value_base64")->text);
    REQUIRE(bytes);
    CHECK(std::string(bytes->begin(), bytes->end()) == value);
}

TEST_CASE("keys and content types with quotes, backslashes and control bytes arrive as they were") {
    const std::string key = std::string("q\"b\\n\nt\tz") + '\x01' + "\x7f\xc3\xa9";
    const std::string type = "text/plain; x=\"a\\b\"";
    std::string b_body;
    delivery_batch b(b_body, "notes", "hook");
    for (int i = 0; i < 3; ++i) b.add({key, static_cast<std::uint64_t>(i + 1), i == 1, type, "v"});
    json_value v = parsed(finished(b, b_body, "c"));
    const json_value& changes = *v.find("changes");
    REQUIRE(changes.items.size() == 3);
    for (const json_value& c : changes.items) CHECK(c.find("key")->text == key);
    CHECK(changes.items[0].find("content_type")->text == type);
    CHECK(changes.items[2].find("content_type")->text == type);
    CHECK(changes.items[1].find("deleted")->flag == true);
}

TEST_CASE("values of every length up to a few groups of three encode with the right padding") {
    std::string b_body;
    delivery_batch b(b_body, "notes", "hook");
    std::string value;
    for (int n = 0; n < 10; ++n) {
        b.add({"k" + std::to_string(n), static_cast<std::uint64_t>(n + 1), false, "t", value});
        value.push_back(static_cast<char>(0xf0 + n));
    }
    json_value v = parsed(finished(b, b_body, "c"));
    const json_value& changes = *v.find("changes");
    REQUIRE(changes.items.size() == 10);
    value.clear();
    for (const json_value& c : changes.items) {
        auto bytes = decode_base64(c.find("value_base64")->text);
        REQUIRE(bytes);
        CHECK(std::string(bytes->begin(), bytes->end()) == value);
        value.push_back(static_cast<char>(0xf0 + static_cast<int>(value.size())));
    }
}

TEST_CASE("a deleted key has null content_type and value_base64") {
    std::string b_body;
    delivery_batch b(b_body, "notes", "hook");
    b.add({"gone", 3, true, {}, {}});
    json_value v = parsed(finished(b, b_body, "c"));
    const json_value& c = v.find("changes")->items[0];
    CHECK(c.find("deleted")->flag == true);
    CHECK(c.find("content_type")->what == json_value::kind::null);
    CHECK(c.find("value_base64")->what == json_value::kind::null);
}

TEST_CASE("a batch takes values up to 1 MiB and no more") {
    const std::string half(max_delivery_batch_value_bytes / 2, 'x');
    std::string b_body;
    delivery_batch b(b_body, "notes", "hook");
    REQUIRE(b.fits(half.size()));
    b.add({"a", 1, false, "t", half});
    REQUIRE(b.fits(half.size()));
    b.add({"b", 2, false, "t", half});
    CHECK(b.value_bytes() == max_delivery_batch_value_bytes);
    CHECK_FALSE(b.fits(1));
    CHECK(b.fits(0));
}

TEST_CASE("a document larger than 1 MiB travels alone") {
    const std::string big(max_delivery_batch_value_bytes + 1, 'x');
    std::string b_body;
    delivery_batch b(b_body, "notes", "hook");
    CHECK(b.fits(big.size()));
    b.add({"big", 1, false, "t", big});
    CHECK_FALSE(b.fits(1));
    CHECK(b.changes() == 1);
}

TEST_CASE("a sealed batch opens with the delivery's key and its signature covers the sealed bytes") {
    delivery_record d = record_with(true);
    const std::string body = "{\"app\":\"notes\"}";
    auto s = sign_batch(api(), d, "msg_2", 1700000001, body);
    REQUIRE(s);
    CHECK(s->content_type == "application/vnd.percore.sealed");
    CHECK(!s->sealed.empty());
    CHECK(s->body(body) == s->sealed);
    auto key = crypto::seal_key::from_bytes(api(), d.secrets.seal_key);
    REQUIRE(key);
    auto opened = key->open_to_vector(std::span<const char>(s->sealed.data(), s->sealed.size()));
    REQUIRE(opened);
    CHECK(std::string(opened->begin(), opened->end()) == body);
    auto expected = webhook_signature(api(), d.secrets.signing_secret, "msg_2", "1700000001", s->sealed);
    REQUIRE(expected);
    CHECK(s->signature == *expected);
}
