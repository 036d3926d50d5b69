#include <doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "shards/apps/app_registry.hpp"
#include "shards/runtime/check.hpp"

using namespace percore::shards;

TEST_CASE("an app is found by name and by index once inserted") {
    app_registry apps(2);
    CHECK(apps.find("notes") == nullptr);
    app_entry* e = apps.insert("notes");
    REQUIRE(e);
    CHECK(apps.insert("notes") == e);
    CHECK(apps.find("notes") == e);
    CHECK(apps.at(e->index()) == e);
    CHECK(apps.at(0) == nullptr);
    CHECK(apps.at(e->index() + 1) == nullptr);
    CHECK(e->state() == app_state::absent);
    CHECK(apps.names().empty());
    e->set_state(app_state::created);
    CHECK(apps.names() == std::vector<std::string>{"notes"});
}

TEST_CASE("names are listed in byte order and only while the app exists") {
    app_registry apps(1);
    for (const char* n : {"b", "a", "c", "d"}) apps.insert(n)->set_state(app_state::implicit);
    apps.find("d")->set_state(app_state::deleting);
    CHECK(apps.names() == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("the gate admits writes up to the documents quota exactly and refuses past it") {
    app_registry apps(1);
    app_entry* e = apps.insert("q");
    app_quota q;
    q.documents = 2;
    e->set_quota(q);
    CHECK(e->try_apply(1, 10) == 0);
    CHECK(e->try_apply(1, 10) == 0);
    CHECK(e->try_apply(1, 10) == static_cast<std::uint8_t>(quota_verdict::documents));
    CHECK(e->try_apply(0, 5) == 0);  // a replacement adds no document
    CHECK(e->documents() == 2);
    CHECK(e->bytes() == 25);
    CHECK(e->would_pass(1, 0) == quota_verdict::documents);
    CHECK(e->try_apply(-1, -10) == 0);  // an erase always passes
    CHECK(e->would_pass(1, 0) == quota_verdict::ok);
}

TEST_CASE("a refusal for bytes leaves the document count as it was") {
    app_registry apps(1);
    app_entry* e = apps.insert("q");
    app_quota q;
    q.bytes = 10;
    e->set_quota(q);
    CHECK(e->try_apply(1, 8) == 0);
    CHECK(e->try_apply(1, 3) == static_cast<std::uint8_t>(quota_verdict::bytes));
    CHECK(e->documents() == 1);
    CHECK(e->bytes() == 8);
    e->undo(1, 8);
    CHECK(e->documents() == 0);
    CHECK(e->bytes() == 0);
}

namespace {

// Four threads each try 600 writes of (documents, bytes) on `e`; how many were admitted. With
// as_shards, thread t runs as shard t (its own usage line); else none is a shard (one line).
int admitted_by_four_writers(app_entry* e, std::int64_t documents, std::int64_t bytes, bool as_shards) {
    std::vector<std::thread> threads;
    std::atomic<int> admitted{0};
    for (unsigned t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            if (as_shards) percore::runtime::set_this_shard(t);
            for (int i = 0; i < 600; ++i)
                if (e->try_apply(documents, bytes) == 0) admitted.fetch_add(1);
        });
    for (auto& t : threads) t.join();
    return admitted.load();
}

}  // namespace

TEST_CASE("concurrent writers on several threads never pass the documents quota together") {
    app_registry apps(4);
    app_entry* e = apps.insert("race");
    app_quota q;
    q.documents = 1000;
    e->set_quota(q);
    CHECK(admitted_by_four_writers(e, 1, 1, false) == 1000);
    CHECK(e->documents() == 1000);
}

TEST_CASE("the connections quota is taken and given back") {
    app_registry apps(1);
    app_entry* e = apps.insert("c");
    app_quota q;
    q.connections = 2;
    e->set_quota(q);
    CHECK(e->take_connection());
    CHECK(e->take_connection());
    CHECK_FALSE(e->take_connection());
    e->drop_connection();
    CHECK(e->take_connection());
    CHECK(e->connections() == 2);
}

TEST_CASE("requests per second allow a burst of one second then the rate") {
    app_registry apps(1);
    app_entry* e = apps.insert("r");
    app_quota q;
    q.requests_per_second = 10;
    e->set_quota(q);
    const std::int64_t t0 = 1'000'000'000'000;
    int admitted = 0;
    for (int i = 0; i < 30; ++i) admitted += e->take_request(t0) == 0;
    CHECK(admitted == 10);
    CHECK(e->take_request(t0) >= 1);  // retry after a second at most
    CHECK(e->take_request(t0 + 100'000'000) == 0);  // a tenth of a second later: one more
    CHECK(e->take_request(t0 + 100'000'000) != 0);
    CHECK(apps.insert("free")->take_request(t0) == 0);  // unlimited
}

TEST_CASE("token use is remembered and forgotten") {
    app_registry apps(1);
    CHECK(apps.token_last_used("abc") == 0);
    apps.note_token_use("abc", 100);
    apps.note_token_use("abc", 90);
    CHECK(apps.token_last_used("abc") == 100);
    apps.forget_token("abc");
    CHECK(apps.token_last_used("abc") == 0);
}

TEST_CASE("an app's tokens are reserved up to the cap, and a released place can be taken again") {
    app_registry apps(1);
    app_entry* e = apps.insert("notes");
    for (int i = 0; i < 3; ++i) CHECK(e->reserve(app_object::token, 3));
    CHECK_FALSE(e->reserve(app_object::token, 3));
    CHECK(e->held(app_object::token) == 3);
    CHECK(e->reserve(app_object::delivery, 3));  // counted apart
    e->release(app_object::token);
    CHECK(e->reserve(app_object::token, 3));
    CHECK_FALSE(e->reserve(app_object::token, 3));
}

TEST_CASE("a reset app holds no tokens or deliveries, and a release then does not go below zero") {
    app_registry apps(1);
    app_entry* e = apps.insert("notes");
    e->add_recovered(app_object::token);
    REQUIRE(e->reserve(app_object::delivery, 64));
    e->reset_usage();
    CHECK(e->held(app_object::token) == 0);
    CHECK(e->held(app_object::delivery) == 0);
    e->release(app_object::delivery);
    CHECK(e->held(app_object::delivery) == 0);
}

TEST_CASE("threads reserving together never pass the cap") {
    app_registry apps(1);
    app_entry* e = apps.insert("notes");
    std::vector<std::thread> threads;
    std::atomic<int> taken{0};
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 500; ++i)
                if (e->reserve(app_object::token, 1000)) taken.fetch_add(1);
        });
    for (auto& t : threads) t.join();
    CHECK(taken.load() == 1000);
    CHECK(e->held(app_object::token) == 1000);
}

TEST_CASE("usage counted on several shards is their sum, and an undo on another shard takes it back") {
    app_registry apps(3);
    app_entry* e = apps.insert("spread");
    std::vector<std::thread> threads;
    for (unsigned s = 0; s < 3; ++s)
        threads.emplace_back([e, s] {
            percore::runtime::set_this_shard(s);
            for (int i = 0; i < 100; ++i) CHECK(e->try_apply(1, 10) == 0);
        });
    for (auto& t : threads) t.join();
    CHECK(e->documents() == 300);
    CHECK(e->bytes() == 3000);
    std::thread other([e] {
        percore::runtime::set_this_shard(1);
        e->undo(100, 1000);
    });
    other.join();
    e->add_recovered(5, 50);  // a thread that is no shard counts on its own line
    CHECK(e->documents() == 205);
    CHECK(e->bytes() == 2050);
    e->reset_usage();
    CHECK(e->documents() == 0);
    CHECK(e->bytes() == 0);
}

TEST_CASE("writers on several shards never pass the bytes quota together") {
    app_registry apps(4);
    app_entry* e = apps.insert("race-bytes");
    app_quota q;
    q.bytes = 1000;
    e->set_quota(q);
    CHECK(admitted_by_four_writers(e, 0, 1, true) == 1000);
    CHECK(e->bytes() == 1000);
    CHECK(e->documents() == 0);
}

TEST_CASE("a write that shrinks usage passes a quota already exceeded") {
    app_registry apps(1);
    app_entry* e = apps.insert("shrink");
    e->add_recovered(10, 100);
    app_quota q;
    q.documents = 5;
    q.bytes = 50;
    e->set_quota(q);
    CHECK(e->try_apply(-1, -10) == 0);
    CHECK(e->try_apply(1, 0) == static_cast<std::uint8_t>(quota_verdict::documents));
    CHECK(e->documents() == 9);
    CHECK(e->bytes() == 90);
}
