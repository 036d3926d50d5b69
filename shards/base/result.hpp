// result: the one way the composition (shards/ above the runtime) reports that something did not
// happen — a value, or a `problem` the caller may not drop ([[nodiscard]] on the type, as the
// store's store::basic_result it is made of).
//
// Contract
// - problem.status: the HTTP status a client is answered with when the problem is a client's
//   (400, 404, 409, 503…); 0 when it is no client's: an operator's error at start (an option, a
//   file), or a cause kept for a log line or a delivery's record.
// - problem.reason: one line saying what is wrong, for the answer's {"error":…} or the log; never
//   a secret (tokens, keys).
// - A problem converts from a message, so `return std::unexpected("…");` keeps reading as it did.
// - Where a layer below answers for itself, its own type crosses unchanged: store::result (the
//   store), net::stream_status (the pool). Any thread; value types.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "store/result.hpp"

namespace percore::shards {

struct problem {
    std::uint16_t status = 0;
    std::string reason;

    problem() = default;
    problem(std::string why) : reason(std::move(why)) {}  // NOLINT: implicit, a message is a problem of status 0
    problem(const char* why) : reason(why) {}              // NOLINT: as above
    problem(std::uint16_t s, std::string why) : status(s), reason(std::move(why)) {}
};

template <class T>
using result = store::basic_result<T, problem>;

}  // namespace percore::shards
