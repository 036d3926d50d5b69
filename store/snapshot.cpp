#include "store/snapshot.hpp"


#include "store/tree_node.hpp"
#include "shards/runtime/check.hpp"

namespace percore::store {

const document* snapshot::find(std::string_view key) const {
    for (const tree_node* node = root_; node;) {
        int c = compare_keys(key, node->doc->key());
        if (c == 0) return node->doc;
        node = c < 0 ? node->left : node->right;
    }
    return nullptr;
}

// path_ holds the current node on top and below it the ancestors still to be visited (those whose
// left subtree holds the current node); at most one node per tree level.
void snapshot::cursor::seek(const snapshot& s, std::string_view key, bool exclusive) {
    depth_ = 0;
    for (const tree_node* node = s.root_; node;) {
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
