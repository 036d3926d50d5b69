// result: the one way store functions report failure: a value or an error, which the caller may
// not drop ([[nodiscard]] on the type, so every function returning one is nodiscard).
//
// Contract
// - io_result<T>: T, or an errno value (env, files, the log). Nothing throws.
// - result<T>: T, or a message for the operator naming the file and what is wrong (recovery,
//   layout, the data directory): what the server prints before it refuses to start.
// - Both are std::expected (inheriting its constructors, so `return std::unexpected(EIO);` and
//   `return {};` work as before); only dropping one unread is new: a compile warning (an error with
//   -Dwerror=true). Deliberately ignored results say so with (void) and a comment why.
// - Any thread; a value type.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace percore::store {

template <class T, class E>
class [[nodiscard]] basic_result : public std::expected<T, E> {
public:
    using std::expected<T, E>::expected;
    // user-provided (not `= default`): g++ 12 then sees the error member of a value-initialized
    // io_result<void> as maybe uninitialized (-Wmaybe-uninitialized, an error with -Dwerror=true)
    basic_result() : std::expected<T, E>() {}
    // From the plain std::expected a std:: algorithm or monadic operation returns.
    basic_result(std::expected<T, E> e) : std::expected<T, E>(std::move(e)) {}
};

template <class T>
using io_result = basic_result<T, int>;  // errno on failure

template <class T>
using result = basic_result<T, std::string>;  // a message on failure

}  // namespace percore::store
