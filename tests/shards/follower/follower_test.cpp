// The follower (shards/follower/follower.hpp) on shard 0 of two real in-memory stores, against a
// fake primary: the test reads each request from a fake client transport and answers it with a
// replication page (shards/feed/replication_page.hpp) or a failure, and routes the results of the
// follower's writes back as the shard does (issuer::follower).
//
// Times: step()/has_work() take `start + offset`, start the loop's round clock. A failed exchange
// schedules its retry from that clock (follower.cpp, retry_later); no round is entered here, so
// it stays at `start` and a retry is due exactly `start + backoff`.
#include <optional>
#include <doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <chrono>
#include <string>
#include <vector>

#include "../task_fixtures.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/base/encoding.hpp"
#include "shards/base/json_text.hpp"
#include "shards/base/json_value.hpp"
#include "shards/base/limits.hpp"
#include "shards/feed/feed_cursor.hpp"
#include "shards/follower/diverged_capture.hpp"
#include "shards/follower/follower.hpp"
#include "store/backup_restore.hpp"
#include "store/data_layout.hpp"
#include "store/env.hpp"
#include "tests/temp_dir.hpp"
#include "shards/runtime/loop.hpp"

using namespace percore;
using namespace percore::shards;
using namespace percore::shards::testing;
using namespace std::chrono_literals;
using open_state = net::client_transport::open_state;

namespace {

constexpr std::string_view primary = "http://127.0.0.1:9000";
const std::string cursor_key = std::string(follower_records) + "cursor";
// Cursors as the primary writes them (a page's last_cursor must be one: page_check.hpp).
const std::string c0 = cursor_text(feed_cursor{0x5eed, 1, {0}});
const std::string c1 = cursor_text(feed_cursor{0x5eed, 1, {1}});
const std::string c2 = cursor_text(feed_cursor{0x5eed, 1, {2}});
constexpr std::string_view unavailable_503 = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";

std::string store_key(std::string_view app, std::string_view key) {
    return std::string(app) + '\0' + std::string(key);
}

// One change of a page, as the primary writes it.
std::string put_change(std::string_view app, std::string_view key, std::string_view value,
                       std::string_view content_type = "text/plain") {
    std::string out = "{\"app\":";
    append_json_string(out, app);
    out.append(",\"key\":");
    append_json_string(out, key);
    out.append(",\"etag\":\"\\\"00000000000003e9\\\"\",\"deleted\":false,\"content_type\":");
    append_json_string(out, content_type);
    out.append(",\"value_base64\":\"");
    append_base64(out, bytes_of(value));
    out.append("\"}");
    return out;
}
std::string deleted_change(std::string_view app, std::string_view key) {
    std::string out = "{\"app\":";
    append_json_string(out, app);
    out.append(",\"key\":");
    append_json_string(out, key);
    out.append(",\"etag\":\"\\\"00000000000003ea\\\"\",\"deleted\":true,\"content_type\":null,\"value_base64\":null}");
    return out;
}
std::string page(const std::vector<std::string>& changes, std::string_view last_cursor, std::uint64_t pending = 0,
                 std::optional<std::uint64_t> epoch = std::nullopt) {
    std::string out = "{\"changes\":[";
    for (std::size_t i = 0; i < changes.size(); ++i) {
        if (i) out.push_back(',');
        out.append(changes[i]);
    }
    out.append("],\"last_cursor\":");
    append_json_string(out, last_cursor);
    out.append(",\"pending\":").append(std::to_string(pending));
    if (epoch) out.append(",\"epoch\":").append(std::to_string(*epoch));
    out.push_back('}');
    return out;
}
std::string ok(const std::string& body) {
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
}
// The follower's page request after `cursor`: a long poll once an exchange succeeded; before that
// (a first ask, or after a failure) one that does not wait (`connected` false).
std::string since_target(std::string_view cursor, bool connected = true) {
    return "/_changes/_all?feed=longpoll&since=" + std::string(cursor) + "&timeout=" +
           std::to_string(connected ? replication_poll_seconds : 0) + "&limit=" +
           std::to_string(max_replication_page_changes);
}

struct harness {
    runtime::loop loop{0};  // the follower resolves names on it (this url is an IP literal) and reads its clock
    task_stores stores{2};
    fake_transports transports;
    follower_status status;
    follower f;
    shard_tasks tasks;
    const runtime::clock_type::time_point start = loop.clock().now();

    explicit harness(follow_config config = follow_config{std::string(primary), "pct_token", "", 0, {}, {}})
        : f(stores, stores.registry, stores, transports, loop, std::move(config), status, false) {
        tasks.add_issuer(issuer::follower, f);
    }

    std::size_t step(std::chrono::nanoseconds after = 0ns) { return f.step(start + after); }
    bool has_work(std::chrono::nanoseconds after = 0ns) const { return f.has_work(start + after); }

    void store_cursor(std::string_view cursor, std::string_view for_primary = primary, bool resync = false) {
        std::string value = "{\"primary\":";
        append_json_string(value, for_primary);
        value.append(",\"cursor\":");
        append_json_string(value, cursor);
        value.append(resync ? ",\"resync\":true}" : ",\"resync\":false}");
        stores.put(cursor_key, value, "application/json");
    }
    // The stored cursor record's fields.
    json_value stored_cursor() {
        auto v = stores.value_of(cursor_key);
        REQUIRE(v);
        auto j = parse_json(*v);
        REQUIRE(j);
        return std::move(*j);
    }
    std::string stored_cursor_text() { return stored_cursor().find("cursor")->text; }

    net::testing::fake_client_transport& primary_side() { return transports.last(); }
    std::vector<sent_request> sent() { return transports.made.empty() ? std::vector<sent_request>{} : requests_on(primary_side()); }
    std::size_t sockets_before = 0;
    int posted_before = 0;
    void note_transport() {
        sockets_before = transports.made.empty() ? 0 : primary_side().sockets.size();
        posted_before = transports.made.empty() ? 0 : primary_side().posted;
    }
    // A step that sends the next request at `after`; its connect (or posted turn) comes.
    void send_at(std::chrono::nanoseconds after) {
        note_transport();
        REQUIRE(step(after) == 1);
        REQUIRE(!transports.made.empty());
        let_request_out(primary_side(), sockets_before, posted_before);
    }
    // From a stored cursor: the cursor is read, and the first request is on the wire.
    void following_from(std::string_view cursor) {
        store_cursor(cursor);
        REQUIRE(step() == 1);
        send_at(0ns);
        REQUIRE(sent().size() == 1);
        REQUIRE(sent().back().target == since_target(cursor, false));
    }
};

}  // namespace

TEST_CASE("the follower waits for the server to serve before it reads its cursor and asks anything") {
    harness h;
    h.store_cursor(c0);
    h.stores.is_serving = false;
    CHECK(h.step() == 0);
    CHECK_FALSE(h.has_work());
    CHECK(h.transports.made.empty());
    h.stores.is_serving = true;
    CHECK(h.has_work());
    CHECK(h.step() == 1);
}

TEST_CASE("a follower with a stored cursor asks the primary's replication feed after it, with its token") {
    harness h;
    h.store_cursor("1234-1-3e9.3e8-9f0e");
    CHECK(h.step() == 1);  // the cursor is read
    CHECK(h.has_work());
    h.send_at(0ns);
    const auto requests = h.sent();
    REQUIRE(requests.size() == 1);
    CHECK(requests[0].method == "GET");
    CHECK(requests[0].target == since_target("1234-1-3e9.3e8-9f0e", false));
    CHECK(requests[0].field("Host") == "127.0.0.1:9000");
    CHECK(requests[0].field("Authorization") == "Bearer pct_token");
    CHECK(requests[0].field("Accept") == "application/json");
    CHECK(requests[0].body.empty());
    REQUIRE(h.transports.asked.size() == 1);
    CHECK(h.transports.asked[0].url.port == 9000);
    CHECK(h.status.resyncs.load() == 0);
}

TEST_CASE("a page's puts, erasures and catalog records are applied to the stores that own their keys") {
    harness h;
    h.stores.put(store_key("notes", "gone"), "old");
    h.following_from(c0);
    answer(h.primary_side(),
           ok(page({put_change("notes", "a", "hello"), deleted_change("notes", "gone"),
                    put_change("_percore", "app/notes", encode_app_record(app_quota{}), "application/json")},
                   c1)));
    CHECK(h.stores.held.size() == 3);  // submitted at once, to their owners
    CHECK(h.stores.settle(h.tasks) == 3);
    CHECK(h.stores.value_of(store_key("notes", "a")) == "hello");
    const store::document* a = h.stores.find(store_key("notes", "a"));
    REQUIRE(a);
    CHECK(a->content_type() == "text/plain");
    CHECK(h.stores.find(store_key("notes", "gone")) == nullptr);
    CHECK(h.stores.value_of(store_key("_percore", "app/notes")) == encode_app_record(app_quota{}));
    // once they are durable the registry takes the catalog's changes
    app_entry* app = h.stores.registry.find("notes");
    REQUIRE(app);
    CHECK(app->state() == app_state::created);
    CHECK(h.status.applied_changes.load() == 3);
    CHECK(h.status.pages.load() == 1);
}

TEST_CASE("the next page is asked as soon as a page's writes are durable, before its cursor is stored") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1"), put_change("notes", "b", "2")}, c1)));
    CHECK(h.stores.held.size() == 2);  // the page's writes; its cursor was stored already
    CHECK(h.step(1min) == 0);          // applying
    CHECK_FALSE(h.has_work(1min));
    REQUIRE(h.stores.settle(h.tasks) == 2);
    CHECK(h.stores.held.empty());      // no cursor write of its own
    CHECK(h.stored_cursor_text() == c0);
    CHECK(h.status.lag_changes.load() == 0);
    CHECK(h.status.connected.load());
    CHECK(h.has_work());
    h.send_at(0ns);  // this request acknowledges the page (SPEC §12, --replication sync)
    const auto requests = h.sent();
    REQUIRE(requests.size() == 2);
    CHECK(requests[1].target == since_target(c1));
    CHECK(h.primary_side().sockets.size() == 1);  // the kept connection
}

TEST_CASE("a page's cursor is stored with the next page's writes, in the same group commit") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1")}, c1)));
    REQUIRE(h.stores.settle(h.tasks) == 1);
    h.send_at(0ns);
    answer(h.primary_side(), ok(page({put_change("notes", "b", "2")}, c2)));
    CHECK(h.stores.held.size() == 2);  // b, and the cursor after the first page
    REQUIRE(h.stores.settle(h.tasks) == 2);
    const json_value saved = h.stored_cursor();
    CHECK(saved.find("cursor")->text == c1);
    CHECK(saved.find("primary")->text == primary);
    CHECK(saved.find("resync")->flag == false);
    h.send_at(0ns);
    CHECK(h.sent().back().target == since_target(c2));
}

TEST_CASE("a page whose writes were refused is asked again, and its batch's cursor is written again with it") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1")}, c1)));
    REQUIRE(h.stores.settle(h.tasks) == 1);
    h.send_at(0ns);
    h.stores.refuse_next = store::write_outcome::no_space;
    answer(h.primary_side(), ok(page({put_change("notes", "b", "2")}, c2)));
    REQUIRE(h.stores.settle(h.tasks) == 2);
    CHECK_FALSE(h.has_work());  // waits min_follow_retry
    h.send_at(min_follow_retry);
    CHECK(h.sent().back().target == since_target(c1, false));
    answer(h.primary_side(), ok(page({put_change("notes", "b", "2")}, c2)));
    CHECK(h.stores.held.size() == 2);  // b again, and the cursor after the first page again
    REQUIRE(h.stores.settle(h.tasks) == 2);
    CHECK(h.stored_cursor_text() == c1);
}

TEST_CASE("an empty long poll stores nothing and asks again from the same cursor") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), ok(page({}, c0)));
    CHECK(h.stores.held.empty());
    h.send_at(0ns);
    REQUIRE(h.sent().size() == 2);
    CHECK(h.sent()[1].target == since_target(c0));
}

TEST_CASE("a failed exchange is tried again after min_follow_retry, doubling to max_follow_retry, nothing sent before") {
    harness h;
    h.following_from(c0);
    std::vector<std::chrono::milliseconds> waits;
    for (auto wait = min_follow_retry; waits.size() < 6; wait = std::min(wait * 2, max_follow_retry)) waits.push_back(wait);
    CHECK(waits.back() == max_follow_retry);  // reached, and kept
    std::size_t sent = 1;
    for (auto wait : waits) {
        CAPTURE(wait.count());
        answer(h.primary_side(), unavailable_503);
        const auto failed_at = h.loop.clock().now() - h.start;
        CHECK(h.step(failed_at + wait - 1ns) == 0);
        CHECK_FALSE(h.has_work(failed_at + wait - 1ns));
        CHECK(h.sent().size() == sent);
        CHECK(h.has_work(failed_at + wait));
        h.send_at(failed_at + wait);
        CHECK(h.sent().size() == ++sent);
        CHECK(h.sent().back().target == since_target(c0, false));  // the same page asked again
    }
    CHECK(h.status.failed_exchanges.load() == waits.size());
    CHECK_FALSE(h.status.connected.load());
    CHECK(h.stores.held.empty());
}

TEST_CASE("a refused connection is retried after min_follow_retry on a new connection") {
    harness h;
    h.store_cursor(c0);
    REQUIRE(h.step() == 1);
    REQUIRE(h.step() == 1);
    h.primary_side().connected(open_state::connect_failed, ECONNREFUSED);
    CHECK(h.sent().empty());
    CHECK(h.step(min_follow_retry - 1ns) == 0);
    CHECK(h.primary_side().sockets.size() == 1);
    h.send_at(min_follow_retry);
    CHECK(h.primary_side().sockets.size() == 2);
    REQUIRE(h.sent().size() == 1);
    CHECK(h.sent()[0].target == since_target(c0, false));
    CHECK(h.status.failed_exchanges.load() == 1);
}

TEST_CASE("a 200 that is not a replication page is refused: nothing is written and nothing asked again") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), ok("{\"rows\":[]}"));
    CHECK(h.stores.held.empty());
    CHECK(h.status.rejected_pages.load() == 1);
    CHECK_FALSE(h.status.connected.load());
    CHECK(h.step(1h) == 0);
    CHECK_FALSE(h.has_work(1h));
    CHECK(h.sent().size() == 1);
}

TEST_CASE("a page with one bad change stores none of its changes, not even those before the bad one") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1"), put_change(std::string(65, 'a'), "k", "2")}, c1)));
    CHECK(h.stores.held.empty());
    CHECK(h.stores.find(store_key("notes", "a")) == nullptr);
    CHECK(h.stores.registry.find("notes") == nullptr);
    CHECK(h.status.rejected_pages.load() == 1);
    CHECK(h.status.applied_changes.load() == 0);
    CHECK(h.stored_cursor_text() == c0);
}

TEST_CASE("a refused page stops the copy: no retry follows, whatever the time") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), ok(page({put_change("notes", "k", "x", "text/plain\r\nSet-Cookie: a=b")}, c1)));
    CHECK(h.status.rejected_pages.load() == 1);
    CHECK(h.status.failed_exchanges.load() == 0);
    for (auto later : {0ns, std::chrono::nanoseconds(max_follow_retry), std::chrono::nanoseconds(1h)}) {
        CHECK(h.step(later) == 0);
        CHECK_FALSE(h.has_work(later));
    }
    CHECK(h.sent().size() == 1);
}

TEST_CASE("an answer whose Content-Length is over 64 MiB is refused without reading its body") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(max_replication_page_bytes + 1) +
                                 "\r\n\r\n{\"changes\":[");
    CHECK(h.status.rejected_pages.load() == 1);
    CHECK(h.primary_side().socket().closed);
    CHECK(h.stores.held.empty());
    CHECK_FALSE(h.has_work(1h));
}

TEST_CASE("a page that arrives resets the wait after failures to min_follow_retry") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), unavailable_503);
    h.send_at(min_follow_retry);
    answer(h.primary_side(), unavailable_503);
    h.send_at(2 * min_follow_retry);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1")}, c1)));
    h.stores.settle_all(h.tasks);
    h.send_at(2 * min_follow_retry);  // the next page at once
    answer(h.primary_side(), unavailable_503);
    // due min_follow_retry after the round clock (still at start), not the doubled wait after it
    CHECK_FALSE(h.has_work(min_follow_retry - 1ns));
    CHECK(h.has_work(min_follow_retry));
}

TEST_CASE("a 410 from the primary starts a full copy from the feed's beginning at once") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), "HTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n");
    CHECK(h.status.resyncs.load() == 1);
    CHECK(h.has_work());
    h.send_at(0ns);
    CHECK(h.sent().back().target == since_target("0", false));
}

TEST_CASE("a stored cursor of another primary is not followed: the copy starts over from 0") {
    harness h;
    h.store_cursor(c0, "http://10.0.0.9:9000");
    REQUIRE(h.step() == 1);
    h.send_at(0ns);
    CHECK(h.sent().back().target == since_target("0", false));
    CHECK(h.status.resyncs.load() == 1);
}

TEST_CASE("a full copy, once caught up, erases the local keys the primary did not show and stores a finished cursor") {
    harness h;
    h.stores.put(store_key("notes", "a"), "stale value");
    h.stores.put(store_key("notes", "extra"), "not on the primary");
    REQUIRE(h.step() == 1);  // no stored cursor: a full copy
    h.send_at(0ns);
    REQUIRE(h.sent().back().target == since_target("0", false));
    answer(h.primary_side(), ok(page({put_change("notes", "a", "fresh")}, c1, 0)));
    h.stores.settle_all(h.tasks);
    CHECK(h.stores.value_of(store_key("notes", "a")) == "fresh");
    CHECK(h.stores.find(store_key("notes", "extra")) == nullptr);
    const json_value saved = h.stored_cursor();
    CHECK(saved.find("cursor")->text == c1);
    CHECK(saved.find("resync")->flag == false);
    h.send_at(0ns);
    CHECK(h.sent().back().target == since_target(c1));
}

TEST_CASE("a full copy with more pages pending keeps the local extras until the last page") {
    harness h;
    h.stores.put(store_key("notes", "extra"), "not shown yet");
    REQUIRE(h.step() == 1);
    h.send_at(0ns);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1")}, c1, 5)));
    h.stores.settle_all(h.tasks);
    CHECK(h.stores.find(store_key("notes", "extra")) != nullptr);
    CHECK(h.stored_cursor().find("resync")->flag == true);  // a restart now starts the copy over
    CHECK(h.status.lag_changes.load() == 5);
}

TEST_CASE("a follower's own records in a page are not copied") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(),
           ok(page({put_change("_percore", "follower/cursor", "{\"primary\":\"x\",\"cursor\":\"evil\"}")}, c1)));
    CHECK(h.stores.held.empty());  // nothing to write: the cursor goes with the next page
    h.send_at(0ns);
    answer(h.primary_side(), ok(page({}, c2)));
    CHECK(h.stores.held.size() == 1);  // the cursor's own write only
    h.stores.settle_all(h.tasks);
    CHECK(h.stored_cursor_text() == c1);
    CHECK(h.stored_cursor().find("primary")->text == primary);
}

TEST_CASE("begin_stop drops the exchange in flight: its connection closes and nothing more is sent") {
    harness h;
    h.following_from(c0);
    h.f.begin_stop();
    CHECK(h.primary_side().socket().closed);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1")}, c1)));  // reaches nobody
    CHECK(h.stores.held.empty());
    CHECK(h.step(1h) == 0);
    CHECK_FALSE(h.has_work(1h));
    CHECK(h.primary_side().sockets.size() == 1);
    CHECK(h.sent().size() == 1);
}

TEST_CASE("after begin_stop the results of a page's writes save no cursor") {
    harness h;
    h.following_from(c0);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1")}, c1)));
    h.f.begin_stop();
    CHECK(h.stores.settle(h.tasks) == 1);
    CHECK(h.stores.held.empty());
    CHECK(h.stored_cursor_text() == c0);
}

TEST_CASE("a page of an older epoch than the one the board follows is not copied and is asked again later") {
    harness h;
    h.stores.board.become_follower(7, std::string(primary));  // SPEC 12: the leader key's epoch is 7
    h.following_from(c0);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1")}, c1, 0, 6)));
    (void)h.step(1min);
    CHECK(h.stores.settle(h.tasks) == 0);  // nothing submitted
    CHECK_FALSE(h.stores.value_of(std::string("notes") + '\0' + "a"));
    CHECK_FALSE(h.status.connected.load());
    CHECK(h.status.failed_exchanges.load() == 1);
}

TEST_CASE("a page of the epoch the board follows, or a later one, is copied") {
    harness h;
    h.stores.board.become_follower(7, std::string(primary));
    h.following_from(c0);
    answer(h.primary_side(), ok(page({put_change("notes", "a", "1")}, c1, 0, 8)));
    CHECK(h.step(1min) == 0);  // applying
    CHECK(h.stores.settle(h.tasks) == 1);
}

// --- a returning primary (SPEC §12 "A returning primary"; diverged_capture.hpp) --------------------

namespace {

constexpr std::uint64_t page_version = 0x3e9;  // put_change's ETag

// The test's own put of a document with the given ETag version (as a copy keeps its primary's).
void put_version(task_stores& stores, const std::string& key, std::string_view value, std::uint64_t version) {
    store::write_op w;
    w.doc = store::copy_document(key, "text/plain", value);
    w.copied_version = version;
    stores.apply(std::move(w));
}

// The documents of a diverged tar, restored as `percore restore` does and read back.
std::map<std::string, std::string> restored(const std::string& tar) {
    percore::test::temp_dir into;
    int fd = ::open(tar.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    auto r = store::restore_backup(fd, into / "dir");
    ::close(fd);
    REQUIRE(r.has_value());
    auto layout = store::read_layout(store::posix_env(), into / "dir");
    REQUIRE(layout.has_value());
    store::reader_epochs epochs(1);
    store::shard_store s(epochs, 1);
    REQUIRE(s.recover(store::posix_env(), layout->shard_directory(0)).has_value());
    std::map<std::string, std::string> out;
    store::snapshot::cursor c;
    std::string value;
    for (c.seek(*s.current(), {}, false); c.valid(); c.next()) {
        REQUIRE(s.read_value(c.doc(), value).has_value());
        out[std::string(c.doc().key())] = value;
    }
    return out;
}

follow_config returning(const percore::test::temp_dir& data) {
    return follow_config{std::string(primary), "pct_token", "", 9, data.path(), {}};
}

}  // namespace

TEST_CASE("a returning primary keeps in a diverged tar the documents it held that the full copy changes or erases") {
    percore::test::temp_dir data;
    harness h(returning(data));
    h.stores.put(led_epoch_key, encode_led_epoch(7));
    h.store_cursor(c0);  // a stored cursor of this primary is not enough: it led another epoch
    put_version(h.stores, store_key("notes", "same"), "v", page_version);
    put_version(h.stores, store_key("notes", "rewritten"), "mine", page_version);  // same version, other bytes
    put_version(h.stores, store_key("notes", "older"), "mine", page_version - 1);
    put_version(h.stores, store_key("notes", "deleted"), "mine", 5);
    put_version(h.stores, store_key("_percore", "app/notes"), "{}", 6);
    put_version(h.stores, store_key("notes", "extra"), "only here", 7);
    REQUIRE(h.step() == 1);
    h.send_at(0ns);
    REQUIRE(h.sent().back().target == since_target("0", false));
    answer(h.primary_side(), ok(page({put_change("notes", "same", "v"), put_change("notes", "rewritten", "theirs"),
                                      put_change("notes", "older", "theirs"), deleted_change("notes", "deleted")},
                                     c1, 0)));
    h.stores.settle_all(h.tasks);
    CHECK(h.stores.value_of(store_key("notes", "rewritten")) == "theirs");
    CHECK(h.stores.find(store_key("notes", "extra")) == nullptr);
    CHECK(h.stores.find(led_epoch_key) == nullptr);  // erased: a restart does not capture again
    const auto kept = restored(data / "diverged-7.tar");
    CHECK(kept.size() == 5);
    CHECK(kept.at(store_key("notes", "rewritten")) == "mine");
    CHECK(kept.at(store_key("notes", "older")) == "mine");
    CHECK(kept.at(store_key("notes", "deleted")) == "mine");
    CHECK(kept.at(store_key("notes", "extra")) == "only here");
    CHECK(kept.contains(store_key("_percore", "app/notes")));  // the catalog too
    CHECK_FALSE(kept.contains(store_key("notes", "same")));
    CHECK(h.status.diverged_documents.load() == 5);
    CHECK(h.status.diverged_files.load() == 1);
}

TEST_CASE("a returning primary whose documents all reached the new primary writes no tar and erases its record") {
    percore::test::temp_dir data;
    harness h(returning(data));
    h.stores.put(led_epoch_key, encode_led_epoch(7));
    put_version(h.stores, store_key("notes", "same"), "v", page_version);
    REQUIRE(h.step() == 1);
    h.send_at(0ns);
    answer(h.primary_side(), ok(page({put_change("notes", "same", "v")}, c1, 0)));
    h.stores.settle_all(h.tasks);
    CHECK_FALSE(std::filesystem::exists(data / "diverged-7.tar"));
    CHECK_FALSE(std::filesystem::exists(data / "diverged-7.part"));
    CHECK(h.stores.find(led_epoch_key) == nullptr);
    CHECK(h.status.diverged_files.load() == 0);
}

TEST_CASE("a board whose record names the epoch it follows resumes from its stored cursor and keeps nothing") {
    percore::test::temp_dir data;
    harness h(follow_config{std::string(primary), "pct_token", "", 7, data.path(), {}});
    h.stores.put(led_epoch_key, encode_led_epoch(7));
    h.following_from(c0);
    CHECK(h.status.resyncs.load() == 0);
}

TEST_CASE("keep decisions: a delete or another version or type keeps; the same version and type asks the bytes") {
    task_stores stores{1};
    const std::string key("app\0k", 5);
    put_version(stores, key, "v", 10);
    const store::document& d = *stores.find(key);
    CHECK(decide(d, true, {}, 0) == keep_decision::keep);
    CHECK(decide(d, false, "text/plain", 11) == keep_decision::keep);
    CHECK(decide(d, false, "application/json", 10) == keep_decision::keep);
    CHECK(decide(d, false, "text/plain", 10) == keep_decision::compare_values);
    CHECK(decode_led_epoch(encode_led_epoch(1234)) == 1234u);
    CHECK_FALSE(decode_led_epoch("12x").has_value());
    CHECK_FALSE(decode_led_epoch("0").has_value());
}
