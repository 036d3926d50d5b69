// The shard's epoll set and its fair turns (runtime::poller) over a real epoll set: one end of a
// socket pair stands for a connection socket (a byte written to the other end: an edge), each
// watcher answering a turn class. Checks the order of turns between classes, the re-poll behind a long backlog, the bound
// on turns per round, and that no edge is lost or served twice.
#include <doctest.h>

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "shards/runtime/limits.hpp"
#include "shards/runtime/loop.hpp"
#include "shards/runtime/poller.hpp"

using namespace percore;

namespace {

// A watched socket (fd; its peer is the client): each turn records the watcher's id and reads until
// the socket is drained (as a connection reads until a short read), then runs `during` once, if set.
struct socket_watcher final : runtime::poll_watcher {
    socket_watcher(int id_, std::uint32_t cls_, std::vector<int>& log) : id(id_), cls(cls_), turns(log) {
        int pair[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) == 0);
        fd = pair[0];
        peer = pair[1];
    }
    ~socket_watcher() {
        ::close(fd);
        ::close(peer);
    }

    void make_ready() { REQUIRE(::write(peer, "x", 1) == 1); }
    void on_events(std::uint32_t events) override {
        turns.push_back(id);
        last_events = events;
        char buffer[64];
        while (::read(fd, buffer, sizeof buffer) > 0) {
        }
        if (auto f = std::exchange(during, nullptr)) f();
    }
    std::uint32_t turn_class() const override { return cls; }

    int fd = -1;
    int peer = -1;
    int id;
    std::uint32_t cls;
    std::vector<int>& turns;
    std::uint32_t last_events = 0;
    std::function<void()> during;
};

struct turns_fixture {
    runtime::loop loop{0};
    runtime::poller poller{loop};
    std::vector<int> turns;
    std::vector<std::unique_ptr<socket_watcher>> watchers;

    turns_fixture() { loop.enter_round(); }
    ~turns_fixture() { loop.end_round(); }

    // Watchers ids first .. first+count-1, of class `cls`, watched and past their first edge.
    void add(int count, std::uint32_t cls) {
        for (int i = 0; i < count; ++i) {
            watchers.push_back(std::make_unique<socket_watcher>(static_cast<int>(watchers.size()), cls, turns));
            REQUIRE(poller.watch(watchers.back()->fd, *watchers.back()));
        }
        settle();
    }
    // Serves the writable edges every new watch brings, then forgets them.
    void settle() {
        while (poller.poll() > 0) {
        }
        turns.clear();
    }
    std::size_t position_of(int id) const {
        return static_cast<std::size_t>(std::find(turns.begin(), turns.end(), id) - turns.begin());
    }
};

constexpr std::uint32_t class_a = 7;
constexpr std::uint32_t class_b = 16000;

}  // namespace

TEST_CASE("with one class, ready connections take their turns in the order they became ready") {
    turns_fixture f;
    f.add(5, 0);
    for (int id : {3, 0, 4, 1, 2}) f.watchers[static_cast<std::size_t>(id)]->make_ready();
    CHECK(f.poller.poll() == 5);
    CHECK((f.turns == std::vector<int>{3, 0, 4, 1, 2}));
}

TEST_CASE("one ready connection of class B runs within the first two turns beside eight of class A") {
    turns_fixture f;
    f.add(8, class_a);   // ids 0-7
    f.add(1, class_b);   // id 8
    for (auto& w : f.watchers) w->make_ready();   // the kernel reports the eight A's first
    f.poller.poll();
    REQUIRE(f.turns.size() == 9);
    CHECK(f.position_of(8) < 2);
}

TEST_CASE("classes with ready connections take one turn each in rotation") {
    turns_fixture f;
    f.add(3, 1);   // ids 0-2
    f.add(3, 2);   // ids 3-5
    f.add(3, 3);   // ids 6-8
    for (auto& w : f.watchers) w->make_ready();
    f.poller.poll();
    CHECK((f.turns == std::vector<int>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
}

TEST_CASE("a connection of another class that becomes ready behind a long backlog waits one re-poll interval, not the backlog") {
    turns_fixture f;
    f.add(100, class_a);   // ids 0-99
    f.add(1, class_b);     // id 100
    socket_watcher& b = *f.watchers.back();
    for (int id = 0; id < 100; ++id) f.watchers[static_cast<std::size_t>(id)]->make_ready();
    f.watchers[0]->during = [&] { b.make_ready(); };   // B becomes ready during A's first turn
    f.poller.poll();
    REQUIRE(f.turns.size() == 101);
    // found by the re-poll after turns_between_polls turns, then one A turn ahead of it at most
    CHECK(f.position_of(100) <= runtime::turns_between_polls + 1);
}

TEST_CASE("a round takes at most max_turns_per_round turns and leaves the rest queued for the next") {
    turns_fixture f;
    const int extra = 10;
    f.add(static_cast<int>(runtime::max_turns_per_round) + extra, 0);
    for (auto& w : f.watchers) w->make_ready();
    CHECK(f.poller.poll() == runtime::max_turns_per_round);
    CHECK(f.turns.size() == runtime::max_turns_per_round);
    CHECK(f.poller.has_work());   // the loop must not sleep now
    CHECK(f.poller.queued() == static_cast<std::size_t>(extra));
    CHECK(f.poller.poll() == static_cast<std::size_t>(extra));
    CHECK(!f.poller.has_work());
    std::vector<int> sorted = f.turns;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());   // each served once
}

TEST_CASE("edges that arrive while a connection waits for its turn are merged into that one turn") {
    turns_fixture f;
    f.add(12, class_a);   // ids 0-11
    socket_watcher& last = *f.watchers.back();
    for (auto& w : f.watchers) w->make_ready();
    f.watchers[0]->during = [&] { last.make_ready(); };   // a second edge, seen by the re-poll
    f.poller.poll();
    CHECK(std::count(f.turns.begin(), f.turns.end(), 11) == 1);
    CHECK((last.last_events & EPOLLIN) != 0);
    CHECK(f.poller.poll() == 0);   // nothing was left behind either
}

TEST_CASE("an edge after a connection's turn gives it another turn") {
    turns_fixture f;
    f.add(2, 0);
    f.watchers[0]->make_ready();
    f.watchers[0]->during = [&] { f.watchers[0]->make_ready(); };   // ready again during its turn
    CHECK(f.poller.poll() == 1);
    CHECK(f.poller.poll() == 1);
    CHECK((f.turns == std::vector<int>{0, 0}));
}

TEST_CASE("a watcher destroyed while it waits for its turn leaves its queue") {
    turns_fixture f;
    f.add(3, class_a);
    for (auto& w : f.watchers) w->make_ready();
    f.watchers[0]->during = [&] { f.watchers[1].reset(); };
    CHECK(f.poller.poll() == 2);
    CHECK((f.turns == std::vector<int>{0, 2}));
    CHECK(!f.poller.has_work());
}

TEST_CASE("classes beyond the poller's queues share one more queue and every ready connection still gets its turn") {
    turns_fixture f;
    const int classes = static_cast<int>(runtime::max_turn_queues) + 10;
    for (int c = 0; c < classes; ++c) f.add(2, static_cast<std::uint32_t>(c + 1));
    for (auto& w : f.watchers) w->make_ready();
    while (f.poller.poll() > 0) {
    }
    std::vector<int> sorted = f.turns;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> every(static_cast<std::size_t>(2 * classes));
    for (std::size_t i = 0; i < every.size(); ++i) every[i] = static_cast<int>(i);
    CHECK(sorted == every);
}
