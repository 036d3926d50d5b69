#include <doctest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "shards/base/limits.hpp"
#include "shards/server/service_notify.hpp"

using namespace percore::shards;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t header = offsetof(sockaddr_un, sun_path);

// One check with these heartbeats; returns the ping and the probes sent (shard, number).
struct check_result {
    bool ping = false;
    std::vector<std::pair<unsigned, std::uint64_t>> probes;
};

check_result check(heartbeat_check& c, std::vector<std::uint64_t> beats) {
    check_result r;
    r.ping = c.check(beats, [&](unsigned shard, std::uint64_t n) { r.probes.emplace_back(shard, n); });
    return r;
}

using probes = std::vector<std::pair<unsigned, std::uint64_t>>;

}  // namespace

TEST_CASE("an unset or empty NOTIFY_SOCKET means no service manager") {
    auto unset = notify_address_from(nullptr);
    REQUIRE(unset);
    CHECK_FALSE(unset->has_value());
    auto empty = notify_address_from("");
    REQUIRE(empty);
    CHECK_FALSE(empty->has_value());
}

TEST_CASE("a path NOTIFY_SOCKET is the address's path, NUL-terminated") {
    auto a = notify_address_from("/run/systemd/notify");
    REQUIRE(a);
    REQUIRE(a->has_value());
    CHECK((*a)->address.sun_family == AF_UNIX);
    CHECK(std::string((*a)->address.sun_path) == "/run/systemd/notify");
    CHECK((*a)->size == header + std::strlen("/run/systemd/notify") + 1);
}

TEST_CASE("an abstract NOTIFY_SOCKET turns its '@' into the leading NUL and has no NUL after the name") {
    auto a = notify_address_from("@percore/test");
    REQUIRE(a);
    REQUIRE(a->has_value());
    CHECK((*a)->address.sun_path[0] == '\0');
    CHECK(std::string((*a)->address.sun_path + 1, 12) == "percore/test");
    CHECK((*a)->size == header + 1 + 12);
}

TEST_CASE("a NOTIFY_SOCKET that does not fit an address is refused at the first byte too many") {
    const std::size_t room = sizeof(sockaddr_un{}.sun_path);
    std::string path = "/" + std::string(room - 2, 'p');  // room - 1 bytes and the NUL
    CHECK(notify_address_from(path.c_str()));
    path += 'p';
    auto too_long = notify_address_from(path.c_str());
    REQUIRE_FALSE(too_long);
    CHECK(too_long.error().reason.find("NOTIFY_SOCKET=") == 0);
    CHECK(too_long.error().reason.find("longer than") != std::string::npos);

    std::string name = "@" + std::string(room - 1, 'a');  // the '@' is the NUL: exactly the room
    auto fits = notify_address_from(name.c_str());
    REQUIRE(fits);
    CHECK((*fits)->size == header + room);
    name += 'a';
    CHECK_FALSE(notify_address_from(name.c_str()));
}

TEST_CASE("a relative NOTIFY_SOCKET, or another kind of address, is refused with its reason") {
    auto relative = notify_address_from("run/notify");
    REQUIRE_FALSE(relative);
    CHECK(relative.error().reason == "NOTIFY_SOCKET=run/notify ignored: neither an absolute path nor an abstract name (@...)");
    CHECK_FALSE(notify_address_from("vsock:2:1234"));
}

TEST_CASE("messages are assignments one a line, with nothing after the last") {
    CHECK(status_message("recovering 3 shards") == "STATUS=recovering 3 shards");
    CHECK(ready_message("serving 3 shards on 127.0.0.1:8080") == "READY=1\nSTATUS=serving 3 shards on 127.0.0.1:8080");
    CHECK(stopping_message() == "STOPPING=1\nSTATUS=stopping");
    CHECK(watchdog_message == "WATCHDOG=1");
    CHECK(serving_status(1, "[::1]:80") == "serving 1 shard on [::1]:80");
    CHECK(serving_status(4, "0.0.0.0:8080") == "serving 4 shards on 0.0.0.0:8080");
}

TEST_CASE("a status cannot add an assignment: its newlines become spaces") {
    CHECK(status_message("a\nREADY=1") == "STATUS=a READY=1");
    CHECK(status_message(std::string_view("a\0b", 3)) == "STATUS=a b");
}

TEST_CASE("WATCHDOG_USEC gives the timeout, and the checks come four times within it") {
    auto t = watchdog_timeout_from("30000000", nullptr, 42);
    REQUIRE(t);
    REQUIRE(t->has_value());
    CHECK(**t == 30s);
    CHECK(watchdog_check_interval(**t) == 7500ms);
    CHECK(watchdog_check_interval(400ms) == 100ms);
}

TEST_CASE("the checks never come more often than the minimum interval") {
    CHECK(watchdog_check_interval(1us) == min_watchdog_check_interval);
    CHECK(watchdog_check_interval(40ms) == min_watchdog_check_interval);
}

TEST_CASE("no WATCHDOG_USEC, or a WATCHDOG_PID of another process, means no watchdog") {
    auto unset = watchdog_timeout_from(nullptr, nullptr, 42);
    REQUIRE(unset);
    CHECK_FALSE(unset->has_value());
    auto other = watchdog_timeout_from("400000", "41", 42);
    REQUIRE(other);
    CHECK_FALSE(other->has_value());
    auto ours = watchdog_timeout_from("400000", "42", 42);
    REQUIRE(ours);
    REQUIRE(ours->has_value());
    CHECK(**ours == 400ms);
}

TEST_CASE("a WATCHDOG_USEC or WATCHDOG_PID that is not a number is refused with its reason") {
    CHECK(watchdog_timeout_from("0", nullptr, 42).error().reason ==
          "WATCHDOG_USEC=0 ignored: not a positive number of microseconds");
    CHECK_FALSE(watchdog_timeout_from("-5", nullptr, 42));
    CHECK_FALSE(watchdog_timeout_from("5s", nullptr, 42));
    CHECK_FALSE(watchdog_timeout_from("99999999999999999999", nullptr, 42));
    CHECK(watchdog_timeout_from("400000", "me", 42).error().reason == "WATCHDOG_PID=me ignored: not a process id");
}

TEST_CASE("the stall hook names a shard of the server, or is refused") {
    auto unset = test_stall_shard_from(nullptr, 3);
    REQUIRE(unset);
    CHECK_FALSE(unset->has_value());
    auto one = test_stall_shard_from("2", 3);
    REQUIRE(one);
    CHECK(**one == 2u);
    CHECK(test_stall_shard_from("3", 3).error().reason == "PERCORE_TEST_STALL_SHARD=3 ignored: not a shard of 3");
    CHECK_FALSE(test_stall_shard_from("x", 3));
}

TEST_CASE("the first check probes every shard and does not ping") {
    heartbeat_check c(3);
    auto r = check(c, {0, 0, 0});
    CHECK_FALSE(r.ping);
    CHECK(r.probes == probes{{0, 1}, {1, 1}, {2, 1}});
}

TEST_CASE("a check pings when every shard ran its probe, and probes them all again") {
    heartbeat_check c(3);
    (void)check(c, {0, 0, 0});
    auto r = check(c, {1, 1, 1});
    CHECK(r.ping);
    CHECK(r.probes == probes{{0, 2}, {1, 2}, {2, 2}});
    r = check(c, {2, 2, 2});
    CHECK(r.ping);
}

TEST_CASE("a shard that did not run its probe holds the ping and gets no second probe") {
    heartbeat_check c(3);
    (void)check(c, {0, 0, 0});
    auto r = check(c, {1, 0, 1});  // shard 1 is stuck; the others ran probe 1
    CHECK_FALSE(r.ping);
    CHECK(r.probes == probes{{0, 2}, {2, 2}});
    r = check(c, {2, 0, 2});
    CHECK_FALSE(r.ping);
    CHECK(r.probes == probes{{0, 3}, {2, 3}});
}

TEST_CASE("pings stop while one loop is stuck and come back once it turns again") {
    heartbeat_check c(2);
    (void)check(c, {0, 0});
    CHECK(check(c, {1, 1}).ping);        // both ran probe 1; probes 2 sent
    CHECK_FALSE(check(c, {2, 1}).ping);  // shard 1 stuck: shard 0 gets probe 3
    CHECK_FALSE(check(c, {3, 1}).ping);  // still stuck: shard 0 gets probe 4, shard 1 nothing new
    auto back = check(c, {4, 2});        // shard 1 ran probe 2 at last
    CHECK(back.ping);
    CHECK(back.probes == probes{{0, 5}, {1, 3}});
}

TEST_CASE("a ping needs every shard to have turned since the last ping, at any check between") {
    heartbeat_check c(2);
    (void)check(c, {0, 0});
    CHECK_FALSE(check(c, {1, 0}).ping);  // shard 0 turned; shard 1 not yet
    CHECK(check(c, {1, 1}).ping);        // shard 1 turned now; shard 0 turned before, since no ping
    CHECK_FALSE(check(c, {1, 1}).ping);  // neither ran the probe sent after it
    CHECK_FALSE(check(c, {2, 1}).ping);  // shard 0 did; shard 1 still owes one
    CHECK(check(c, {2, 2}).ping);
}
