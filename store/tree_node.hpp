// tree_node: the node of the persistent tree that snapshots are made of, and the key order.
//
// - What snapshot (reads: find, cursor) and doc_tree (builds and frees trees) both need of a node,
//   in a header of its own so that neither includes the other (doc_tree includes snapshot for its
//   root; snapshot includes only this).
// - The fields are owned by doc_tree.hpp's rules (refs, transient: the owning store's thread only);
//   readers follow left/right/doc only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "store/document.hpp"

namespace percore::store {

struct tree_node {
    tree_node* left;
    tree_node* right;
    document* doc;
    std::uint32_t refs;
    std::uint8_t height;  // a leaf is 1
    bool transient;       // made by the batch being applied, not yet published
};

// 32 bytes on 64-bit targets: two nodes per cache line.
static_assert(sizeof(void*) != 8 || sizeof(tree_node) == 32);

// Byte-wise: unsigned bytes compared like memcmp, then the shorter key first.
inline int compare_keys(std::string_view a, std::string_view b) {
    std::size_t n = a.size() < b.size() ? a.size() : b.size();
    if (n != 0) {
        if (int c = std::memcmp(a.data(), b.data(), n); c != 0) return c;
    }
    return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

}  // namespace percore::store
