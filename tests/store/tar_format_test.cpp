// The tar header of a backup (store/tar_format.hpp): its bytes, and what the reader refuses.
#include <doctest.h>

#include <cstring>
#include <string>
#include <string_view>

#include "store/tar_format.hpp"
#include "tests/store/tar_test_util.hpp"

using namespace percore::store;
using namespace percore::store::test;

namespace {

std::string_view field(const char* block, std::size_t offset, std::size_t width) { return {block + offset, width}; }

tar_header file_header(std::string name, std::uint64_t size) {
    return tar_header{std::move(name), tar_type::file, 0644, size, 0};
}

}  // namespace

TEST_CASE("a file's header holds the ustar fields at their offsets and the checksum POSIX defines") {
    char block[tar_block_bytes];
    encode_tar_header(file_header("FORMAT", 60), block);
    CHECK(field(block, 0, 7) == std::string_view("FORMAT\0", 7));
    CHECK(field(block, 100, 8) == std::string_view("0000644\0", 8));
    CHECK(field(block, 108, 8) == std::string_view("0000000\0", 8));
    CHECK(field(block, 116, 8) == std::string_view("0000000\0", 8));
    CHECK(field(block, 124, 12) == std::string_view("00000000074\0", 12));  // 60
    CHECK(field(block, 136, 12) == std::string_view("00000000000\0", 12));
    // the sum of the 512 bytes with the checksum field as 8 spaces: 3505 = octal 6661
    CHECK(field(block, 148, 8) == std::string_view("006661\0 ", 8));
    CHECK(block[156] == '0');
    CHECK(field(block, 257, 8) == std::string_view("ustar\0" "00", 8));
    CHECK(field(block, 345, 155) == std::string(155, '\0'));
}

TEST_CASE("a directory's header names it with a trailing slash, type 5 and size 0") {
    char block[tar_block_bytes];
    encode_tar_header(tar_header{"layout-1", tar_type::directory, 0755, 0, 0}, block);
    CHECK(field(block, 0, 10) == std::string_view("layout-1/\0", 10));
    CHECK(block[156] == '5');
    CHECK(field(block, 100, 8) == std::string_view("0000755\0", 8));
}

TEST_CASE("a header decodes to what was encoded") {
    char block[tar_block_bytes];
    tar_header h{"layout-1/shard-002/0000000000000003.seg", tar_type::file, 0600, 67'108'900, 1'780'000'000};
    encode_tar_header(h, block);
    auto back = decode_tar_header(block);
    REQUIRE(back);
    CHECK(back->name == h.name);
    CHECK(back->type == tar_type::file);
    CHECK(back->mode == 0600);
    CHECK(back->size == h.size);
    CHECK(back->mtime == h.mtime);

    encode_tar_header(tar_header{"layout-1/shard-002", tar_type::directory, 0755, 0, 0}, block);
    back = decode_tar_header(block);
    REQUIRE(back);
    CHECK(back->name == "layout-1/shard-002");
    CHECK(back->type == tar_type::directory);
}

TEST_CASE("the largest size octal holds round-trips") {
    char block[tar_block_bytes];
    encode_tar_header(file_header("big", max_tar_entry_bytes), block);
    CHECK(field(block, 124, 12) == std::string_view("77777777777\0", 12));
    auto back = decode_tar_header(block);
    REQUIRE(back);
    CHECK(back->size == max_tar_entry_bytes);
}

TEST_CASE("the reader joins the ustar prefix and drops a leading ./ as GNU tar writes it") {
    auto block = edited_header(file_header("0000000000000001.seg", 0), [](std::string& b) {
        std::memcpy(b.data() + 345, "layout-1/shard-000", 18);
    });
    auto h = decode_tar_header(block.data());
    REQUIRE(h);
    CHECK(h->name == "layout-1/shard-000/0000000000000001.seg");
    block = edited_header(file_header("./FORMAT", 0), [](std::string&) {});
    h = decode_tar_header(block.data());
    REQUIRE(h);
    CHECK(h->name == "FORMAT");
}

TEST_CASE("the reader refuses a header whose checksum does not match") {
    char block[tar_block_bytes];
    encode_tar_header(file_header("FORMAT", 60), block);
    block[10] = 'x';
    auto h = decode_tar_header(block);
    REQUIRE(!h);
    CHECK(h.error().find("checksum") != std::string::npos);
}

TEST_CASE("the reader refuses a path with a .. component") {
    auto block = header_named("../x", 1);
    auto h = decode_tar_header(block.data());
    REQUIRE(!h);
    CHECK(h.error().find("not a relative path") != std::string::npos);
    CHECK(!decode_tar_header(header_named("layout-1/../../x", 1).data()));
}

TEST_CASE("the reader refuses an absolute path") {
    CHECK(!decode_tar_header(header_named("/etc/passwd", 1).data()));
}

TEST_CASE("the reader refuses a symbolic link, a hard link and a GNU long name") {
    for (char type : {'2', '1', 'L', 'x', '3'}) {
        CAPTURE(type);
        auto block = edited_header(file_header("layout-1", 0), [type](std::string& b) { b[156] = type; });
        auto h = decode_tar_header(block.data());
        REQUIRE(!h);
        CHECK(h.error().find("not a regular file or a directory") != std::string::npos);
    }
}

TEST_CASE("the reader refuses a size in GNU's base-256") {
    auto block = edited_header(file_header("x", 0), [](std::string& b) {
        std::memset(b.data() + 124, 0, 12);
        b[124] = static_cast<char>(0x80);
        b[135] = 1;
    });
    CHECK(!decode_tar_header(block.data()));
}

TEST_CASE("padding fills an entry's bytes to the next block") {
    CHECK(tar_padding(0) == 0);
    CHECK(tar_padding(1) == 511);
    CHECK(tar_padding(512) == 0);
    CHECK(tar_padding(1000) == 24);
}

TEST_CASE("a safe relative path has no empty, . or .. component") {
    CHECK(safe_relative_path("layout-1/shard-000/feed_floor"));
    CHECK(!safe_relative_path(""));
    CHECK(!safe_relative_path("/FORMAT"));
    CHECK(!safe_relative_path("a//b"));
    CHECK(!safe_relative_path("a/./b"));
    CHECK(!safe_relative_path("a/.."));
    CHECK(!safe_relative_path("a/"));
}
