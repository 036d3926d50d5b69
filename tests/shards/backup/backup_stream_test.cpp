// GET /_backup's stream on its shard (shards/backup/backup_stream.hpp), over a fake host: when it starts,
// what it writes and when, and how it ends — whole, cut off, or refused. The archive it writes is
// restored with `percore restore`'s own code (store/backup_restore.hpp).
#include <doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "shards/backup/backup_stream.hpp"
#include "shards/base/limits.hpp"
#include "store/backup_restore.hpp"
#include "store/env.hpp"
#include "tests/temp_dir.hpp"

using namespace percore;
using namespace percore::shards;
using percore::test::temp_dir;

namespace {


void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A data directory of two shards, one segment each: shard 1's larger than a stream piece.
struct data_dir {
    temp_dir tmp;
    std::string root = tmp.path() + "/data";
    std::string seg0 = std::string(1000, 'a');
    std::string seg1 = std::string(backup_chunk_bytes * 2 + 77, 'b');

    data_dir() {
        std::filesystem::create_directories(shard(0));
        std::filesystem::create_directories(shard(1));
        write_file(root + "/FORMAT", "percore-data 1\nlayout 1\nshards 2\ndirectory 00000000000000ab\n");
        write_file(shard(0) + "/0000000000000001.seg", seg0);
        write_file(shard(1) + "/0000000000000002.seg", seg1);
    }
    std::string shard(unsigned s) const { return root + "/layout-1/shard-00" + std::to_string(s); }
    store::result<store::shard_capture> capture(unsigned s, const std::string& name) const {
        auto f = store::capture_whole_file(store::posix_env(), shard(s), name);
        if (!f) return std::unexpected(f.error());
        store::shard_capture c;
        c.files.push_back(std::move(*f));
        return c;
    }
};

// The shard's side, as the pool would act: writes collected, room set by the test; an abort
// tells closed() from inside the call, as a closing connection does.
struct fake_host final : net::answer_sink, backup_captures {
    backup_streams* streams = nullptr;
    const data_dir* dir = nullptr;
    std::vector<std::uint64_t> asked;
    int begun_status = 0;
    std::string disposition;
    std::string body;
    std::size_t room = 1u << 20;
    bool ended = false, aborted = false;
    int completed = 0;

    void request_captures(std::uint64_t tag) override { asked.push_back(tag); }
    store::result<store::shard_capture> capture_own() override { return dir->capture(0, "0000000000000001.seg"); }
    net::stream_status stream_begin(net::answer_ticket, int status, std::string_view, std::string_view,
                                    std::string_view value) override {
        begun_status = status;
        disposition = value;
        return net::stream_status::sent;
    }
    net::stream_status stream_write(net::answer_ticket, std::string_view bytes) override {
        body.append(bytes);
        return net::stream_status::sent;
    }
    std::size_t stream_room(net::answer_ticket) const override { return begun_status ? room : 0; }
    void stream_end(net::answer_ticket) override { ended = true; }
    void stream_abort(net::answer_ticket ticket) override {
        aborted = true;
        streams->closed(ticket);
    }
    void complete(net::answer_ticket, const net::simple_answer& a) override { completed = a.status; }
};

struct fixture {
    data_dir dir;
    backup_streams streams{0, 2};
    fake_host host;
    net::answer_ticket ticket{3, 7};

    fixture() {
        host.streams = &streams;
        host.dir = &dir;
        streams.attach(&host, &host, backup_source{dir.root, 1, 2});
    }
    void deliver_shard_1(const std::string& name = "0000000000000002.seg") {
        auto part = std::make_unique<backup_part>();
        part->shard = 1;
        part->files = dir.capture(1, name);
        streams.captured(host.asked.at(0), std::move(part));
    }
    // Rounds until the backup is gone, each when the loop would run it (at once, or at the
    // pace's wake_by()); the rounds it took.
    int run() {
        int rounds = 0;
        while (streams.size() > 0 && rounds < 1000) {
            if (!streams.has_work(std::chrono::steady_clock::now()) && streams.wake_by() != std::chrono::steady_clock::time_point::max())
                std::this_thread::sleep_until(streams.wake_by());
            streams.step(std::chrono::steady_clock::now());
            ++rounds;
        }
        return rounds;
    }
};

}  // namespace

TEST_CASE("a backup begins once every shard's capture is in, and its archive restores the files") {
    fixture f;
    f.streams.begin(f.ticket, false);
    REQUIRE(f.host.asked.size() == 1);
    CHECK(backup_tag::decode(f.host.asked[0]).origin == 0);
    CHECK(!f.streams.has_work(std::chrono::steady_clock::now()));
    f.streams.step(std::chrono::steady_clock::now());
    CHECK(f.host.begun_status == 0);  // shard 1 has not answered

    f.deliver_shard_1();
    CHECK(f.streams.has_work(std::chrono::steady_clock::now()));
    const int rounds = f.run();
    CHECK(f.host.begun_status == 200);
    CHECK(f.host.disposition.starts_with("attachment; filename=\"percore-backup-"));
    CHECK(f.host.ended);
    CHECK(!f.host.aborted);
    CHECK(rounds >= 3);  // a segment larger than two pieces: one file read a round

    const std::string tar = f.dir.tmp.path() + "/b.tar";
    write_file(tar, f.host.body);
    int fd = ::open(tar.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const std::string target = f.dir.tmp.path() + "/restored";
    auto r = store::restore_backup(fd, target);
    ::close(fd);
    REQUIRE_MESSAGE(r, r.error());
    CHECK(r->shards == 2);
    CHECK(read_file(target + "/layout-1/shard-000/0000000000000001.seg") == f.dir.seg0);
    CHECK(read_file(target + "/layout-1/shard-001/0000000000000002.seg") == f.dir.seg1);
}

TEST_CASE("after a piece a backup waits its pace before the next, however much room its stream has") {
    fixture f;
    f.streams.begin(f.ticket, false);
    f.deliver_shard_1();
    f.streams.step(std::chrono::steady_clock::now());  // the head
    const auto began = std::chrono::steady_clock::now();
    f.streams.step(std::chrono::steady_clock::now());  // the first piece
    const auto took = std::chrono::steady_clock::now() - began;
    const std::size_t first = f.host.body.size();
    REQUIRE(first > 0);
    CHECK(f.streams.wake_by() > began);
    CHECK(f.streams.wake_by() <= began + took * (backup_pace_factor + 1));
    // Each check counts only when the clock, read after the call, is still before the wake: a slow
    // machine (qemu-user in CI's aarch64 stage) may pass it between two lines of this test.
    const auto wake = f.streams.wake_by();
    const bool ready_early = f.streams.has_work(std::chrono::steady_clock::now());
    if (std::chrono::steady_clock::now() < wake) CHECK(!ready_early);
    f.streams.step(std::chrono::steady_clock::now());
    if (std::chrono::steady_clock::now() < wake) CHECK(f.host.body.size() == first);
    std::this_thread::sleep_until(f.streams.wake_by());
    CHECK(f.streams.has_work(std::chrono::steady_clock::now()));
}

TEST_CASE("a backup writes nothing while its stream has no room for a piece, and goes on once it has") {
    fixture f;
    f.streams.begin(f.ticket, false);
    f.deliver_shard_1();
    f.streams.step(std::chrono::steady_clock::now());  // the head
    REQUIRE(f.host.begun_status == 200);
    f.host.room = backup_chunk_bytes - 1;
    const std::size_t before = f.host.body.size();
    std::this_thread::sleep_until(f.streams.wake_by());
    CHECK(!f.streams.has_work(std::chrono::steady_clock::now()));
    f.streams.step(std::chrono::steady_clock::now());
    CHECK(f.host.body.size() == before);
    f.host.room = backup_chunk_bytes;
    CHECK(f.streams.has_work(std::chrono::steady_clock::now()));
    f.run();
    CHECK(f.host.ended);
}

TEST_CASE("a file shorter than its capture cuts the stream off without its end") {
    fixture f;
    f.streams.begin(f.ticket, false);
    f.deliver_shard_1();
    std::filesystem::resize_file(f.dir.shard(1) + "/0000000000000002.seg", 10);  // behind the server's back
    f.run();
    CHECK(f.host.begun_status == 200);
    CHECK(f.host.aborted);
    CHECK(!f.host.ended);
    CHECK(f.streams.size() == 0);
}

TEST_CASE("a shard that could not capture its files makes the backup 500 before any head") {
    fixture f;
    f.streams.begin(f.ticket, false);
    f.deliver_shard_1("no-such-file.seg");
    f.run();
    CHECK(f.host.completed == 500);
    CHECK(f.host.begun_status == 0);
}

TEST_CASE("a backup whose connection ends is dropped, and a late capture for it is let go") {
    fixture f;
    f.streams.begin(f.ticket, false);
    f.streams.closed(f.ticket);
    CHECK(f.streams.size() == 0);
    f.deliver_shard_1();
    CHECK(f.streams.size() == 0);
    CHECK(!f.streams.has_work(std::chrono::steady_clock::now()));
}

TEST_CASE("the server stopping aborts a streaming backup and answers a waiting one 503") {
    fixture f;
    f.streams.begin(f.ticket, false);
    f.deliver_shard_1();
    f.streams.step(std::chrono::steady_clock::now());
    REQUIRE(f.host.begun_status == 200);
    f.streams.begin(net::answer_ticket{4, 1}, false);  // waits for shard 1
    f.streams.begin_stop();
    CHECK(f.host.aborted);
    CHECK(!f.host.ended);
    CHECK(f.host.completed == 503);
    CHECK(f.streams.size() == 0);
}

TEST_CASE("HEAD takes no capture and ends after its head") {
    fixture f;
    f.streams.begin(f.ticket, true);
    CHECK(f.host.asked.empty());
    f.run();
    CHECK(f.host.begun_status == 200);
    CHECK(f.host.ended);
    CHECK(f.host.body.empty());
}

TEST_CASE("backups past the bound are refused by full()") {
    fixture f;
    for (std::size_t i = 0; i < max_backups_per_shard; ++i) {
        CHECK(!f.streams.full());
        f.streams.begin(net::answer_ticket{static_cast<std::uint32_t>(i), 1}, false);
    }
    CHECK(f.streams.full());
}
