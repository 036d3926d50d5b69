#include "store/precondition.hpp"

#include <algorithm>

namespace percore::store {

namespace {

bool listed(const std::vector<std::uint64_t>& versions, std::uint64_t version) {
    return std::find(versions.begin(), versions.end(), version) != versions.end();
}

}  // namespace

precondition::verdict precondition::evaluate(bool exists, std::uint64_t version) const {
    if (has_if_match) {
        if (!exists) return verdict::if_match_failed;
        if (!if_match_any && !listed(if_match, version)) return verdict::if_match_failed;
    }
    if (has_if_none_match) {
        if (if_none_match_any) return exists ? verdict::if_none_match_failed : verdict::holds;
        if (exists && listed(if_none_match, version)) return verdict::if_none_match_failed;
    }
    return verdict::holds;
}

}  // namespace percore::store
