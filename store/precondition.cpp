#include "store/precondition.hpp"

#include <algorithm>

namespace percore::store {

namespace {

bool listed(const std::vector<std::uint64_t>& versions, std::uint64_t version) {
    return std::find(versions.begin(), versions.end(), version) != versions.end();
}

}  // namespace

// RFC 9110 §13.2.2: If-Match is evaluated first, then If-None-Match; a write needs both to hold.
bool precondition::holds(bool exists, std::uint64_t version) const {
    if (has_if_match) {
        if (!exists) return false;
        if (!if_match_any && !listed(if_match, version)) return false;
    }
    if (has_if_none_match) {
        if (if_none_match_any) return !exists;
        if (exists && listed(if_none_match, version)) return false;
    }
    return true;
}

}  // namespace percore::store
