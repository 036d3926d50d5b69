// loader: finds and opens the crypto module (percore-crypto.so, which holds OpenSSL) the first
// time TLS or sealing is configured, so a server that uses neither never maps OpenSSL. Nothing
// linked into the server includes an OpenSSL header or links libssl/libcrypto: the module is
// reached only through the C table of crypto/module_abi.h.
//
// Contract
// - What: the search below, once per process (load_crypto_module) or on demand
//   (load_crypto_module_from, for tests); the answer is a result (crypto/result.hpp): the table,
//   or an error whose code is errc::module_not_found or errc::module_refused.
// - Ownership: the table belongs to the module, which stays loaded until the process ends; callers
//   keep the pointer as long as they like and never free it. Handles made through the table are
//   the caller's (module_abi.h).
// - Thread: see "Thread" below; module_candidates() and the installed_module_folder*() functions
//   are pure.
//
// Where the module is looked for, in this order (module_candidates()):
//   1. $PERCORE_CRYPTO_MODULE, when set and not empty: that file and nothing else (tests, operators);
//   2. beside the running binary (the folder of /proc/self/exe): <bin>/percore-crypto.so;
//   3. the build tree's layout, where the server is <build>/shards/percore and the module
//      <build>/crypto/percore-crypto.so: <bin>/../crypto/percore-crypto.so;
//   4. the installed layout, relative to the binary: <bin>/<the module folder seen from bindir>,
//      e.g. <bin>/../lib/x86_64-linux-gnu/percore/percore-crypto.so (meson's bindir and libdir,
//      compiled in as PERCORE_CRYPTO_FROM_BINDIR; none when either lies outside the prefix), so a
//      tree installed with `meson install --destdir`, or moved, finds its own module;
//   5. the installed library folder, <prefix>/<libdir>/percore/percore-crypto.so (meson's libdir,
//      compiled in as PERCORE_CRYPTO_LIBDIR). Where the binary is where it was installed, 4 and 5
//      are the same path, tried once.
// The first candidate that exists is opened (dlopen, RTLD_NOW | RTLD_LOCAL) and must export
// percore_crypto_v1_get() returning a table of ABI version 1 (and at least the size this server was
// built with); a candidate that exists but cannot be opened or is refused ends the search with that
// error rather than silently using a later one. A loaded module stays loaded until the process ends.
//
// Errors are values (errc::module_not_found when no candidate exists, errc::module_refused when
// one exists but is refused); their message() is one line for the operator that names every path tried, e.g.
//   crypto module percore-crypto.so not found (tried /opt/bin/percore-crypto.so,
//   /opt/crypto/percore-crypto.so, /opt/lib/x86_64-linux-gnu/percore/percore-crypto.so,
//   /usr/lib/x86_64-linux-gnu/percore/percore-crypto.so); set PERCORE_CRYPTO_MODULE to its path
// The caller adds what needed it ("--tls-listen: ...") and exits 1.
//
// Thread: load_crypto_module() may be called from any thread, any number of times; the search runs
// once and its result (success or error) is kept. load_crypto_module_from() runs a new search each
// call (tests).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "crypto/module_abi.h"
#include "crypto/result.hpp"

namespace percore::crypto {

inline constexpr std::string_view module_file_name = "percore-crypto.so";
inline constexpr std::string_view module_path_variable = "PERCORE_CRYPTO_MODULE";

using crypto_api = percore_crypto_v1;

// The module, found and opened once per process; the same answer on every call. A table it
// returns is never null and has this ABI version and at least this size.
result<const crypto_api*> load_crypto_module();

// The paths load_crypto_module() tries, given the running binary's path (/proc/self/exe), the value
// of $PERCORE_CRYPTO_MODULE (nullptr when unset), the installed module folder, and that folder seen
// from the binary's folder (a relative path such as "../lib/percore"; empty: no such candidate).
std::vector<std::string> module_candidates(std::string_view executable_path, const char* module_variable,
                                           std::string_view installed_folder,
                                           std::string_view folder_from_binary);

// The folder the module is installed into (PERCORE_CRYPTO_LIBDIR).
std::string_view installed_module_folder();

// That folder relative to the installed binary's folder (PERCORE_CRYPTO_FROM_BINDIR), e.g.
// "../lib/x86_64-linux-gnu/percore"; empty when bindir or libdir lies outside the prefix.
std::string_view installed_module_folder_from_binary();

// Opens the first of `candidates` that exists, as described above. Not cached.
// REQUIRES: no candidate is empty.
result<const crypto_api*> load_crypto_module_from(const std::vector<std::string>& candidates);

}  // namespace percore::crypto
