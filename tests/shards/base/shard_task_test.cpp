// The shard's table of background tasks (shards/base/shard_task.hpp) with scripted tasks, and the
// write ticket that routes a background write's result home (shards/base/write_ticket.hpp). The
// REQUIRES that guard them (an issuer registered twice, issuer::connection as a task) abort the
// process: they are not tested here.
#include <doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "shards/base/shard_task.hpp"
#include "shards/base/write_ticket.hpp"
#include "shards/runtime/limits.hpp"

using namespace percore;
using namespace percore::shards;
using namespace std::chrono_literals;
using time_point = shard_task::time_point;

namespace {

// A task that does what it is told and writes down every call, in one log shared by the tasks.
struct scripted_task final : shard_task {
    std::string name;
    std::vector<std::string>& log;
    std::size_t work = 0;
    bool wants_round = false;
    time_point wake = time_point::max();
    bool is_timed = false;
    mutable int wake_asked = 0;
    std::vector<time_point> stepped_at;
    std::vector<std::uint64_t> results;  // tags of the write results it was given
    bool stopped = false;

    scripted_task(std::string n, std::vector<std::string>& l) : name(std::move(n)), log(l) {}

    std::size_t step(time_point now) override {
        log.push_back(name);
        stepped_at.push_back(now);
        return work;
    }
    bool has_work(time_point) const override { return wants_round; }
    time_point wake_by() const override {
        ++wake_asked;
        return wake;
    }
    bool timed() const override { return is_timed; }
    void begin_stop() override {
        log.push_back("stop " + name);
        stopped = true;
    }
    void write_done(const store::write_result& result) override { results.push_back(result.tag); }
};

const time_point t0 = time_point{} + 100s;

store::write_result result_of(issuer who, std::uint32_t sequence) {
    store::write_result r;
    r.tag = write_ticket::background(0, who, sequence).encode();
    return r;
}

constexpr issuer background_issuers[] = {issuer::app_erasure, issuer::delivery, issuer::follower};

}  // namespace

TEST_CASE("the table steps its tasks in the order they were added, each at the round's time, and sums their work") {
    std::vector<std::string> log;
    scripted_task a("a", log), b("b", log), c("c", log);
    a.work = 2;
    b.work = 0;
    c.work = 5;
    shard_tasks tasks;
    tasks.add(a);
    tasks.add_issuer(issuer::delivery, b);
    tasks.add(c);
    CHECK(tasks.size() == 3);
    CHECK(tasks.step(t0) == 7);
    CHECK(log == std::vector<std::string>{"a", "b", "c"});
    CHECK(a.stepped_at == std::vector<time_point>{t0});
    CHECK(b.stepped_at == std::vector<time_point>{t0});
    CHECK(c.stepped_at == std::vector<time_point>{t0});
}

TEST_CASE("a table whose tasks did nothing steps to 0, and an empty table does nothing") {
    std::vector<std::string> log;
    scripted_task a("a", log), b("b", log);
    shard_tasks tasks;
    CHECK(tasks.step(t0) == 0);
    CHECK_FALSE(tasks.has_work(t0));
    CHECK(tasks.wake_by() == time_point::max());
    tasks.add(a);
    tasks.add(b);
    CHECK(tasks.step(t0) == 0);
    CHECK(log.size() == 2);
}

TEST_CASE("the table has work when any one task has, whichever it is") {
    std::vector<std::string> log;
    scripted_task a("a", log), b("b", log), c("c", log);
    shard_tasks tasks;
    tasks.add(a);
    tasks.add(b);
    tasks.add(c);
    CHECK_FALSE(tasks.has_work(t0));
    for (scripted_task* t : {&a, &b, &c}) {
        CAPTURE(t->name);
        t->wants_round = true;
        CHECK(tasks.has_work(t0));
        t->wants_round = false;
    }
    CHECK_FALSE(tasks.has_work(t0));
}

TEST_CASE("the table's wake_by is the earliest of its timed tasks', max() when none waits for a time") {
    std::vector<std::string> log;
    scripted_task a("a", log), b("b", log), c("c", log);
    for (scripted_task* t : {&a, &b, &c}) t->is_timed = true;
    shard_tasks tasks;
    tasks.add(a);
    tasks.add(b);
    tasks.add(c);
    CHECK(tasks.wake_by() == time_point::max());
    a.wake = t0 + 3s;
    c.wake = t0 + 1s;
    CHECK(tasks.wake_by() == t0 + 1s);
    b.wake = t0 + 500ms;
    CHECK(tasks.wake_by() == t0 + 500ms);
}

TEST_CASE("a task that is not timed when registered is never asked for its wake_by") {
    std::vector<std::string> log;
    scripted_task timed("timed", log), untimed("untimed", log);
    timed.is_timed = true;
    timed.wake = t0 + 2s;
    untimed.wake = t0 + 1s;  // earlier, but it did not say it keeps time
    shard_tasks tasks;
    tasks.add(timed);
    tasks.add(untimed);
    CHECK(tasks.wake_by() == t0 + 2s);
    CHECK(untimed.wake_asked == 0);
    CHECK(timed.wake_asked == 1);
    untimed.is_timed = true;  // timed() is read once, at registration
    CHECK(tasks.wake_by() == t0 + 2s);
    CHECK(untimed.wake_asked == 0);
}

TEST_CASE("begin_stop reaches every task, issuers or not, in the order they were added") {
    std::vector<std::string> log;
    scripted_task a("a", log), b("b", log), c("c", log);
    shard_tasks tasks;
    tasks.add(a);
    tasks.add_issuer(issuer::follower, b);
    tasks.add(c);
    tasks.begin_stop();
    CHECK(a.stopped);
    CHECK(b.stopped);
    CHECK(c.stopped);
    CHECK(log == std::vector<std::string>{"stop a", "stop b", "stop c"});
}

TEST_CASE("a write's result goes only to the task registered for its issuer") {
    std::vector<std::string> log;
    scripted_task plain("plain", log), erasures("erasures", log), deliveries("deliveries", log), copy("copy", log);
    shard_tasks tasks;
    tasks.add(plain);
    tasks.add_issuer(issuer::app_erasure, erasures);
    tasks.add_issuer(issuer::delivery, deliveries);
    tasks.add_issuer(issuer::follower, copy);
    CHECK(tasks.size() == 4);
    const auto d = result_of(issuer::delivery, 7);
    tasks.write_done(issuer::delivery, d);
    CHECK(deliveries.results == std::vector<std::uint64_t>{d.tag});
    CHECK(erasures.results.empty());
    CHECK(copy.results.empty());
    CHECK(plain.results.empty());
    const auto f = result_of(issuer::follower, 1);
    tasks.write_done(issuer::follower, f);
    CHECK(copy.results == std::vector<std::uint64_t>{f.tag});
    const auto e = result_of(issuer::app_erasure, 2);
    tasks.write_done(issuer::app_erasure, e);
    CHECK(erasures.results == std::vector<std::uint64_t>{e.tag});
    CHECK(deliveries.results.size() == 1);
    CHECK(plain.results.empty());
}

TEST_CASE("a task registered as an issuer is also stepped like any other") {
    std::vector<std::string> log;
    scripted_task a("a", log);
    a.work = 1;
    shard_tasks tasks;
    tasks.add_issuer(issuer::app_erasure, a);
    CHECK(tasks.step(t0) == 1);
    CHECK(log == std::vector<std::string>{"a"});
}

TEST_CASE("a background ticket decodes to its origin and issuer, for every background issuer and origin") {
    for (issuer who : background_issuers) {
        for (unsigned origin : {0u, 1u, 7u, runtime::max_shards - 1}) {
            CAPTURE(static_cast<int>(who));
            CAPTURE(origin);
            const std::uint64_t tag = write_ticket::background(origin, who, 12345).encode();
            const write_ticket t = write_ticket::decode(tag);
            CHECK(t.origin == origin);
            CHECK(t.from() == who);
            CHECK(t.answer.index == write_ticket::background_index);
            CHECK((t.answer.generation & write_ticket::background_sequence_mask) == 12345);
        }
    }
}

TEST_CASE("background tickets of different issuers or sequences never encode alike") {
    std::vector<std::uint64_t> tags;
    for (issuer who : background_issuers)
        for (std::uint32_t seq : {0u, 1u, 2u, write_ticket::background_sequence_mask})
            tags.push_back(write_ticket::background(3, who, seq).encode());
    for (std::size_t i = 0; i < tags.size(); ++i)
        for (std::size_t j = i + 1; j < tags.size(); ++j) CHECK(tags[i] != tags[j]);
}

TEST_CASE("a connection's ticket decodes as issuer::connection with its origin, index and generation") {
    for (std::uint32_t index : {0u, 1u, write_ticket::background_index - 1}) {
        for (std::uint32_t generation : {0u, 1u, 0xc0000000u, 0xffffffffu}) {
            CAPTURE(index);
            CAPTURE(generation);
            write_ticket c;
            c.origin = 5;
            c.answer = {index, generation};
            const write_ticket t = write_ticket::decode(c.encode());
            CHECK(t.from() == issuer::connection);
            CHECK(t.origin == 5);
            CHECK(t.answer.index == index);
            CHECK(t.answer.generation == generation);
        }
    }
}

TEST_CASE("a background sequence wraps within its bits and never changes the issuer") {
    const std::uint32_t mask = write_ticket::background_sequence_mask;
    for (issuer who : background_issuers) {
        CAPTURE(static_cast<int>(who));
        for (std::uint32_t seq : {mask, mask + 1, mask + 2, 0xffffffffu}) {
            CAPTURE(seq);
            const write_ticket t = write_ticket::decode(write_ticket::background(9, who, seq).encode());
            CHECK(t.from() == who);
            CHECK(t.origin == 9);
            CHECK((t.answer.generation & mask) == (seq & mask));
        }
        // the sequence after the last one is the first again
        CHECK(write_ticket::background(9, who, mask + 1).encode() == write_ticket::background(9, who, 0).encode());
    }
}
