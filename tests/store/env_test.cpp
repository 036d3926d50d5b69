#include <doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/data_directory.hpp"
#include "store/env.hpp"
#include "tests/store/fault_env.hpp"
#include "tests/temp_dir.hpp"

using namespace percore::store;
using percore::store::testing::fault_env;
using percore::store::testing::fault_op;

namespace {

std::span<const char> bytes_of(std::string_view s) { return {s.data(), s.size()}; }

using percore::test::temp_dir;

std::string read_whole(env& e, const std::string& path) {
    auto f = e.open_readable(path);
    REQUIRE(f.has_value());
    auto size = (*f)->size();
    REQUIRE(size.has_value());
    std::string out(*size, '\0');
    auto n = (*f)->read_at(0, std::span<char>(out.data(), out.size()));
    REQUIRE(n.has_value());
    CHECK(*n == out.size());
    return out;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
    std::ranges::sort(v);
    return v;
}

void append_text(writable_file& f, std::string_view s) { REQUIRE(f.append(bytes_of(s)).has_value()); }

}  // namespace

// posix_env

TEST_CASE("posix_env appends, syncs and reads back at any offset") {
    temp_dir dir;
    auto w = posix_env().open_writable(dir / "f");
    REQUIRE(w.has_value());
    CHECK((*w)->size() == 0);
    append_text(**w, "hello ");
    append_text(**w, "world");
    CHECK((*w)->size() == 11);
    REQUIRE((*w)->sync().has_value());

    auto r = posix_env().open_readable(dir / "f");
    REQUIRE(r.has_value());
    CHECK((*r)->descriptor() >= 0);
    CHECK((*r)->size().value() == 11);
    char buf[5];
    CHECK((*r)->read_at(6, buf).value() == 5);
    CHECK(std::string_view(buf, 5) == "world");
    CHECK((*r)->read_at(8, buf).value() == 3);
    CHECK((*r)->read_at(100, buf).value() == 0);
}

TEST_CASE("posix_env reopening a file for writing appends at its end") {
    temp_dir dir;
    append_text(*posix_env().open_writable(dir / "f").value(), "abc");
    auto w = posix_env().open_writable(dir / "f");
    REQUIRE(w.has_value());
    CHECK((*w)->size() == 3);
    append_text(**w, "def");
    CHECK(read_whole(posix_env(), dir / "f") == "abcdef");
}

TEST_CASE("posix_env truncate shortens the file and moves the append position") {
    temp_dir dir;
    auto w = posix_env().open_writable(dir / "f").value();
    append_text(*w, "0123456789");
    REQUIRE(w->truncate(4).has_value());
    CHECK(w->size() == 4);
    append_text(*w, "xy");
    CHECK(read_whole(posix_env(), dir / "f") == "0123xy");
}

TEST_CASE("posix_env lists the names in a directory without . and ..") {
    temp_dir dir;
    REQUIRE(posix_env().create_directory(dir / "sub").has_value());
    append_text(*posix_env().open_writable(dir / "a").value(), "1");
    append_text(*posix_env().open_writable(dir / "b").value(), "2");
    CHECK(sorted(posix_env().list(dir.path()).value()) == std::vector<std::string>{"a", "b", "sub"});
    CHECK(posix_env().list(dir / "sub").value().empty());
    CHECK(posix_env().list(dir / "missing").error() == ENOENT);
}

TEST_CASE("posix_env rename replaces the target") {
    temp_dir dir;
    append_text(*posix_env().open_writable(dir / "new").value(), "new");
    append_text(*posix_env().open_writable(dir / "old").value(), "old");
    REQUIRE(posix_env().rename(dir / "new", dir / "old").has_value());
    CHECK_FALSE(posix_env().exists(dir / "new"));
    CHECK(read_whole(posix_env(), dir / "old") == "new");
    CHECK(posix_env().rename(dir / "missing", dir / "x").error() == ENOENT);
}

TEST_CASE("posix_env removes files and empty directories, not full ones") {
    temp_dir dir;
    REQUIRE(posix_env().create_directory(dir / "d").has_value());
    append_text(*posix_env().open_writable(dir / "d/f").value(), "x");
    CHECK(posix_env().remove(dir / "d").error() == ENOTEMPTY);
    REQUIRE(posix_env().remove(dir / "d/f").has_value());
    CHECK_FALSE(posix_env().exists(dir / "d/f"));
    REQUIRE(posix_env().remove(dir / "d").has_value());
    CHECK_FALSE(posix_env().exists(dir / "d"));
    CHECK(posix_env().remove(dir / "d").error() == ENOENT);
}

TEST_CASE("posix_env create_directory succeeds when the directory exists and fails over a file") {
    temp_dir dir;
    REQUIRE(posix_env().create_directory(dir / "d").has_value());
    REQUIRE(posix_env().create_directory(dir / "d").has_value());
    append_text(*posix_env().open_writable(dir / "f").value(), "x");
    CHECK_FALSE(posix_env().create_directory(dir / "f").has_value());
    CHECK(posix_env().create_directory(dir / "no/such").error() == ENOENT);
}

TEST_CASE("posix_env syncs a directory and reports a missing one") {
    temp_dir dir;
    CHECK(posix_env().sync_directory(dir.path()).has_value());
    CHECK(posix_env().sync_directory(dir / "missing").error() == ENOENT);
}

TEST_CASE("posix_env opening a missing file for reading is ENOENT") {
    temp_dir dir;
    CHECK(posix_env().open_readable(dir / "missing").error() == ENOENT);
    CHECK(posix_env().open_writable(dir / "no/such").error() == ENOENT);
}

TEST_CASE("posix_env appends a value larger than one write in full") {
    temp_dir dir;
    std::string big(24u << 20, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
    auto w = posix_env().open_writable(dir / "big").value();
    append_text(*w, big);
    REQUIRE(w->sync().has_value());
    CHECK(read_whole(posix_env(), dir / "big") == big);
}

TEST_CASE("posix_env write_at overwrites in place and moves the append position only past the end") {
    temp_dir dir;
    auto w = posix_env().open_writable(dir / "f").value();
    append_text(*w, "0123456789");
    REQUIRE(w->write_at(2, bytes_of("ab")).has_value());
    CHECK(w->size() == 10);
    REQUIRE(w->write_at(8, bytes_of("xyz")).has_value());
    CHECK(w->size() == 11);
    append_text(*w, "!");
    REQUIRE(w->write_at(14, bytes_of("end")).has_value());
    CHECK(w->size() == 17);
    CHECK(read_whole(posix_env(), dir / "f") == std::string("01ab4567xyz!\0\0end", 17));
}

TEST_CASE("posix_env zero_fill writes zeros up to a size, then write_at overwrites them without growing the file") {
    temp_dir dir;
    auto w = posix_env().open_writable(dir / "f").value();
    append_text(*w, "head");
    const std::uint64_t size = (3u << 20) + 5;  // more than one chunk of zeros
    REQUIRE(w->zero_fill(size).has_value());
    CHECK(w->size() == size);
    REQUIRE(w->sync().has_value());
    REQUIRE(w->zero_fill(10).has_value());  // already that long: nothing
    CHECK(w->size() == size);
    REQUIRE(w->write_at(4, bytes_of("body")).has_value());
    CHECK(w->size() == size);
    std::string expected = "headbody";
    expected.resize(size, '\0');
    CHECK(read_whole(posix_env(), dir / "f") == expected);
    struct stat st{};
    REQUIRE(::stat((dir / "f").c_str(), &st) == 0);
    CHECK(static_cast<std::uint64_t>(st.st_blocks) * 512 >= size);  // written blocks, not a hole
}

TEST_CASE("a writable_file without write_at support writes only at its append position") {
    class append_only final : public writable_file {
    public:
        io_result<void> append(std::span<const char> data) override {
            bytes.append(data.data(), data.size());
            return {};
        }
        io_result<void> sync() override { return {}; }
        io_result<void> truncate(std::uint64_t size) override {
            bytes.resize(size);
            return {};
        }
        std::uint64_t size() const override { return bytes.size(); }
        std::string bytes;
    } f;
    REQUIRE(f.write_at(0, bytes_of("abc")).has_value());
    REQUIRE(f.write_at(3, bytes_of("def")).has_value());
    CHECK(f.bytes == "abcdef");
    CHECK(f.write_at(1, bytes_of("x")).error() == ENOTSUP);
    CHECK(f.write_at(9, bytes_of("x")).error() == ENOTSUP);
    CHECK(f.zero_fill(100).error() == ENOTSUP);
    CHECK(f.bytes == "abcdef");
}

// fault_env

TEST_CASE("fault_env a power cut drops unsynced bytes and keeps synced ones") {
    fault_env e;
    REQUIRE(e.create_directory("/d").has_value());
    REQUIRE(e.sync_directory("/").has_value());
    auto w = e.open_writable("/d/f").value();
    REQUIRE(e.sync_directory("/d").has_value());
    append_text(*w, "synced.");
    REQUIRE(w->sync().has_value());
    append_text(*w, "unsynced");
    CHECK(e.contents("/d/f") == "synced.unsynced");
    CHECK(e.durable_contents("/d/f") == "synced.");
    e.power_cut_keep(0);
    CHECK(e.contents("/d/f") == "synced.");
    CHECK(read_whole(e, "/d/f") == "synced.");
}

TEST_CASE("fault_env power_cut_keep tears each file at the kept count") {
    for (std::uint64_t keep : {0u, 1u, 3u, 8u, 100u}) {
        fault_env e;
        e.write_file("/f", "base");
        auto w = e.open_writable("/f").value();
        append_text(*w, "12345678");
        e.power_cut_keep(keep);
        CHECK(e.contents("/f") == "base" + std::string("12345678").substr(0, keep));
        CHECK(e.durable_contents("/f") == e.contents("/f"));
    }
}

TEST_CASE("fault_env power_cut keeps a random prefix of the unsynced bytes, sometimes none and sometimes all") {
    std::set<std::size_t> lengths;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
        fault_env e;
        e.write_file("/f", "base");
        auto w = e.open_writable("/f").value();
        append_text(*w, "0123456789abcdef");
        e.power_cut(seed);
        const std::string after = e.contents("/f").value();
        REQUIRE(after.size() >= 4);
        CHECK(std::string("base0123456789abcdef").starts_with(after));
        lengths.insert(after.size() - 4);
    }
    CHECK(lengths.contains(0));
    CHECK(lengths.contains(16));
    CHECK(lengths.size() > 5);
}

TEST_CASE("fault_env power_cut with seeds is reproducible") {
    auto run = [](std::uint64_t seed) {
        fault_env e;
        e.write_file("/a", "x");
        append_text(*e.open_writable("/a").value(), std::string(1000, 'y'));
        append_text(*e.open_writable("/b").value(), std::string(1000, 'z'));
        e.power_cut(seed);
        return std::pair(e.contents("/a"), e.contents("/b"));
    };
    CHECK(run(42) == run(42));
}

TEST_CASE("fault_env an unsynced create is undone by a power cut and a synced one is kept") {
    fault_env e;
    append_text(*e.open_writable("/kept").value(), "");
    REQUIRE(e.sync_directory("/").has_value());
    auto w = e.open_writable("/lost").value();
    append_text(*w, "data");
    REQUIRE(w->sync().has_value());
    CHECK(e.durable_files() == std::vector<std::string>{"/kept"});
    e.power_cut_keep(1000);
    CHECK(e.exists("/kept"));
    CHECK_FALSE(e.exists("/lost"));
    CHECK(e.files() == std::vector<std::string>{"/kept"});
}

TEST_CASE("fault_env an unsynced remove may be undone and a synced one is not") {
    fault_env e;
    e.write_file("/d/a", "a");
    e.write_file("/d/b", "b");
    REQUIRE(e.remove("/d/a").has_value());
    REQUIRE(e.remove("/d/b").has_value());
    REQUIRE(e.sync_directory("/d").has_value());
    e.write_file("/d/c", "c");
    REQUIRE(e.remove("/d/c").has_value());
    e.power_cut_keep(0);
    CHECK(e.list("/d").value() == std::vector<std::string>{"c"});
}

TEST_CASE("fault_env a pending rename survives a power cut whole or not at all") {
    std::set<std::pair<bool, std::string>> outcomes;
    for (std::uint64_t seed = 0; seed < 64; ++seed) {
        fault_env e;
        e.write_file("/d/CURRENT", "old");
        e.write_file("/d/CURRENT.tmp", "new");
        REQUIRE(e.rename("/d/CURRENT.tmp", "/d/CURRENT").has_value());
        e.power_cut(seed);
        const bool tmp = e.exists("/d/CURRENT.tmp");
        const std::string current = e.contents("/d/CURRENT").value();
        CHECK((tmp ? current == "old" : current == "new"));
        outcomes.emplace(tmp, current);
    }
    CHECK(outcomes.size() == 2);
}

TEST_CASE("fault_env a renamed directory moves its files with it") {
    fault_env e;
    e.write_file("/layout-new/shard-000/1.seg", "seg");
    e.write_file("/layout-new-2", "file sorting between the directory and its children");
    REQUIRE(e.rename("/layout-new", "/layout").has_value());
    CHECK(e.contents("/layout/shard-000/1.seg") == "seg");
    CHECK_FALSE(e.exists("/layout-new/shard-000"));
    CHECK(e.exists("/layout-new-2"));
    REQUIRE(e.sync_directory("/").has_value());
    e.power_cut_keep(0);
    CHECK(e.contents("/layout/shard-000/1.seg") == "seg");
}

TEST_CASE("fault_env syncing a directory commits the creation of that directory too") {
    fault_env e;
    REQUIRE(e.create_directory("/d").has_value());
    append_text(*e.open_writable("/d/f").value(), "");
    REQUIRE(e.sync_directory("/d").has_value());
    e.power_cut_keep(0);
    CHECK(e.exists("/d/f"));
}

TEST_CASE("fault_env file objects opened before a power cut fail with EIO") {
    fault_env e;
    e.write_file("/f", "abc");
    auto w = e.open_writable("/f").value();
    auto r = e.open_readable("/f").value();
    e.power_cut(1);
    CHECK(w->append(bytes_of("x")).error() == EIO);
    CHECK(w->sync().error() == EIO);
    CHECK(w->truncate(0).error() == EIO);
    char buf[3];
    CHECK(r->read_at(0, buf).error() == EIO);
    CHECK(r->size().error() == EIO);
    CHECK(read_whole(e, "/f") == "abc");
}

TEST_CASE("fault_env fail_next fails exactly the next count calls of that operation") {
    fault_env e;
    auto w = e.open_writable("/f").value();
    e.fail_next(fault_op::append, EIO, 2);
    CHECK(w->append(bytes_of("a")).error() == EIO);
    CHECK(w->append(bytes_of("b")).error() == EIO);
    CHECK(w->append(bytes_of("c")).has_value());
    CHECK(e.contents("/f") == "c");
    CHECK(e.calls(fault_op::append) == 3);

    e.fail_next(fault_op::open, EMFILE);
    CHECK(e.open_readable("/f").error() == EMFILE);
    CHECK(e.open_readable("/f").has_value());
    e.fail_next(fault_op::rename, EXDEV);
    CHECK(e.rename("/f", "/g").error() == EXDEV);
    e.fail_next(fault_op::remove, EACCES);
    CHECK(e.remove("/f").error() == EACCES);
    e.fail_next(fault_op::truncate, EIO);
    CHECK(w->truncate(0).error() == EIO);
    e.fail_next(fault_op::sync_directory, EIO);
    CHECK(e.sync_directory("/").error() == EIO);
    CHECK(e.sync_directory("/").has_value());
    CHECK(e.contents("/f") == "c");
}

TEST_CASE("fault_env a failed append with partial writes leaves a strict prefix of its data") {
    fault_env e(9);
    e.set_partial_failed_appends(true);
    auto w = e.open_writable("/f").value();
    append_text(*w, "head:");
    bool some_partial = false;
    for (int i = 0; i < 20; ++i) {
        REQUIRE(w->truncate(5).has_value());
        e.fail_next(fault_op::append, ENOSPC);
        CHECK(w->append(bytes_of("0123456789")).error() == ENOSPC);
        const std::string now = e.contents("/f").value();
        CHECK(now.size() < 15);
        CHECK(std::string("head:0123456789").starts_with(now));
        CHECK(w->size() == now.size());
        some_partial |= now.size() > 5;
    }
    CHECK(some_partial);
}

TEST_CASE("fault_env appends past the capacity fail with ENOSPC and write nothing") {
    fault_env e;
    e.write_file("/other", std::string(60, 'o'));
    e.set_capacity_bytes(100);
    auto w = e.open_writable("/f").value();
    CHECK(w->append(bytes_of(std::string(40, 'a'))).has_value());
    CHECK(w->append(bytes_of("b")).error() == ENOSPC);
    CHECK(e.contents("/f") == std::string(40, 'a'));
    CHECK(e.bytes_used() == 100);
    REQUIRE(w->truncate(30).has_value());
    CHECK(w->append(bytes_of("b")).has_value());
}

TEST_CASE("fault_env bytes of a failed sync never become durable as written") {
    fault_env e;
    e.write_file("/f", "ok:");
    auto w = e.open_writable("/f").value();
    append_text(*w, "lost");
    e.fail_next(fault_op::sync, EIO);
    CHECK(w->sync().error() == EIO);
    CHECK(e.contents("/f") == "ok:lost");
    CHECK(e.durable_contents("/f") == "ok:");
    append_text(*w, "+more");
    REQUIRE(w->sync().has_value());
    CHECK(e.durable_contents("/f") == std::string("ok:\0\0\0\0+more", 12));
    e.power_cut_keep(0);
    CHECK(e.contents("/f") == std::string("ok:\0\0\0\0+more", 12));
}

TEST_CASE("fault_env an unsynced truncate may be undone by a power cut") {
    std::set<std::string> outcomes;
    for (std::uint64_t seed = 0; seed < 32; ++seed) {
        fault_env e;
        e.write_file("/f", "0123456789");
        auto w = e.open_writable("/f").value();
        REQUIRE(w->truncate(4).has_value());
        e.power_cut(seed);
        outcomes.insert(e.contents("/f").value());
    }
    CHECK(outcomes == std::set<std::string>{"0123", "0123456789"});
}

TEST_CASE("fault_env a synced truncate is kept") {
    fault_env e;
    e.write_file("/f", "0123456789");
    auto w = e.open_writable("/f").value();
    REQUIRE(w->truncate(4).has_value());
    append_text(*w, "ab");
    REQUIRE(w->sync().has_value());
    e.power_cut(3);
    CHECK(e.contents("/f") == "0123ab");
}

TEST_CASE("fault_env zero-filled torn tails end the kept bytes in zeros") {
    bool zeros_seen = false;
    for (std::uint64_t seed = 0; seed < 64; ++seed) {
        fault_env e;
        e.set_zero_fill_torn_tails(true);
        e.write_file("/f", "base");
        append_text(*e.open_writable("/f").value(), "abcdefgh");
        e.power_cut(seed);
        const std::string after = e.contents("/f").value();
        REQUIRE(after.starts_with("base"));
        const auto data_end = after.find('\0');
        if (data_end != std::string::npos) {
            zeros_seen = true;
            CHECK(after.find_first_not_of('\0', data_end) == std::string::npos);
        }
        CHECK(std::string("base" "abcdefgh").starts_with(after.substr(0, data_end)));
    }
    CHECK(zeros_seen);
}

TEST_CASE("fault_env reports missing paths and directories like a file system") {
    fault_env e;
    CHECK(e.open_readable("/missing").error() == ENOENT);
    CHECK(e.open_writable("/no/such").error() == ENOENT);
    CHECK(e.list("/no").error() == ENOENT);
    REQUIRE(e.create_directory("/d").has_value());
    REQUIRE(e.create_directory("/d").has_value());
    append_text(*e.open_writable("/d/f").value(), "");
    CHECK(e.remove("/d").error() == ENOTEMPTY);
    CHECK(e.open_readable("/d").error() == EISDIR);
    CHECK(e.list("/").value() == std::vector<std::string>{"d"});
    REQUIRE(e.remove("/d/f").has_value());
    REQUIRE(e.remove("/d").has_value());
    CHECK_FALSE(e.exists("/d"));
}

TEST_CASE("fault_env can be used from several threads at once") {
    fault_env e;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&e, t] {
            auto w = e.open_writable("/f" + std::to_string(t)).value();
            for (int i = 0; i < 1000; ++i) {
                (void)w->append(bytes_of("x"));
                if (i % 100 == 0) (void)w->sync();
            }
        });
    }
    for (auto& t : threads) t.join();
    for (int t = 0; t < 4; ++t) CHECK(e.contents("/f" + std::to_string(t))->size() == 1000);
}

TEST_CASE("fault_env write_at overwrites in place and moves the append position only past the end") {
    fault_env e;
    auto w = e.open_writable("/f").value();
    append_text(*w, "0123456789");
    REQUIRE(w->write_at(2, bytes_of("ab")).has_value());
    CHECK(w->size() == 10);
    REQUIRE(w->write_at(8, bytes_of("xyz")).has_value());
    append_text(*w, "!");
    REQUIRE(w->write_at(14, bytes_of("end")).has_value());
    CHECK(w->size() == 17);
    CHECK(e.contents("/f") == std::string("01ab4567xyz!\0\0end", 17));
    CHECK(e.durable_contents("/f") == "");
    REQUIRE(w->sync().has_value());
    CHECK(e.durable_contents("/f") == e.contents("/f"));
}

TEST_CASE("fault_env zero_fill writes zeros up to a size and nothing when the file is that long") {
    fault_env e;
    auto w = e.open_writable("/f").value();
    append_text(*w, "head");
    REQUIRE(w->zero_fill(12).has_value());
    CHECK(w->size() == 12);
    REQUIRE(w->zero_fill(6).has_value());
    CHECK(e.contents("/f") == std::string("head\0\0\0\0\0\0\0\0", 12));
    CHECK(e.calls(fault_op::write) == 3);
}

TEST_CASE("fault_env power_cut_keep keeps the pending writes in order, appends and overwrites alike, the last one torn") {
    // synced "base", then: write_at(0, "AB"), append "cdef", write_at(1, "XYZ")
    const std::vector<std::string> images = {
        "base", "Aase", "ABse", "ABsec", "ABsecd", "ABsecde", "ABsecdef", "AXsecdef", "AXYecdef", "AXYZcdef", "AXYZcdef"};
    for (std::uint64_t keep = 0; keep < images.size(); ++keep) {
        CAPTURE(keep);
        fault_env e;
        e.write_file("/f", "base");
        auto w = e.open_writable("/f").value();
        REQUIRE(w->write_at(0, bytes_of("AB")).has_value());
        append_text(*w, "cdef");
        REQUIRE(w->write_at(1, bytes_of("XYZ")).has_value());
        CHECK(e.contents("/f") == "AXYZcdef");
        e.power_cut_keep(keep);
        CHECK(e.contents("/f") == images[keep]);
        CHECK(e.durable_contents("/f") == images[keep]);
    }
}

TEST_CASE("fault_env power_cut keeps a random prefix of the pending overwrites, sometimes none and sometimes all") {
    // three overwrites of a synced file: every image a power cut may leave is a prefix of them
    std::set<std::string> allowed;
    std::string image = "................";
    const std::vector<std::pair<std::uint64_t, std::string>> writes = {{4, "aaaa"}, {0, "bbbbbb"}, {10, "cccccc"}};
    allowed.insert(image);
    for (const auto& [offset, data] : writes)
        for (std::size_t n = 1; n <= data.size(); ++n) {
            std::string torn = image;
            torn.replace(offset, n, data.substr(0, n));
            allowed.insert(torn);
            if (n == data.size()) image = torn;
        }
    std::set<std::string> seen;
    for (std::uint64_t seed = 0; seed < 300; ++seed) {
        fault_env e;
        e.write_file("/f", "................");
        auto w = e.open_writable("/f").value();
        for (const auto& [offset, data] : writes) REQUIRE(w->write_at(offset, bytes_of(data)).has_value());
        e.power_cut(seed);
        const std::string after = e.contents("/f").value();
        CHECK(allowed.contains(after));
        seen.insert(after);
    }
    CHECK(seen.contains("................"));
    CHECK(seen.contains(image));
    CHECK(seen.size() > 6);
}

TEST_CASE("fault_env zero-filled torn tails turn the torn part of an overwrite into zeros") {
    bool zeros_seen = false;
    for (std::uint64_t seed = 0; seed < 64; ++seed) {
        fault_env e;
        e.set_zero_fill_torn_tails(true);
        e.write_file("/f", "0123456789");
        REQUIRE(e.open_writable("/f").value()->write_at(2, bytes_of("abcdef")).has_value());
        e.power_cut(seed);
        const std::string after = e.contents("/f").value();
        REQUIRE(after.size() == 10);
        CHECK(after.starts_with("01"));
        CHECK(after.substr(8) == "89");
        const std::string middle = after.substr(2, 6);
        // a prefix of the new bytes, then zeros, then the old ones
        std::size_t i = 0;
        while (i < 6 && middle[i] == "abcdef"[i]) ++i;
        std::size_t z = i;
        while (z < 6 && middle[z] == '\0') ++z;
        zeros_seen |= z > i;
        CHECK(middle.substr(z) == std::string("234567").substr(z));
    }
    CHECK(zeros_seen);
}

TEST_CASE("fault_env an overwrite a failed sync covered never becomes durable as written") {
    fault_env e;
    e.write_file("/f", "0123456789");
    auto w = e.open_writable("/f").value();
    REQUIRE(w->write_at(2, bytes_of("ab")).has_value());
    append_text(*w, "XY");
    e.fail_next(fault_op::sync, EIO);
    CHECK(w->sync().error() == EIO);
    CHECK(e.contents("/f") == "01ab456789XY");
    REQUIRE(w->write_at(6, bytes_of("cd")).has_value());
    REQUIRE(w->sync().has_value());
    // the disk kept what it had under the lost overwrite, and zeros where the lost append grew the file
    CHECK(e.durable_contents("/f") == std::string("012345cd89\0\0", 12));
    e.power_cut(7);
    CHECK(e.contents("/f") == std::string("012345cd89\0\0", 12));
}

TEST_CASE("fault_env a failed write_at with partial writes leaves a strict prefix of its data at its offset") {
    fault_env e(11);
    e.set_partial_failed_appends(true);
    auto w = e.open_writable("/f").value();
    bool some_partial = false;
    for (int i = 0; i < 20; ++i) {
        REQUIRE(w->truncate(0).has_value());
        append_text(*w, "..........");
        e.fail_next(fault_op::write, EIO);
        CHECK(w->write_at(6, bytes_of("abcdefgh")).error() == EIO);
        const std::string now = e.contents("/f").value();
        CHECK(now.size() < 14);
        CHECK(w->size() == std::max<std::size_t>(10, now.size()));
        const std::string written = now.substr(6);
        std::size_t n = 0;
        while (n < written.size() && written[n] == "abcdefgh"[n]) ++n;
        CHECK(n < 8);
        CHECK(written.substr(n) == std::string("....").substr(std::min<std::size_t>(n, 4)));
        some_partial |= n > 0;
    }
    CHECK(some_partial);
}

TEST_CASE("fault_env overwrites take no space, and writes and zero fills that grow past the capacity fail with ENOSPC") {
    fault_env e;
    e.set_capacity_bytes(100);
    auto w = e.open_writable("/f").value();
    REQUIRE(w->zero_fill(90).has_value());
    CHECK(w->zero_fill(101).error() == ENOSPC);
    CHECK(w->write_at(95, bytes_of("0123456789")).error() == ENOSPC);
    CHECK(e.bytes_used() == 90);
    REQUIRE(w->write_at(0, bytes_of(std::string(90, 'x'))).has_value());
    REQUIRE(w->write_at(88, bytes_of("0123456789")).has_value());
    CHECK(e.bytes_used() == 98);
    CHECK(w->append(bytes_of("abc")).error() == ENOSPC);
    REQUIRE(w->zero_fill(100).has_value());
    CHECK(e.bytes_used() == 100);
}

TEST_CASE("fault_env a truncate between pending writes is kept or undone with what follows it") {
    std::set<std::string> outcomes;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
        fault_env e;
        e.write_file("/f", "0123456789");
        auto w = e.open_writable("/f").value();
        REQUIRE(w->write_at(0, bytes_of("ab")).has_value());
        REQUIRE(w->truncate(4).has_value());
        REQUIRE(w->write_at(2, bytes_of("cdef")).has_value());
        e.power_cut(seed);
        outcomes.insert(e.contents("/f").value());
    }
    const std::set<std::string> allowed = {"0123456789", "a123456789", "ab23456789", "ab23",
                                           "abc3",       "abcd",       "abcde",      "abcdef"};
    for (const auto& o : outcomes) CHECK(allowed.contains(o));
    CHECK(outcomes.contains("0123456789"));
    CHECK(outcomes.contains("ab23456789"));
    CHECK(outcomes.contains("ab23"));
    CHECK(outcomes.contains("abcdef"));
}

TEST_CASE("fault_env write_at and zero_fill on a file opened before a power cut fail with EIO") {
    fault_env e;
    e.write_file("/f", "abc");
    auto w = e.open_writable("/f").value();
    e.power_cut(1);
    CHECK(w->write_at(0, bytes_of("x")).error() == EIO);
    CHECK(w->zero_fill(10).error() == EIO);
    CHECK(e.contents("/f") == "abc");
}

namespace {

unsigned mode_of(const std::string& path) {
    struct stat st{};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return static_cast<unsigned>(st.st_mode & 07777);
}

}  // namespace

TEST_CASE("posix_env and the data directory make directories 0700 and files 0600, whatever the umask (SPEC §6)") {
    temp_dir dir;
    mode_t old = ::umask(022);
    std::string data = dir / "data";
    {
        auto locked = data_directory::open_locked(data);
        REQUIRE(locked.has_value());
        env& e = posix_env();
        REQUIRE(e.create_directory(data + "/shard-0").has_value());
        auto f = e.open_writable(data + "/shard-0/0.seg");
        REQUIRE(f.has_value());
    }
    ::umask(old);
    CHECK(mode_of(data) == 0700);
    CHECK(mode_of(data + "/LOCK") == 0600);
    CHECK(mode_of(data + "/shard-0") == 0700);
    CHECK(mode_of(data + "/shard-0/0.seg") == 0600);
    CHECK(wide_mode_warning(data).empty());
}

TEST_CASE("wide_mode_warning names the first group- or other-accessible path with its mode") {
    temp_dir dir;
    std::string data = dir / "data";
    REQUIRE(data_directory::open_locked(data).has_value());
    REQUIRE(::chmod((data + "/LOCK").c_str(), 0644) == 0);
    CHECK(wide_mode_warning(data).find(data + "/LOCK has mode 0644") != std::string::npos);
    REQUIRE(::chmod(data.c_str(), 0755) == 0);
    std::string w = wide_mode_warning(data);
    CHECK(w.find(data + " has mode 0755") != std::string::npos);
    CHECK(w.find('\n') == std::string::npos);
}

TEST_CASE("a symbolic link in the data directory is never opened through: reading or writing it fails (review L6)") {
    temp_dir dir;
    append_text(*posix_env().open_writable(dir / "elsewhere").value(), "keep me");
    std::filesystem::create_symlink(dir / "elsewhere", dir / "segment.seg");
    auto r = posix_env().open_readable(dir / "segment.seg");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error() == ELOOP);
    auto w = posix_env().open_writable(dir / "segment.seg");
    REQUIRE_FALSE(w.has_value());
    CHECK(w.error() == ELOOP);
    CHECK(read_whole(posix_env(), dir / "elsewhere") == "keep me");
}
