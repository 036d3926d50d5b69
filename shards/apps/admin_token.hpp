// admin_token: the server's admin token (SPEC §7, --admin-token-file) — read from its file, or,
// when the file is missing, made fresh (256 random bits) and written there with mode 0600.
//
// Contract
// - Main thread, before the shards start. Errors are values: one line for stderr (exit 1).
// - The token itself is never logged: the one line a new file earns names its path only.
// - A file that others may read is still used, with a warning line (as ssh warns of a loose key).
#pragma once

#include <expected>
#include <functional>
#include <string>
#include <string_view>

#include "shards/base/result.hpp"

namespace percore::shards {

// A token read from a file must be at least this long (128 bits in base64 is 22 characters).
inline constexpr std::size_t min_admin_token_bytes = 22;

result<std::string> load_or_create_admin_token(const std::string& path,
                                                                   const std::function<void(const std::string&)>& log);
// A token that must exist (--follow-token-file: the primary's admin token); `option` names the
// option in the error line.
result<std::string> read_token_file(const std::string& path, std::string_view option,
                                                        const std::function<void(const std::string&)>& log);

}  // namespace percore::shards
