// Replays the committed fuzz inputs through the fuzz targets' own functions, built without
// libFuzzer (and with whatever compiler and sanitizers this build uses): every file of
// tests/fuzz/corpus/<target>/ (the seeds) and tests/fuzz/regressions/<target>/ (inputs that once
// broke something; see tests/fuzz/README.md). A broken invariant is reported with the file's name.
#include <doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.hpp"

#ifndef PERCORE_FUZZ_DIR
#error "PERCORE_FUZZ_DIR: the tests/fuzz folder, set by tests/fuzz/meson.build"
#endif

namespace {

namespace fs = std::filesystem;

struct invariant_broken : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_failure(const std::string& what) { throw invariant_broken(what); }

std::vector<fs::path> inputs_of(const std::string& target) {
    std::vector<fs::path> out;
    for (const char* kind : {"corpus", "regressions"}) {
        const fs::path folder = fs::path(PERCORE_FUZZ_DIR) / kind / target;
        if (!fs::is_directory(folder)) continue;
        for (const auto& entry : fs::directory_iterator(folder))
            if (entry.is_regular_file() && entry.path().filename().string().front() != '.') out.push_back(entry.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Runs every input of `target`; returns how many there were.
std::size_t replay(const std::string& target, int (*one_input)(const std::uint8_t*, std::size_t)) {
    percore::fuzz::failure_hook() = &throw_failure;
    const auto files = inputs_of(target);
    for (const fs::path& path : files) {
        std::ifstream in(path, std::ios::binary);
        REQUIRE_MESSAGE(in.good(), "cannot read " << path.string());
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        try {
            one_input(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        } catch (const invariant_broken& e) {
            const std::string message = path.string() + ":\n" + e.what();
            FAIL_CHECK(message);
        }
    }
    percore::fuzz::failure_hook() = nullptr;
    MESSAGE(target << ": " << files.size() << " inputs replayed");
    return files.size();
}

}  // namespace

TEST_CASE("every committed request parser input keeps the parser and the chunked decoder split-invariant") {
    CHECK(replay("request_parser", &percore::fuzz::request_parser_one_input) > 0);
}

TEST_CASE("every committed list query input routes within the documented limits, as the query says") {
    CHECK(replay("list_query", &percore::fuzz::list_query_one_input) > 0);
}

TEST_CASE("every committed recovery input is refused or recovers only written documents") {
    CHECK(replay("recovery", &percore::fuzz::recovery_one_input) > 0);
}

TEST_CASE("every committed administration input keeps the token and JSON readers within their rules") {
    CHECK(replay("admin_input", &percore::fuzz::admin_input_one_input) > 0);
}

TEST_CASE("every committed replication page is refused or accepted with only changes within the rules") {
    CHECK(replay("follower_page", &percore::fuzz::follower_page_one_input) > 0);
}
