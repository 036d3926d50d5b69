// tree_node: the node of the persistent tree that snapshots are made of, and the key order.
//
// - What snapshot (reads: find, cursor) and doc_tree (builds and frees trees) both need of a node,
//   in a header of its own so that neither includes the other (doc_tree includes snapshot for its
//   root; snapshot includes only this).
// - The fields are owned by doc_tree.hpp's rules (refs, transient: the owning store's thread only);
//   readers follow left/right/doc only.
#pragma once

#include <bit>
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

// Byte-wise: unsigned bytes compared like memcmp, then the shorter key first. Eight bytes at a
// time inline rather than a call to memcmp: a lookup compares the key at every level of the tree
// (~14 for 10,000 keys), and keys are short (an app's keys share its name as a prefix), so the
// call was most of a find (callgrind: ~35 instructions a level of ~45).
inline int compare_keys(std::string_view a, std::string_view b) {
    const std::size_t n = a.size() < b.size() ? a.size() : b.size();
    const auto* p = reinterpret_cast<const unsigned char*>(a.data());
    const auto* q = reinterpret_cast<const unsigned char*>(b.data());
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t x, y;
        std::memcpy(&x, p + i, 8);
        std::memcpy(&y, q + i, 8);
        if (x != y) {
            if constexpr (std::endian::native == std::endian::little) {
                x = __builtin_bswap64(x);
                y = __builtin_bswap64(y);
            }
            return x < y ? -1 : 1;  // the first differing byte decides, as in memcmp
        }
    }
    for (; i < n; ++i)
        if (p[i] != q[i]) return p[i] < q[i] ? -1 : 1;
    return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

}  // namespace percore::store
