#include "store/snapshot.hpp"


#include "store/tree_node.hpp"
#include "shards/runtime/check.hpp"

namespace percore::store {

namespace {

const document* find_in(const tree_node* root, std::string_view key) {
    for (const tree_node* node = root; node;) {
        int c = compare_keys(key, node->doc->key());
        if (c == 0) return node->doc;
        node = c < 0 ? node->left : node->right;
    }
    return nullptr;
}

}  // namespace

const document* snapshot::find(std::string_view key) const { return find_in(root_, key); }

const document* snapshot::find_deleted(std::string_view key) const { return find_in(tombstones_, key); }

// path_ holds the current node on top and below it the ancestors still to be visited (those whose
// left subtree holds the current node); at most one node per tree level.
void snapshot::cursor::seek_in(const tree_node* root, std::string_view key, bool exclusive) {
    depth_ = 0;
    for (const tree_node* node = root; node;) {
        int c = compare_keys(node->doc->key(), key);
        if (c > 0 || (c == 0 && !exclusive)) {
            PERCORE_DEBUG_ASSERT(depth_ < max_tree_height);
            path_[depth_++] = node;
            if (c == 0) return;
            node = node->left;
        } else {
            node = node->right;
        }
    }
}

const document& snapshot::cursor::doc() const {
    PERCORE_DEBUG_ASSERT(valid());
    return *path_[depth_ - 1]->doc;
}

void snapshot::cursor::next() {
    PERCORE_DEBUG_ASSERT(valid());
    const tree_node* node = path_[--depth_];
    for (node = node->right; node; node = node->left) {
        PERCORE_DEBUG_ASSERT(depth_ < max_tree_height);
        path_[depth_++] = node;
    }
}

}  // namespace percore::store
