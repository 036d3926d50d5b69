#include <doctest.h>

#include <map>
#include <string>
#include <vector>

#include "shards/server/options.hpp"

using namespace percore::shards;

namespace {

result<server_options> parse(std::vector<const char*> args,
                                                 std::map<std::string, std::string> env = {}) {
    return parse_serve_options(args, [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}

}  // namespace

TEST_CASE("serve options default to the values in the contract") {
    auto o = parse({});
    REQUIRE(o);
    CHECK(o->listen_host == "127.0.0.1");
    CHECK(o->listen_port == 8080);
    CHECK(o->shards == 0);
    CHECK(o->data_dir == "./percore-data");
    CHECK(o->durability == durability_mode::sync);
    CHECK(o->max_body_bytes == 16ull << 20);
    CHECK(o->body_budget_bytes == 64ull << 20);
    CHECK(o->max_connections == 10000);
    CHECK(o->idle_timeout_seconds == 10);
}

TEST_CASE("options take a separate or an attached value") {
    auto o = parse({"--listen", "0.0.0.0:0", "--shards=3", "--max-body", "1K", "--idle-timeout=2.5"});
    REQUIRE(o);
    CHECK(o->listen_host == "0.0.0.0");
    CHECK(o->listen_port == 0);
    CHECK(o->shards == 3);
    CHECK(o->max_body_bytes == 1024);
    CHECK(o->idle_timeout_seconds == 2.5);
}

TEST_CASE("sizes accept K M and G as powers of 1024") {
    CHECK(*parse_size("512") == 512);
    CHECK(*parse_size("64K") == 64ull << 10);
    CHECK(*parse_size("16M") == 16ull << 20);
    CHECK(*parse_size("2G") == 2ull << 30);
    CHECK_FALSE(parse_size("12Q"));
    CHECK_FALSE(parse_size("M"));
    CHECK_FALSE(parse_size("-1"));
    CHECK_FALSE(parse_size("99999999999999999999G"));
}

TEST_CASE("the environment sets options and the command line wins") {
    auto o = parse({"--shards", "2"}, {{"PERCORE_SHARDS", "5"}, {"PERCORE_DATA", "/tmp/x"}});
    REQUIRE(o);
    CHECK(o->shards == 2);
    CHECK(o->data_dir == "/tmp/x");
}

TEST_CASE("bad options are errors with one line of explanation") {
    for (auto args : std::vector<std::vector<const char*>>{{"--bogus", "1"},
                                                           {"--shards", "0"},
                                                           {"--shards", "many"},
                                                           {"--listen", "nowhere"},
                                                           {"--listen", "1.2.3.4:70000"},
                                                           {"--durability", "maybe"},
                                                           {"--max-body", "lots"},
                                                           {"--idle-timeout", "0"},
                                                           {"--max-connections", "0"},
                                                           {"--shards"},
                                                           {"stray"},
                                                           {"--tls-listen", "127.0.0.1:0"}}) {
        auto o = parse(args);
        CHECK_FALSE(o);
        if (!o) CHECK(o.error().reason.find('\n') == std::string::npos);
    }
}

TEST_CASE("a bad environment value names the variable") {
    auto o = parse({}, {{"PERCORE_SHARDS", "zero"}});
    REQUIRE_FALSE(o);
    CHECK(o.error().reason.find("PERCORE_SHARDS") != std::string::npos);
}

TEST_CASE("a follower names its primary's base URL and the file of its token, both or neither") {
    auto o = parse({"--follow", "https://10.0.0.1:8080/", "--follow-token-file", "/etc/percore/primary.token"});
    REQUIRE(o);
    CHECK(o->follow_url == "https://10.0.0.1:8080");
    CHECK(o->follow_token_file == "/etc/percore/primary.token");
    CHECK_FALSE(parse({}).value().follow_url);
    CHECK_FALSE(parse({"--follow", "http://10.0.0.1:8080"}));
    CHECK_FALSE(parse({"--follow-token-file", "f"}));
    CHECK_FALSE(parse({"--follow", "ftp://10.0.0.1", "--follow-token-file", "f"}));
    CHECK_FALSE(parse({"--follow", "http://10.0.0.1:8080/notes", "--follow-token-file", "f"}));
    auto env = parse({}, {{"PERCORE_FOLLOW", "https://primary.example"}, {"PERCORE_FOLLOW_TOKEN_FILE", "t"}});
    REQUIRE(env);
    CHECK(env->follow_url == "https://primary.example");
}

TEST_CASE("a follower refuses http:// to a primary that is not loopback unless --follow-insecure (SPEC §10)") {
    CHECK_FALSE(parse({"--follow", "http://10.0.0.1:8080", "--follow-token-file", "t"}));
    CHECK_FALSE(parse({"--follow", "http://primary.lan:8080", "--follow-token-file", "t"}));
    CHECK_FALSE(parse({"--follow", "http://127.0.0.1.nip.io:8080", "--follow-token-file", "t"}));
    auto refused = parse({"--follow", "http://10.0.0.1:8080", "--follow-token-file", "t"});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().reason.find("--follow-insecure") != std::string::npos);
    for (const char* loopback : {"http://127.0.0.1:8080", "http://127.9.9.9:1", "http://[::1]:8080",
                                 "http://localhost:8080"})
        CHECK_MESSAGE(parse({"--follow", loopback, "--follow-token-file", "t"}), loopback);
    auto insecure = parse({"--follow", "http://10.0.0.1:8080", "--follow-token-file", "t", "--follow-insecure"});
    REQUIRE(insecure);
    CHECK(insecure->follow_insecure);
    CHECK(parse({"--follow", "http://10.0.0.1:8080", "--follow-token-file", "t", "--follow-insecure=on"}));
    CHECK_FALSE(parse({"--follow", "http://10.0.0.1:8080", "--follow-token-file", "t", "--follow-insecure=off"}));
    CHECK(parse({"--follow", "http://10.0.0.1:8080", "--follow-token-file", "t"}, {{"PERCORE_FOLLOW_INSECURE", "1"}}));
    CHECK_FALSE(parse({"--follow-insecure"}));  // needs --follow
}

TEST_CASE("--follow-ca-file names the CA certificates of an https:// primary, and only of one") {
    auto o = parse({"--follow", "https://primary.lan", "--follow-token-file", "t", "--follow-ca-file", "/etc/ca.pem"});
    REQUIRE(o);
    CHECK(o->follow_ca_file == "/etc/ca.pem");
    CHECK_FALSE(parse({"--follow", "http://127.0.0.1:1", "--follow-token-file", "t", "--follow-ca-file", "c"}));
    CHECK_FALSE(parse({"--follow-ca-file", "c"}));
}

TEST_CASE("--deliveries-allow takes a CIDR list (SPEC §9), none by default, also from PERCORE_DELIVERIES_ALLOW") {
    auto none = parse({});
    REQUIRE(none);
    CHECK(none->deliveries_allow.empty());
    auto o = parse({"--deliveries-allow", "127.0.0.0/8,::1/128"});
    REQUIRE(o);
    REQUIRE(o->deliveries_allow.size() == 2);
    CHECK_FALSE(o->deliveries_allow[0].v6);
    CHECK(o->deliveries_allow[1].v6);
    auto env = parse({}, {{"PERCORE_DELIVERIES_ALLOW", "10.0.0.0/8"}});
    REQUIRE(env);
    CHECK(env->deliveries_allow.size() == 1);
    for (const char* bad : {"", "127.0.0.1", "127.0.0.0/33", "10.0.0.0/8,", "localhost/8"}) {
        auto b = parse({"--deliveries-allow", bad});
        REQUIRE_FALSE(b);
        CHECK(b.error().reason.find("--deliveries-allow") != std::string::npos);
    }
    auto b = parse({}, {{"PERCORE_DELIVERIES_ALLOW", "x"}});
    REQUIRE_FALSE(b);
    CHECK(b.error().reason.find("PERCORE_DELIVERIES_ALLOW") != std::string::npos);
}

TEST_CASE("--tls-listen keeps its host without brackets and its port, so [::1]:PORT binds ::1") {
    auto o = parse({"--tls-listen", "[::1]:8443", "--tls-cert", "c", "--tls-key", "k"});
    REQUIRE(o);
    CHECK(o->tls_listen == "[::1]:8443");
    CHECK(o->tls_listen_host == "::1");
    CHECK(o->tls_listen_port == 8443);
    CHECK_FALSE(auth_enabled(*o));  // ::1 is loopback
    auto lan = parse({"--tls-listen", "[fd00::1]:8443", "--tls-cert", "c", "--tls-key", "k"});
    REQUIRE(lan);
    CHECK(auth_enabled(*lan));
}

TEST_CASE("a board of a cluster names its etcd endpoints, its group, itself and its URL (SPEC §12)") {
    auto o = parse({"--cluster", "http://10.0.0.5:2379,http://10.0.0.6:2379", "--group", "g1", "--board", "b1",
                    "--advertise", "http://127.0.0.1:8080", "--cluster-ttl", "7"});
    REQUIRE(o);
    CHECK(o->cluster == "http://10.0.0.5:2379,http://10.0.0.6:2379");
    CHECK(o->group == "g1");
    CHECK(o->board == "b1");
    CHECK(o->advertise == "http://127.0.0.1:8080");
    CHECK(o->cluster_ttl_seconds == 7);
    CHECK(parse({}).value().cluster_ttl_seconds == 6);
}

TEST_CASE("a cluster board without its group, name or URL, or with --follow, is refused") {
    const char* base[] = {"--cluster", "http://10.0.0.5:2379", "--group", "g1", "--board", "b1", "--advertise",
                          "http://127.0.0.1:8080"};
    CHECK_FALSE(parse({base[0], base[1], base[2], base[3], base[4], base[5]}));
    CHECK_FALSE(parse({base[0], base[1], base[4], base[5], base[6], base[7]}));
    CHECK_FALSE(parse({"--group", "g1", "--board", "b1", "--advertise", "http://127.0.0.1:8080"}));
    CHECK_FALSE(parse({base[0], base[1], base[2], base[3], base[4], base[5], base[6], base[7], "--follow",
                       "http://127.0.0.1:9000", "--follow-token-file", "t"}));
}

TEST_CASE("a cluster's options refuse bad endpoints, names, URLs and TTLs") {
    auto with = [](const char* flag, const char* value) {
        std::vector<const char*> args = {"--cluster", "http://10.0.0.5:2379", "--group", "g1", "--board", "b1",
                                         "--advertise", "http://127.0.0.1:8080"};
        args.push_back(flag);
        args.push_back(value);
        return parse(args);
    };
    CHECK_FALSE(with("--cluster", "https://10.0.0.5:2379"));  // the gateway without TLS only (docs/decisions.md)
    CHECK_FALSE(with("--cluster", "http://10.0.0.5:2379/v3"));
    CHECK_FALSE(with("--cluster", "http://10.0.0.5:2379,http://10.0.0.5:2379"));
    CHECK_FALSE(with("--group", "G1"));
    CHECK_FALSE(with("--board", "_b"));
    CHECK_FALSE(with("--advertise", "http://127.0.0.1:8080/x"));
    CHECK_FALSE(with("--cluster-ttl", "4"));
    CHECK_FALSE(with("--cluster-ttl", "61"));
    CHECK(with("--cluster-ttl", "5"));
}

TEST_CASE("a cluster board with auth on needs a replication token file and no clear-text URL off loopback") {
    std::vector<const char*> args = {"--listen", "10.0.0.1:8080", "--cluster", "http://10.0.0.5:2379", "--group",
                                     "g1", "--board", "b1", "--advertise", "http://10.0.0.1:8080"};
    CHECK_FALSE(parse(args));  // no token file
    args.push_back("--follow-token-file");
    args.push_back("/etc/percore/replication.token");
    auto clear = parse(args);
    REQUIRE_FALSE(clear);
    CHECK(clear.error().reason.find("--follow-insecure") != std::string::npos);
    args.push_back("--follow-insecure");
    CHECK(parse(args));
}

TEST_CASE("replication is async with a two second sync timeout unless told otherwise") {
    auto o = parse({});
    REQUIRE(o);
    CHECK(o->replication == replication_mode::async);
    CHECK(o->sync_timeout_seconds == 2);
}

TEST_CASE("replication sync and a sync timeout are read from the command line and the environment") {
    auto o = parse({"--replication", "sync", "--sync-timeout", "5"});
    REQUIRE(o);
    CHECK(o->replication == replication_mode::sync);
    CHECK(o->sync_timeout_seconds == 5);
    auto from_env = parse({}, {{"PERCORE_REPLICATION", "sync"}});
    REQUIRE(from_env);
    CHECK(from_env->replication == replication_mode::sync);
}

TEST_CASE("replication modes other than async and sync and sync timeouts outside 1 to 60 are refused") {
    CHECK_FALSE(parse({"--replication", "semi"}));
    CHECK_FALSE(parse({"--sync-timeout", "0"}));
    CHECK_FALSE(parse({"--sync-timeout", "61"}));
    CHECK(parse({"--sync-timeout", "60"}));
}
