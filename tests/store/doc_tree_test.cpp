#include <doctest.h>

#include <cmath>
#include <cstdio>
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
