#include "shards/admin/admin_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "shards/admin/admin_client.hpp"
#include "shards/admin/admin_tables.hpp"
#include "shards/base/json_text.hpp"

namespace percore::shards {

namespace {

// 64 KiB: the largest ca_pem a delivery takes (docs/api.md §6), and far above any token file.
constexpr std::size_t max_admin_file_bytes = 64 * 1024;

struct admin_args {
    std::map<std::string, std::string, std::less<>> flags;  // --name value (switches: "1")
    std::vector<std::string> words;                          // the command and its operands
};

// The flags, each with whether it takes a value.
constexpr std::pair<std::string_view, bool> known_flags[] = {
    {"--server", true}, {"--token-file", true}, {"--data", true}, {"--ca-file", true}, {"--json", false},
    {"--scope", true},  {"--prefix", true},     {"--ttl", true},  {"--url", true},     {"--seal", false},
    {"--ca-pem-file", true}, {"--since", true},
};

result<admin_args> parse_args(int argc, char** argv) {
    admin_args a;
    for (int i = 0; i < argc; ++i) {
        std::string_view w = argv[i];
        if (!w.starts_with("--")) {
            a.words.emplace_back(w);
            continue;
        }
        const auto* known = std::find_if(std::begin(known_flags), std::end(known_flags),
                                         [&](const auto& f) { return f.first == w; });
        if (known == std::end(known_flags)) return std::unexpected(problem("unknown option " + std::string(w)));
        if (!known->second) {
            a.flags[std::string(w)] = "1";
        } else if (i + 1 >= argc) {
            return std::unexpected(problem(std::string(w) + " needs a value"));
        } else {
            a.flags[std::string(w)] = argv[++i];
        }
    }
    return a;
}

std::optional<std::string> flag(const admin_args& a, std::string_view name) {
    auto it = a.flags.find(name);
    return it == a.flags.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::string env_or(const char* name, std::string fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::move(fallback);
}

result<std::string> read_small_file(const std::string& path, std::string_view what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::unexpected(problem("cannot read " + std::string(what) + " " + path));
    std::ostringstream text;
    text << in.rdbuf();
    if (text.str().size() > max_admin_file_bytes)
        return std::unexpected(problem(std::string(what) + " " + path + " is larger than 64 KiB"));
    return text.str();
}

// --token-file, else DATA/admin.token when it exists (no token otherwise: auth off needs none).
result<std::string> token_of(const admin_args& a) {
    std::string path;
    if (auto f = flag(a, "--token-file")) {
        path = *f;
    } else {
        path = flag(a, "--data").value_or(env_or("PERCORE_DATA", "./percore-data")) + "/admin.token";
        if (::access(path.c_str(), F_OK) != 0) return std::string();
    }
    auto text = read_small_file(path, "the token file");
    if (!text) return std::unexpected(text.error());
    while (!text->empty() && (text->back() == '\n' || text->back() == '\r' || text->back() == ' ')) text->pop_back();
    return std::move(*text);
}

std::string server_of(const admin_args& a) {
    if (auto s = flag(a, "--server")) return *s;
    if (const char* s = std::getenv("PERCORE_SERVER"); s && *s) return s;
    return "http://" + env_or("PERCORE_LISTEN", "127.0.0.1:8080");
}

// A path segment: bytes outside RFC 3986's unreserved set percent-encoded.
std::string segment(std::string_view s) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

}  // namespace

const char* admin_usage() {
    return "usage: percore admin [--server URL] [--token-file FILE] [--data DIR] [--ca-file FILE] [--json] COMMAND\n"
           "  status                                  health, role, lag, shards, apps\n"
           "  apps list | get APP | delete APP\n"
           "  apps put APP [documents=N] [bytes=N] [max_document_bytes=N] [requests_per_second=N] [connections=N]\n"
           "  tokens list APP | revoke APP ID\n"
           "  tokens create APP --scope read|write|admin [--prefix P] [--ttl SECONDS]\n"
           "  deliveries list APP | get APP NAME | delete APP NAME\n"
           "  deliveries put APP NAME --url URL [--prefix P] [--seal] [--ca-pem-file FILE] [--since now|0|CURSOR]\n"
           "  replication-tokens list | create [--ttl SECONDS] | revoke ID\n"
           "  backup > FILE                           a tar of the data directory (percore restore FILE DIR)\n"
           "--server: PERCORE_SERVER, else http://$PERCORE_LISTEN, else http://127.0.0.1:8080\n"
           "--token-file: else DATA/admin.token (DATA: --data, PERCORE_DATA, ./percore-data), if it exists\n"
           "--ca-file: PEM CAs for an https:// server (else the system's); --json: the server's JSON as is\n"
           "exit status: 0 done, 1 refused or unreachable (one line says why), 2 usage\n";
}

namespace {

// What one command asks of the server.
struct admin_request {
    std::string method = "GET";
    std::string target;
    std::string body;
    admin_view view = admin_view::done;
};

result<std::string> quota_body(const std::vector<std::string>& settings) {
    std::string body = "{\"quota\":{";
    for (std::size_t i = 0; i < settings.size(); ++i) {
        const auto eq = settings[i].find('=');
        const std::string name = settings[i].substr(0, eq);
        const std::string value = eq == std::string::npos ? "" : settings[i].substr(eq + 1);
        if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos || value.size() > 19)
            return std::unexpected(problem("a quota is NAME=NUMBER, got '" + settings[i] + "'"));
        if (i) body.push_back(',');
        append_json_string(body, name);
        body.append(":").append(value);
    }
    return body + "}}";
}

result<admin_request> apps_request(const std::vector<std::string>& w) {
    const std::string_view verb = w.size() > 1 ? std::string_view(w[1]) : "";
    if (verb == "list" && w.size() == 2) return admin_request{"GET", "/_apps/", "", admin_view::app_list};
    if (w.size() < 3) return std::unexpected(problem("apps: expected list, get APP, put APP [QUOTA=N …] or delete APP"));
    const std::string target = "/_apps/" + segment(w[2]);
    if (verb == "get" && w.size() == 3) return admin_request{"GET", target, "", admin_view::app};
    if (verb == "delete" && w.size() == 3) return admin_request{"DELETE", target, "", admin_view::done};
    if (verb == "put") {
        auto body = quota_body(std::vector<std::string>(w.begin() + 3, w.end()));
        if (!body) return std::unexpected(body.error());
        return admin_request{"PUT", target, std::move(*body), admin_view::done};
    }
    return std::unexpected(problem("apps: expected list, get APP, put APP [QUOTA=N …] or delete APP"));
}

// {"scope":…,"prefix":…,"ttl":N} from the flags a token creation takes (replication: ttl only).
result<std::string> token_body(const admin_args& a, bool with_scope) {
    std::string body = "{";
    if (with_scope) {
        auto scope = flag(a, "--scope");
        if (!scope) return std::unexpected(problem("tokens create: --scope read|write|admin is required"));
        body.append("\"scope\":");
        append_json_string(body, *scope);
        if (auto prefix = flag(a, "--prefix")) {
            body.append(",\"prefix\":");
            append_json_string(body, *prefix);
        }
    }
    if (auto ttl = flag(a, "--ttl")) {
        if (ttl->empty() || ttl->find_first_not_of("0123456789") != std::string::npos || ttl->size() > 10)
            return std::unexpected(problem("--ttl expects seconds, got '" + *ttl + "'"));
        body.append(with_scope ? ",\"ttl\":" : "\"ttl\":").append(*ttl);
    }
    return body + "}";
}

result<admin_request> tokens_request(const admin_args& a) {
    const auto& w = a.words;
    const std::string_view verb = w.size() > 1 ? std::string_view(w[1]) : "";
    if (w.size() < 3) return std::unexpected(problem("tokens: expected list APP, create APP --scope S or revoke APP ID"));
    const std::string base = "/_apps/" + segment(w[2]) + "/tokens";
    if (verb == "list" && w.size() == 3) return admin_request{"GET", base, "", admin_view::token_list};
    if (verb == "revoke" && w.size() == 4) return admin_request{"DELETE", base + "/" + segment(w[3]), "", admin_view::done};
    if (verb == "create" && w.size() == 3) {
        auto body = token_body(a, true);
        if (!body) return std::unexpected(body.error());
        return admin_request{"POST", base, std::move(*body), admin_view::token_created};
    }
    return std::unexpected(problem("tokens: expected list APP, create APP --scope S or revoke APP ID"));
}

result<admin_request> replication_tokens_request(const admin_args& a) {
    const auto& w = a.words;
    const std::string_view verb = w.size() > 1 ? std::string_view(w[1]) : "";
    if (verb == "list" && w.size() == 2) return admin_request{"GET", "/_replication/tokens", "", admin_view::token_list};
    if (verb == "revoke" && w.size() == 3)
        return admin_request{"DELETE", "/_replication/tokens/" + segment(w[2]), "", admin_view::done};
    if (verb == "create" && w.size() == 2) {
        auto body = token_body(a, false);
        if (!body) return std::unexpected(body.error());
        return admin_request{"POST", "/_replication/tokens", std::move(*body), admin_view::token_created};
    }
    return std::unexpected(problem("replication-tokens: expected list, create [--ttl S] or revoke ID"));
}

result<std::string> delivery_body(const admin_args& a) {
    auto url = flag(a, "--url");
    if (!url) return std::unexpected(problem("deliveries put: --url URL is required"));
    std::string body = "{\"url\":";
    append_json_string(body, *url);
    for (const char* name : {"--prefix", "--since"}) {
        if (auto v = flag(a, name)) {
            body.append(",").append(name[2] == 'p' ? "\"prefix\":" : "\"since\":");
            append_json_string(body, *v);
        }
    }
    if (flag(a, "--seal")) body.append(",\"seal\":true");
    if (auto file = flag(a, "--ca-pem-file")) {
        auto pem = read_small_file(*file, "--ca-pem-file");
        if (!pem) return std::unexpected(pem.error());
        body.append(",\"ca_pem\":");
        append_json_string(body, *pem);
    }
    return body + "}";
}

result<admin_request> deliveries_request(const admin_args& a) {
    const auto& w = a.words;
    const std::string_view verb = w.size() > 1 ? std::string_view(w[1]) : "";
    constexpr const char* expected = "deliveries: expected list APP, get APP NAME, put APP NAME --url URL or delete APP NAME";
    if (w.size() < 3) return std::unexpected(problem(expected));
    const std::string base = "/_apps/" + segment(w[2]) + "/deliveries";
    if (verb == "list" && w.size() == 3) return admin_request{"GET", base, "", admin_view::delivery_list};
    if (w.size() != 4) return std::unexpected(problem(expected));
    const std::string target = base + "/" + segment(w[3]);
    if (verb == "get") return admin_request{"GET", target, "", admin_view::delivery};
    if (verb == "delete") return admin_request{"DELETE", target, "", admin_view::done};
    if (verb == "put") {
        auto body = delivery_body(a);
        if (!body) return std::unexpected(body.error());
        return admin_request{"PUT", target, std::move(*body), admin_view::delivery_created};
    }
    return std::unexpected(problem(expected));
}

result<admin_request> request_of(const admin_args& a) {
    if (a.words.empty()) return std::unexpected(problem("no command"));
    const std::string& c = a.words[0];
    if (c == "status" && a.words.size() == 1) return admin_request{"GET", "/_health", "", admin_view::health};
    if (c == "backup" && a.words.size() == 1) return admin_request{"GET", "/_backup", "", admin_view::download};
    if (c == "apps") return apps_request(a.words);
    if (c == "tokens") return tokens_request(a);
    if (c == "deliveries") return deliveries_request(a);
    if (c == "replication-tokens") return replication_tokens_request(a);
    return std::unexpected(problem("unknown command '" + c + "'"));
}

int usage_error(const std::string& why) {
    std::fprintf(stderr, "percore admin: %s (usage: percore help admin)\n", why.c_str());
    return 2;
}

int refused(const admin_request& r, const admin_answer& answer) {
    std::fprintf(stderr, "percore admin: %s %s: %s\n", r.method.c_str(), r.target.c_str(),
                 refusal_line(answer.status, answer.body).c_str());
    return 1;
}

// status: /_health, then the app count when the token may list apps (a 401/403 there is no failure).
int run_status(admin_client& client, bool json) {
    auto health = client.call("GET", "/_health");
    if (!health) {
        std::fprintf(stderr, "percore admin: %s\n", health.error().reason.c_str());
        return 1;
    }
    std::optional<admin_answer> apps;
    if (auto listed = client.call("GET", "/_apps/"); listed && listed->status == 200) apps = std::move(*listed);
    std::fputs(status_text(*health, apps ? &*apps : nullptr, json).c_str(), stdout);
    return health->status == 200 ? 0 : 1;
}

// backup: the tar to standard output as it arrives, never to a terminal.
int run_backup(admin_client& client, const admin_request& r) {
    if (::isatty(STDOUT_FILENO)) {
        std::fputs("percore admin: backup writes a tar to standard output: redirect it (percore admin backup > FILE)\n",
                   stderr);
        return 2;
    }
    auto answer = client.download(r.target, stdout);
    if (!answer) {
        std::fprintf(stderr, "percore admin: %s\n", answer.error().reason.c_str());
        return 1;
    }
    if (answer->status < 200 || answer->status > 299) return refused(r, *answer);
    return 0;
}

}  // namespace

int run_admin(int argc, char** argv) {
    auto args = parse_args(argc, argv);
    if (!args) return usage_error(args.error().reason);
    auto request = request_of(*args);
    if (!request) return usage_error(request.error().reason);
    auto server = parse_server_url(server_of(*args));
    if (!server) return usage_error(server.error().reason);
    auto token = token_of(*args);
    std::string ca_pem;
    if (auto f = flag(*args, "--ca-file")) {
        auto pem = read_small_file(*f, "--ca-file");
        if (!pem) token = std::unexpected(pem.error());
        else ca_pem = std::move(*pem);
    }
    if (!token) {
        std::fprintf(stderr, "percore admin: %s\n", token.error().reason.c_str());
        return 1;
    }
    const bool json = flag(*args, "--json").has_value();
    admin_client client(std::move(*server), std::move(*token), std::move(ca_pem));
    if (request->view == admin_view::health) return run_status(client, json);
    if (request->view == admin_view::download) return run_backup(client, *request);
    auto answer = client.call(request->method, request->target, request->body);
    if (!answer) {
        std::fprintf(stderr, "percore admin: %s\n", answer.error().reason.c_str());
        return 1;
    }
    if (answer->status < 200 || answer->status > 299) return refused(*request, *answer);
    std::fputs(json ? json_text(*answer).c_str() : view_text(request->view, *answer).c_str(), stdout);
    return 0;
}

}  // namespace percore::shards
