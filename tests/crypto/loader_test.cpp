// The loader: where it looks, what it says when the module is missing or wrong.
#include <doctest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "crypto_test_support.hpp"

using namespace percore::crypto;
using namespace percore::crypto::testing;

namespace {

std::string required_variable(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr) FAIL(name << " is not set (meson sets it for this test)");
    return value;
}

}  // namespace

TEST_CASE("PERCORE_CRYPTO_MODULE names the module to load") {
    auto loaded = load_crypto_module();
    REQUIRE_MESSAGE(loaded.has_value(), (loaded ? std::string() : text(loaded.error())));
    const crypto_api& table = **loaded;
    CHECK(table.abi_version == PERCORE_CRYPTO_ABI_VERSION);
    CHECK(table.struct_size >= sizeof(crypto_api));
    CHECK(std::string(table.library_version()).rfind("OpenSSL 3.", 0) == 0);
    MESSAGE("module uses " << table.library_version());
}

TEST_CASE("the production module carries no test entries; the test build adds them as a second table") {
    auto loaded = load_crypto_module();
    REQUIRE(loaded.has_value());
    CHECK((*loaded)->struct_size == sizeof(crypto_api));  // the table ends with the server's entries
    void* production = ::dlopen(required_variable("PERCORE_CRYPTO_MODULE").c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    REQUIRE(production != nullptr);
    CHECK(::dlsym(production, PERCORE_CRYPTO_TEST_ENTRY_SYMBOL) == nullptr);
    ::dlclose(production);  // drops only the reference RTLD_NOLOAD added
    CHECK(test_api().struct_size == sizeof(crypto_api));
    CHECK(&test_api() != *loaded);  // a module of its own
    CHECK(test_entries().struct_size >= sizeof(percore_crypto_test_v1));
    bool has_client = test_entries().test_tls_client_new != nullptr;
    CHECK(has_client);
}

TEST_CASE("loading twice gives the same table") {
    auto first = load_crypto_module();
    auto second = load_crypto_module();
    REQUIRE(first.has_value());
    REQUIRE(second.has_value());
    CHECK(*first == *second);
    auto again = load_crypto_module_from({required_variable("PERCORE_CRYPTO_MODULE")});
    REQUIRE(again.has_value());
    CHECK(*again == *first);  // dlopen of a loaded module returns the same one
}

TEST_CASE("with PERCORE_CRYPTO_MODULE set only that path is tried") {
    CHECK(module_candidates("/opt/percore/bin/percore", "/somewhere/percore-crypto.so", "/usr/lib/percore",
                            "../lib/percore") == std::vector<std::string>{"/somewhere/percore-crypto.so"});
}

TEST_CASE("without PERCORE_CRYPTO_MODULE the module is looked for beside the binary, in ../crypto, in the "
          "installed layout relative to the binary, then in the installed folder") {
    CHECK(module_candidates("/opt/percore/bin/percore", nullptr, "/usr/lib/x86_64-linux-gnu/percore",
                            "../lib/x86_64-linux-gnu/percore") ==
          std::vector<std::string>{"/opt/percore/bin/percore-crypto.so", "/opt/percore/crypto/percore-crypto.so",
                                   "/opt/percore/lib/x86_64-linux-gnu/percore/percore-crypto.so",
                                   "/usr/lib/x86_64-linux-gnu/percore/percore-crypto.so"});
    CHECK(module_candidates("/work/build/shards/percore", "", "/usr/local/lib/percore", "../lib/percore") ==
          std::vector<std::string>{"/work/build/shards/percore-crypto.so", "/work/build/crypto/percore-crypto.so",
                                   "/work/build/lib/percore/percore-crypto.so",
                                   "/usr/local/lib/percore/percore-crypto.so"});
}

TEST_CASE("a binary where it was installed tries the installed folder once") {
    CHECK(module_candidates("/usr/bin/percore", nullptr, "/usr/lib/aarch64-linux-gnu/percore",
                            "../lib/aarch64-linux-gnu/percore") ==
          std::vector<std::string>{"/usr/bin/percore-crypto.so", "/usr/crypto/percore-crypto.so",
                                   "/usr/lib/aarch64-linux-gnu/percore/percore-crypto.so"});
    CHECK(module_candidates("/percore", nullptr, "/lib/percore", "../lib/percore") ==
          std::vector<std::string>{"/percore-crypto.so", "/crypto/percore-crypto.so", "/lib/percore/percore-crypto.so"});
}

TEST_CASE("the relative candidate follows every '..' of a deeper bindir and is left out when empty") {
    CHECK(module_candidates("/opt/p/sbin/tools/percore", nullptr, "/opt/p/lib/percore", "../../lib/./percore") ==
          std::vector<std::string>{"/opt/p/sbin/tools/percore-crypto.so", "/opt/p/sbin/crypto/percore-crypto.so",
                                   "/opt/p/lib/percore/percore-crypto.so"});
    CHECK(module_candidates("/opt/p/bin/percore", nullptr, "/elsewhere/percore", "") ==
          std::vector<std::string>{"/opt/p/bin/percore-crypto.so", "/opt/p/crypto/percore-crypto.so",
                                   "/elsewhere/percore/percore-crypto.so"});
}

TEST_CASE("the installed folders are the ones meson was configured with") {
    std::string folder(installed_module_folder());
    CHECK(folder.front() == '/');
    CHECK(folder.ends_with("/percore"));
    std::string relative(installed_module_folder_from_binary());
    CHECK(relative.starts_with("../"));  // bindir is one folder or more below the prefix
    CHECK(relative.ends_with("/percore"));
    CHECK(folder.ends_with(relative.substr(relative.rfind("../") + 2)));  // the same libdir, seen from bindir
}

TEST_CASE("the server's build layout finds the module in ../crypto") {
    // The server is <build>/shards/percore; the module is built as <build>/crypto/percore-crypto.so.
    std::string build = required_variable("PERCORE_TEST_BUILD_ROOT");
    auto candidates = module_candidates(build + "/shards/percore", nullptr, "/nonexistent/percore", "");
    auto loaded = load_crypto_module_from(candidates);
    REQUIRE_MESSAGE(loaded.has_value(), (loaded ? std::string() : text(loaded.error())));
    CHECK((*loaded)->abi_version == PERCORE_CRYPTO_ABI_VERSION);
}

TEST_CASE("an installed tree that was moved finds its module relative to its binary") {
    temp_dir dir;
    std::filesystem::create_directories(dir.file("usr/bin"));
    std::filesystem::create_directories(dir.file("usr/lib/percore"));
    std::filesystem::copy_file(required_variable("PERCORE_CRYPTO_MODULE"), dir.file("usr/lib/percore/percore-crypto.so"));
    auto candidates = module_candidates(dir.file("usr/bin/percore"), nullptr, "/nonexistent/lib/percore", "../lib/percore");
    REQUIRE(candidates.size() == 4);
    CHECK(candidates[2] == dir.file("usr/lib/percore/percore-crypto.so"));
    auto loaded = load_crypto_module_from(candidates);
    REQUIRE_MESSAGE(loaded.has_value(), (loaded ? std::string() : text(loaded.error())));
    CHECK((*loaded)->abi_version == PERCORE_CRYPTO_ABI_VERSION);
}

TEST_CASE("a missing module is an error naming every path tried") {
    auto loaded = load_crypto_module_from(
        module_candidates("/nonexistent/bin/percore", nullptr, "/nonexistent/lib/percore", "../opt/percore"));
    REQUIRE_FALSE(loaded.has_value());
    CHECK(loaded.error() == errc::module_not_found);
    CHECK(text(loaded.error()) ==
          "crypto module percore-crypto.so not found (tried /nonexistent/bin/percore-crypto.so, "
          "/nonexistent/crypto/percore-crypto.so, /nonexistent/opt/percore/percore-crypto.so, "
          "/nonexistent/lib/percore/percore-crypto.so); set PERCORE_CRYPTO_MODULE to its path");
}

TEST_CASE("a missing PERCORE_CRYPTO_MODULE path is an error naming it") {
    auto loaded = load_crypto_module_from(module_candidates("/x/percore", "/nonexistent/percore-crypto.so", "/y", "../y"));
    REQUIRE_FALSE(loaded.has_value());
    CHECK(text(loaded.error()) == "crypto module /nonexistent/percore-crypto.so not found");
}

TEST_CASE("a file that is not a shared library is refused with dlopen's reason") {
    temp_dir dir;
    write_file(dir.file("percore-crypto.so"), "not an ELF file\n");
    auto loaded = load_crypto_module_from({dir.file("percore-crypto.so")});
    REQUIRE_FALSE(loaded.has_value());
    CHECK(text(loaded.error()).rfind("cannot load crypto module " + dir.file("percore-crypto.so") + ": ", 0) == 0);
    MESSAGE(text(loaded.error()));
}

TEST_CASE("a module of another ABI version is refused") {
    std::string fake = required_variable("PERCORE_TEST_FAKE_MODULE");
    auto loaded = load_crypto_module_from({fake});
    REQUIRE_FALSE(loaded.has_value());
    CHECK(loaded.error() == errc::module_refused);
    CHECK(text(loaded.error()) == "crypto module " + fake + " has ABI version 2; this percore needs version 1");
}

TEST_CASE("a shared library without the entry point is refused") {
    // The C library: a real shared library that every process has, without percore's symbol.
    std::string libc = run_command("ldconfig -p 2>/dev/null | awk '/libc.so.6 .*x86-64|libc.so.6 .*AArch64/ {print $NF; exit}'");
    while (!libc.empty() && (libc.back() == '\n' || libc.back() == ' ')) libc.pop_back();
    if (libc.empty()) return;  // no ldconfig cache here
    auto loaded = load_crypto_module_from({libc});
    REQUIRE_FALSE(loaded.has_value());
    CHECK(text(loaded.error()) == libc + " is not a percore crypto module (it has no percore_crypto_v1_get)");
}

TEST_CASE("an error reads as its text, or as its code's text when it has none") {
    error with_text(errc::module_not_found, "crypto module /x not found");
    CHECK(with_text == errc::module_not_found);
    CHECK(text(with_text) == "crypto module /x not found");
    CHECK("--tls-listen: " + with_text == "--tls-listen: crypto module /x not found");
    error bare(errc::authentication_failed);
    CHECK(text(bare) == std::string(to_string(errc::authentication_failed)));
    result<int> failed = std::unexpected(bare);
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error() == errc::authentication_failed);
    result<int> fine = 7;
    CHECK(fine.value() == 7);
}
