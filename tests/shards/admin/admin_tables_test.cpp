// percore admin's pure parts: the --server URL it accepts, and how it prints answers (tables for
// people, the server's JSON for scripts, one line for a refusal). The exchanges themselves run
// against the real server in tests/integration/test_admin_cli.py.
#include <doctest.h>

#include "shards/admin/admin_client.hpp"
#include "shards/admin/admin_tables.hpp"

using namespace percore::shards;

TEST_CASE("a server URL gives its scheme, host and port, the scheme's port when none is written") {
    auto a = parse_server_url("http://127.0.0.1:8080");
    REQUIRE(a);
    CHECK(!a->https);
    CHECK(a->host == "127.0.0.1");
    CHECK(a->port == 8080);
    auto b = parse_server_url("https://board1.lan/");
    REQUIRE(b);
    CHECK(b->https);
    CHECK(b->host == "board1.lan");
    CHECK(b->port == 443);
    auto c = parse_server_url("http://[::1]:9000");
    REQUIRE(c);
    CHECK(c->host == "[::1]");
    CHECK(c->port == 9000);
}

TEST_CASE("a server URL with another scheme, a path, or a port out of range is refused") {
    CHECK(!parse_server_url("ftp://127.0.0.1"));
    CHECK(!parse_server_url("127.0.0.1:8080"));
    CHECK(!parse_server_url("http://127.0.0.1:8080/_apps"));
    CHECK(!parse_server_url("http://127.0.0.1:0"));
    CHECK(!parse_server_url("http://127.0.0.1:65536"));
    CHECK(!parse_server_url("http://127.0.0.1:80x"));
    CHECK(!parse_server_url("http://"));
}

TEST_CASE("a refusal is its status and the server's error, or the body's first line") {
    CHECK(refusal_line(404, R"({"error":"no such app"})") == "404 no such app");
    CHECK(refusal_line(502, "<html>bad gateway\n</html>") == "502 <html>bad gateway");
    CHECK(refusal_line(503, "") == "503");
}

TEST_CASE("a token list is a table with a header, a column per field, null as a dash") {
    admin_answer a{200, "application/json",
                   R"({"tokens":[{"id":"ab12","scope":"write","prefix":"2026/","expires":null,"last_used":1796}]})"};
    CHECK(view_text(admin_view::token_list, a) ==
          "ID    SCOPE  PREFIX  EXPIRES  LAST_USED\n"
          "ab12  write  2026/   -        1796\n");
}

TEST_CASE("an object is printed as name value lines, nested members as name.member") {
    admin_answer a{200, "application/json", R"({"app":"notes","quota":{"documents":10},"usage":{"bytes":5}})"};
    CHECK(view_text(admin_view::app, a) ==
          "app              notes\n"
          "quota.documents  10\n"
          "usage.bytes      5\n");
}

TEST_CASE("lists print one name a line, writes their outcome, --json the body as it came") {
    CHECK(view_text(admin_view::app_list, {200, "", R"({"apps":["a","b"]})"}) == "a\nb\n");
    CHECK(view_text(admin_view::done, {201, "", ""}) == "created\n");
    CHECK(view_text(admin_view::done, {204, "", ""}) == "done\n");
    CHECK(json_text({200, "", R"({"apps":[]})"}) == "{\"apps\":[]}\n");
    CHECK(json_text({204, "", ""}).empty());
}

TEST_CASE("an answer that is not the JSON its command expects is printed as it came") {
    CHECK(view_text(admin_view::app_list, {200, "text/plain", "not json"}) == "not json\n");
}

TEST_CASE("secrets shown once are printed with a line saying so") {
    const std::string out = view_text(admin_view::token_created, {201, "", R"({"id":"ab","token":"pct_ab_x"})"});
    CHECK(out.find("token  pct_ab_x\n") != std::string::npos);
    CHECK(out.find("shown once") != std::string::npos);
}
