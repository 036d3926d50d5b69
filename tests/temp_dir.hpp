// temp_dir: a fresh directory under /tmp for a test that needs real files, removed with
// everything in it when the test ends.
#pragma once

#include <doctest.h>

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace percore::test {

class temp_dir {
public:
    temp_dir() {
        char name[] = "/tmp/percore-test-XXXXXX";
        REQUIRE(::mkdtemp(name) != nullptr);
        path_ = name;
    }
    ~temp_dir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace percore::test
