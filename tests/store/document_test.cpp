#include <doctest.h>

#include <stdexcept>
#include <string>

#include "store/doc_tree.hpp"
#include "store/document.hpp"
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

TEST_CASE("a document and its tree node cost 64 bytes plus the key beyond the value") {
    std::size_t per_document = sizeof(document) + sizeof(tree_node);
    MESSAGE("document header " << sizeof(document) << " B + tree node " << sizeof(tree_node) << " B = " << per_document
                               << " B + key (+ content type unless well known)");
    CHECK(per_document <= 64);
}
