#include <doctest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "store/doc_tree.hpp"
#include "store/document.hpp"
#include "store/document_pool.hpp"
#include "store_test_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

TEST_CASE("make_document keeps the key, content type and value it was given") {
    live_document_guard guard;
    document* doc = make_doc(std::string("app\0key", 7), "hello", "text/x-custom");
    CHECK(doc->key() == std::string("app\0key", 7));
    CHECK(doc->content_type() == "text/x-custom");
    CHECK(doc->value() == "hello");
    CHECK(doc->version() == 0);
    doc->set_version(42);
    CHECK(doc->version() == 42);
    doc->release();
}

TEST_CASE("a well-known content type costs no bytes in the document") {
    live_document_guard guard;
    for (std::string_view type : {"application/octet-stream", "application/json", "text/plain; charset=utf-8"}) {
        document* doc = make_doc("key", "v", type);
        CHECK(doc->content_type() == type);
        CHECK(doc->overhead_bytes() == sizeof(document) + 3);
        doc->release();
    }
}

TEST_CASE("an unusual content type is stored after the key") {
    live_document_guard guard;
    document* doc = make_doc("key", "v", "Application/JSON");
    CHECK(doc->content_type() == "Application/JSON");
    CHECK(doc->key() == "key");
    CHECK(doc->overhead_bytes() == sizeof(document) + 3 + 16);
    doc->release();
}

TEST_CASE("an empty value needs no buffer and an empty content type is kept empty") {
    live_document_guard guard;
    document* doc = make_document("k", "", nullptr, 0);
    CHECK(doc->value().empty());
    CHECK(doc->content_type().empty());
    doc->release();
}

TEST_CASE("a document is freed when its last reference is released") {
    live_document_guard guard;
    document* doc = make_doc("key", "value");
    CHECK(guard.made() == 1);
    doc->retain();
    doc->release();
    CHECK(guard.made() == 1);
    doc->release();
    CHECK(guard.made() == 0);
}

TEST_CASE("a key longer than 65535 bytes is refused") {
    live_document_guard guard;
    std::string key(65536, 'k');
    CHECK_THROWS_AS(make_doc(key, "v"), std::length_error);
    document* doc = make_doc(std::string(65535, 'k'), "v");
    CHECK(doc->key().size() == 65535);
    doc->release();
}

TEST_CASE("a document and its tree node cost 56 bytes plus the key beyond the value") {
    std::size_t per_document = sizeof(document) + sizeof(tree_node);
    MESSAGE("document header " << sizeof(document) << " B + tree node " << sizeof(tree_node) << " B = " << per_document
                               << " B + key (+ content type unless well known)");
    CHECK(per_document <= 56);
}

TEST_CASE("a document copied into a pool keeps its key, content type and value and goes back when released") {
    live_document_guard guard;
    document_pool pool;
    document* d = copy_document(pool, "app\0key", "Application/X", "value");
    CHECK(d->pooled());
    CHECK(d->key() == "app\0key");
    CHECK(d->content_type() == "Application/X");
    CHECK(d->value() == "value");
    CHECK(pool.live() == 1);
    CHECK(guard.made() == 1);
    d->release();
    CHECK(pool.live() == 0);
}

TEST_CASE("a document too large for the pool's classes comes from malloc") {
    live_document_guard guard;
    document_pool pool;
    document* d = copy_document(pool, std::string(max_pooled_document_bytes, 'k'), "text/plain", "v");
    CHECK_FALSE(d->pooled());
    CHECK(pool.live() == 0);
    CHECK(d->key().size() == max_pooled_document_bytes);
    d->release();
}

TEST_CASE("a document released last on another thread goes back to its pool") {
    live_document_guard guard;
    document_pool pool;
    document* d = copy_document(pool, "key", "text/plain", "value");
    d->retain();
    d->release();
    std::thread([d] { d->release(); }).join();
    CHECK(guard.made() == 0);
    pool.collect();
    CHECK(pool.live() == 0);
}

TEST_CASE("a value too large to be inline keeps a buffer of its own beside a pooled document") {
    live_document_guard guard;
    document_pool pool;
    const std::string value(document::inline_value_max_bytes + 1, 'v');
    for (std::size_t key_bytes : {1, 2, 7, 8, 13}) {  // the buffer's word is aligned after any key
        document* d = copy_document(pool, std::string(key_bytes, 'k'), "text/plain", value);
        CHECK(d->pooled());
        CHECK(d->value() == value);
        CHECK(d->key() == std::string(key_bytes, 'k'));
        d->release();
    }
    CHECK(pool.live() == 0);
}

TEST_CASE("a document whose value lives in the file keeps its offset beside key and content type") {
    live_document_guard guard;
    document_pool pool;
    for (std::size_t key_bytes : {0, 3, 5, 8, 21}) {
        const std::string key(key_bytes, 'k');
        document* d = file_document(pool, key, "a/b", 1 << 20, 7, 0x123456789a);
        CHECK(d->pooled());
        CHECK(d->in_file());
        CHECK(d->file_offset() == 0x123456789a);
        CHECK(d->segment() == 7);
        CHECK(d->value_size() == 1u << 20);
        CHECK(d->key() == key);
        CHECK(d->content_type() == "a/b");
        d->release();
    }
    CHECK(pool.live() == 0);
}

TEST_CASE("move_to_pool copies a malloc document into the pool with its version and segment") {
    live_document_guard guard;
    document_pool pool;
    document* d = make_doc("key", "value", "text/x-custom");
    d->set_version(42);
    d->set_segment(3);
    document* moved = move_to_pool(pool, d);
    CHECK(moved != d);
    CHECK(moved->pooled());
    CHECK(moved->key() == "key");
    CHECK(moved->content_type() == "text/x-custom");
    CHECK(moved->value() == "value");
    CHECK(moved->version() == 42);
    CHECK(moved->segment() == 3);
    CHECK(guard.made() == 1);  // the malloc one was released
    moved->release();
}

TEST_CASE("move_to_pool leaves a document that another holder references where it is") {
    live_document_guard guard;
    document_pool pool;
    document* d = make_doc("key", "value");
    d->retain();
    CHECK(move_to_pool(pool, d) == d);
    CHECK_FALSE(d->pooled());
    d->release();
    d->release();
}

TEST_CASE("move_to_pool leaves a document whose value has a buffer of its own where it is") {
    live_document_guard guard;
    document_pool pool;
    document* d = make_doc("key", std::string(document::inline_value_max_bytes + 1, 'v'));
    CHECK(move_to_pool(pool, d) == d);
    CHECK(pool.live() == 0);
    d->release();
}

// Same versions on every board (document.hpp "Two numbers"): only a copy pays for its second number.
TEST_CASE("a document that is not a copy costs what it did, and a copy costs 8 bytes more") {
    live_document_guard guard;
    document_pool pool;
    static_assert(sizeof(document) == 24);
    for (std::size_t value_bytes : {std::size_t{0}, std::size_t{13}, document::inline_value_max_bytes + 1}) {
        CAPTURE(value_bytes);
        const std::string value(value_bytes, 'v');
        document* own = copy_document(pool, "app/key", "text/plain", value);
        document* copied = copy_document(pool, "app/key", "text/plain", value, 0xabcdef);
        const std::size_t beyond_header = 7 + (value_bytes > document::inline_value_max_bytes ? 8 + 1 : 0);
        CHECK(own->overhead_bytes() == sizeof(document) + beyond_header);
        CHECK(copied->overhead_bytes() == own->overhead_bytes() + 8);
        CHECK_FALSE(own->copied());
        CHECK(copied->copied());
        copied->set_version(3);
        CHECK(copied->version() == 3);
        CHECK(copied->etag_version() == 0xabcdef);
        CHECK(copied->value() == value);
        own->set_version(4);
        CHECK(own->etag_version() == 4);
        own->release();
        copied->release();
    }
    CHECK(pool.live() == 0);
}

TEST_CASE("with_copied_version keeps key, content type and value, and takes over a buffer no one else holds") {
    live_document_guard guard;
    document_pool pool;
    const std::string large(document::inline_value_max_bytes + 100, 'L');
    for (const std::string& value : {std::string("small"), large}) {
        document* d = make_doc("app/key", value, "text/x-custom");
        const char* buffer = value.size() > document::inline_value_max_bytes ? d->value().data() : nullptr;
        document* c = with_copied_version(pool, d, 77);
        CHECK(c->copied());
        CHECK(c->etag_version() == 77);
        CHECK(c->key() == "app/key");
        CHECK(c->content_type() == "text/x-custom");
        CHECK(c->value() == value);
        if (buffer) CHECK(c->value().data() == buffer);
        CHECK(guard.made() == 1);  // the given one was released
        c->release();
    }
}

TEST_CASE("a copy whose value lives in the file keeps its ETag version beside the value's offset") {
    live_document_guard guard;
    document_pool pool;
    document* f = file_document(pool, "k", "a/b", 1 << 20, 9, 4096, 99);
    CHECK(f->in_file());
    CHECK(f->file_offset() == 4096);
    CHECK(f->segment() == 9);
    CHECK(f->etag_version() == 99);
    f->release();
}

TEST_CASE("a document made on one thread and freed on another is counted live until freed") {
    const std::int64_t before = live_documents();
    document* doc = nullptr;
    std::thread maker([&] { doc = make_doc("key", "value"); });
    maker.join();
    CHECK(live_documents() == before + 1);  // the maker's count outlives its thread
    std::thread freer([&] { doc->release(); });
    freer.join();
    CHECK(live_documents() == before);
}

TEST_CASE("documents made and freed on many threads at once leave the live count as it was") {
    const std::int64_t before = live_documents();
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([] {
            for (int i = 0; i < 1000; ++i) make_doc("key", "value")->release();
        });
    for (auto& t : threads) t.join();
    CHECK(live_documents() == before);
}
