#include <doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "store/doc_tree.hpp"
#include "store_test_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

std::string key_for(int i) {
    char key[16];
    std::snprintf(key, sizeof key, "%06d", i);
    return key;
}

const tree_node* build(node_pool& pool, int n) {
    doc_tree tree(pool, nullptr);
    for (int i = 0; i < n; ++i) tree.put(make_doc(key_for(i), "v"));
    return tree.publish();
}

}  // namespace

TEST_CASE("a batch copies each shared node at most once") {
    live_document_guard guard;
    constexpr int n = 1024;
    node_pool pool;
    const tree_node* old_root = build(pool, n);
    CHECK(doc_tree::check(old_root) == n);
    auto before = pool.allocations();
    const tree_node* new_root;
    {
        doc_tree tree(pool, old_root);
        for (int i = 0; i < n; ++i) tree.put(make_doc(key_for(i), "w"));
        new_root = tree.publish();
    }
    CHECK(pool.allocations() - before == n);
    CHECK(pool.live() == 2 * n);
    CHECK(doc_tree::check(new_root) == n);
    doc_tree::release(pool, old_root);
    CHECK(pool.live() == n);
    CHECK(guard.made() == n);
    doc_tree::release(pool, new_root);
    CHECK(pool.live() == 0);
}

TEST_CASE("one write path-copies only the nodes on its path") {
    live_document_guard guard;
    constexpr int n = 4096;
    node_pool pool;
    const tree_node* old_root = build(pool, n);
    auto before = pool.allocations();
    const tree_node* new_root;
    {
        doc_tree tree(pool, old_root);
        tree.put(make_doc(key_for(1234), "w"));
        new_root = tree.publish();
    }
    CHECK(pool.allocations() - before <= doc_tree::height(old_root));
    CHECK(pool.live() == n + (pool.allocations() - before));
    doc_tree::release(pool, old_root);
    CHECK(pool.live() == n);
    doc_tree::release(pool, new_root);
}

TEST_CASE("a working tree that is dropped unpublished frees what it made and keeps the original") {
    live_document_guard guard;
    node_pool pool;
    const tree_node* root = build(pool, 100);
    {
        doc_tree tree(pool, root);
        tree.put(make_doc("new", "x"));
        tree.erase(key_for(5))->release();
        CHECK(tree.find("new"));
        CHECK_FALSE(tree.find(key_for(5)));
    }
    CHECK(pool.live() == 100);
    CHECK(doc_tree::check(root) == 100);
    CHECK(guard.made() == 100);
    doc_tree::release(pool, root);
}

TEST_CASE("inserting keys in order keeps the AVL height bound") {
    live_document_guard guard;
    node_pool pool;
    for (int n : {1, 2, 3, 7, 100, 5000}) {
        const tree_node* root = build(pool, n);
        CHECK(doc_tree::check(root) == static_cast<std::size_t>(n));
        CHECK(doc_tree::height(root) <= 1.45 * std::log2(n + 2.0));
        doc_tree::release(pool, root);
    }
    CHECK(pool.live() == 0);
}

TEST_CASE("compare_keys orders keys as memcmp over the common length, then the shorter first") {
    // every pair of keys of lengths 0..20 that differ in one byte at every position, high bytes
    // included (unsigned), and prefixes of each other
    auto sign = [](int v) { return v < 0 ? -1 : (v > 0 ? 1 : 0); };
    auto reference = [&](const std::string& a, const std::string& b) {
        const std::size_t n = std::min(a.size(), b.size());
        if (int c = n ? std::memcmp(a.data(), b.data(), n) : 0; c != 0) return sign(c);
        return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
    };
    for (std::size_t len = 0; len <= 20; ++len) {
        std::string base(len, 'k');
        for (std::size_t i = 0; i < len; ++i) base[i] = static_cast<char>('a' + i);
        for (std::size_t at = 0; at < len; ++at)
            for (int byte : {0x00, 0x61, 0x7f, 0x80, 0xff}) {
                std::string other = base;
                other[at] = static_cast<char>(byte);
                CHECK(compare_keys(base, other) == reference(base, other));
                CHECK(compare_keys(other, base) == reference(other, base));
            }
        for (std::size_t cut = 0; cut <= len; ++cut) {
            const std::string prefix = base.substr(0, cut);
            CHECK(compare_keys(prefix, base) == reference(prefix, base));
            CHECK(compare_keys(base, prefix) == reference(base, prefix));
        }
    }
}
