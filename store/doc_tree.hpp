// doc_tree: the persistent AVL tree behind snapshots, and the working tree a batch is applied to.
//
// - A published tree is never changed. A batch starts a working tree from the published root and
//   path-copies every node it changes; nodes created by that batch (`transient`) are changed in
//   place until the batch is published, so k writes copy each shared node at most once.
// - `refs` counts the parents and snapshot roots (or working trees) pointing at a node. Only the
//   owning store's thread touches it; readers never do, and are protected by epochs instead.
// - Every node holds one reference to its document.
// - Nodes come from the owning store's node_pool; nothing here is thread-safe.
// - The node and the key order are in tree_node.hpp, which snapshot reads with (so snapshot does not
//   include this header: no include cycle).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "store/document.hpp"
#include "store/snapshot.hpp"
#include "store/tree_node.hpp"

namespace percore::store {

// Fixed-size node allocator of one store: no per-node malloc header, no locking. Memory of freed
// nodes is kept for reuse and returned when the pool is destroyed.
class node_pool {
public:
    node_pool() = default;
    ~node_pool();
    node_pool(const node_pool&) = delete;
    node_pool& operator=(const node_pool&) = delete;

    tree_node* allocate();
    void deallocate(tree_node* node);

    std::size_t live() const { return live_; }
    std::uint64_t allocations() const { return allocations_; }
    std::size_t reserved_bytes() const { return chunks_.size() * chunk_nodes * sizeof(tree_node); }

private:
    static constexpr std::size_t chunk_nodes = 1024;
    std::vector<std::unique_ptr<tree_node[]>> chunks_;
    std::size_t chunk_used_ = chunk_nodes;
    tree_node* free_ = nullptr;
    std::size_t live_ = 0;
    std::uint64_t allocations_ = 0;
};

class doc_tree {
public:
    // Starts a working tree that shares everything with `root` (which may be null).
    doc_tree(node_pool& pool, const tree_node* root);
    // Drops the working tree unless it was published.
    ~doc_tree();
    doc_tree(const doc_tree&) = delete;
    doc_tree& operator=(const doc_tree&) = delete;

    const document* find(std::string_view key) const;
    // Inserts `doc` (taking its reference) under doc->key(), replacing and releasing any document there.
    void put(document* doc);
    // Removes `key`, which must be present; returns the removed document's reference.
    document* erase(std::string_view key);
    // Freezes the working tree and hands its root reference to the caller.
    const tree_node* publish();

    // Drops one reference to `node`, freeing what no one else holds.
    static void release(node_pool& pool, const tree_node* node);
    static const tree_node* root(const snapshot& s) { return s.root_; }
    static std::size_t height(const tree_node* node) { return node ? node->height : 0; }

    // Checks key order, AVL balance, heights and that nothing is transient; returns the node
    // count. Throws std::logic_error on a violation. O(n): for tests.
    static std::size_t check(const tree_node* node);

private:
    tree_node* make_node(document* doc, tree_node* left, tree_node* right);
    tree_node* own(tree_node* node);
    tree_node* insert(tree_node* node, document* doc);
    tree_node* remove(tree_node* node, std::string_view key, document*& removed);
    tree_node* take_min(tree_node* node, document*& min);
    tree_node* balance(tree_node* node);
    tree_node* rotate_left(tree_node* node);
    tree_node* rotate_right(tree_node* node);

    node_pool& pool_;
    tree_node* root_;
};

}  // namespace percore::store
