#include "store/doc_tree.hpp"

#include <stdexcept>
#include <string>

#include "shards/runtime/check.hpp"
#include "store/poison.hpp"

namespace percore::store {

namespace {

int height_of(const tree_node* node) { return node ? node->height : 0; }

void fix_height(tree_node* node) {
    int l = height_of(node->left);
    int r = height_of(node->right);
    node->height = static_cast<std::uint8_t>((l > r ? l : r) + 1);
}

void retain(tree_node* node) {
    if (node) ++node->refs;
}

void seal(tree_node* node) {
    while (node && node->transient) {
        PERCORE_DEBUG_ASSERT(node->refs == 1);
        node->transient = false;
        seal(node->left);
        node = node->right;
    }
}

[[noreturn]] void check_failed(const char* what) { throw std::logic_error(std::string("doc_tree::check: ") + what); }

// Every key under `node` lies strictly between lo and hi (null: unbounded).
std::size_t check_range(const tree_node* node, const document* lo, const document* hi) {
    if (!node) return 0;
    if (node->refs == 0) check_failed("node without references");
    if (node->transient) check_failed("transient node in a published tree");
    if (!node->doc) check_failed("node without document");
    int l = height_of(node->left);
    int r = height_of(node->right);
    if (node->height != (l > r ? l : r) + 1) check_failed("wrong height");
    if (l - r > 1 || r - l > 1) check_failed("unbalanced");
    if (lo && compare_keys(lo->key(), node->doc->key()) >= 0) check_failed("key out of order");
    if (hi && compare_keys(node->doc->key(), hi->key()) >= 0) check_failed("key out of order");
    return 1 + check_range(node->left, lo, node->doc) + check_range(node->right, node->doc, hi);
}

}  // namespace

node_pool::~node_pool() {
    PERCORE_DEBUG_ASSERT(live_ == 0);
    for (auto& chunk : chunks_) PERCORE_UNPOISON(chunk.get(), chunk_nodes * sizeof(tree_node));
}

tree_node* node_pool::allocate() {
    tree_node* node;
    if (free_) {
        node = free_;
        PERCORE_UNPOISON(node, sizeof(tree_node));
        free_ = node->left;
    } else {
        if (chunk_used_ == chunk_nodes) {
            chunks_.push_back(std::make_unique_for_overwrite<tree_node[]>(chunk_nodes));
            chunk_used_ = 0;
            PERCORE_POISON(chunks_.back().get(), chunk_nodes * sizeof(tree_node));
        }
        node = &chunks_.back()[chunk_used_++];
        PERCORE_UNPOISON(node, sizeof(tree_node));
    }
    ++live_;
    ++allocations_;
    return node;
}

void node_pool::deallocate(tree_node* node) {
    PERCORE_DEBUG_ASSERT(live_ > 0);
    --live_;
    node->left = free_;
    free_ = node;
    PERCORE_POISON(node, sizeof(tree_node));
}

doc_tree::doc_tree(node_pool& pool, const tree_node* root) : pool_(pool), root_(const_cast<tree_node*>(root)) {
    PERCORE_DEBUG_ASSERT(!root_ || !root_->transient);
    retain(root_);
}

doc_tree::~doc_tree() { release(pool_, root_); }

const document* doc_tree::find(std::string_view key) const {
    for (const tree_node* node = root_; node;) {
        int c = compare_keys(key, node->doc->key());
        if (c == 0) return node->doc;
        node = c < 0 ? node->left : node->right;
    }
    return nullptr;
}

void doc_tree::put(document* doc) {
    PERCORE_DEBUG_ASSERT(doc);
    root_ = insert(root_, doc);
}

document* doc_tree::erase(std::string_view key) {
    document* removed = nullptr;
    root_ = remove(root_, key, removed);
    PERCORE_DEBUG_ASSERT(removed);
    return removed;
}

const tree_node* doc_tree::publish() {
    seal(root_);
    tree_node* root = root_;
    root_ = nullptr;
    return root;
}

void doc_tree::release(node_pool& pool, const tree_node* node) {
    auto* n = const_cast<tree_node*>(node);
    while (n) {
        PERCORE_ASSERT(n->refs > 0);
        if (--n->refs != 0) return;
        tree_node* right = n->right;
        release(pool, n->left);
        n->doc->release();
        pool.deallocate(n);
        n = right;
    }
}

std::size_t doc_tree::check(const tree_node* node) { return check_range(node, nullptr, nullptr); }

tree_node* doc_tree::make_node(document* doc, tree_node* left, tree_node* right) {
    tree_node* node = pool_.allocate();
    node->left = left;
    node->right = right;
    node->doc = doc;
    node->refs = 1;
    node->transient = true;
    fix_height(node);
    return node;
}

// Takes one reference to `node` and returns a transient node with the same contents that the
// caller may change, holding that reference.
tree_node* doc_tree::own(tree_node* node) {
    PERCORE_DEBUG_ASSERT(node);
    if (node->transient) {
        PERCORE_DEBUG_ASSERT(node->refs == 1);
        return node;
    }
    retain(node->left);
    retain(node->right);
    node->doc->retain();
    tree_node* copy = make_node(node->doc, node->left, node->right);
    release(pool_, node);
    return copy;
}

tree_node* doc_tree::insert(tree_node* node, document* doc) {
    if (!node) return make_node(doc, nullptr, nullptr);
    node = own(node);
    int c = compare_keys(doc->key(), node->doc->key());
    if (c == 0) {
        node->doc->release();
        node->doc = doc;
        return node;
    }
    if (c < 0)
        node->left = insert(node->left, doc);
    else
        node->right = insert(node->right, doc);
    return balance(node);
}

tree_node* doc_tree::remove(tree_node* node, std::string_view key, document*& removed) {
    PERCORE_DEBUG_ASSERT(node);
    node = own(node);
    int c = compare_keys(key, node->doc->key());
    if (c < 0) {
        node->left = remove(node->left, key, removed);
    } else if (c > 0) {
        node->right = remove(node->right, key, removed);
    } else {
        removed = node->doc;
        if (!node->left || !node->right) {
            tree_node* child = node->left ? node->left : node->right;
            pool_.deallocate(node);
            return child;
        }
        node->right = take_min(node->right, node->doc);
    }
    return balance(node);
}

tree_node* doc_tree::take_min(tree_node* node, document*& min) {
    node = own(node);
    if (!node->left) {
        min = node->doc;
        tree_node* right = node->right;
        pool_.deallocate(node);
        return right;
    }
    node->left = take_min(node->left, min);
    return balance(node);
}

tree_node* doc_tree::balance(tree_node* node) {
    PERCORE_DEBUG_ASSERT(node->transient);
    int diff = height_of(node->left) - height_of(node->right);
    if (diff > 1) {
        if (height_of(node->left->left) < height_of(node->left->right)) node->left = rotate_left(own(node->left));
        return rotate_right(node);
    }
    if (diff < -1) {
        if (height_of(node->right->right) < height_of(node->right->left)) node->right = rotate_right(own(node->right));
        return rotate_left(node);
    }
    fix_height(node);
    return node;
}

tree_node* doc_tree::rotate_right(tree_node* node) {
    PERCORE_DEBUG_ASSERT(node->transient);
    tree_node* pivot = own(node->left);
    node->left = pivot->right;
    fix_height(node);
    pivot->right = node;
    fix_height(pivot);
    return pivot;
}

tree_node* doc_tree::rotate_left(tree_node* node) {
    PERCORE_DEBUG_ASSERT(node->transient);
    tree_node* pivot = own(node->right);
    node->right = pivot->left;
    fix_height(node);
    pivot->left = node;
    fix_height(pivot);
    return pivot;
}

}  // namespace percore::store
