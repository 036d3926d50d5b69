// percore: the command line (SPEC §1) — serve, check, restore, version, help.
//
// serve: parse options (exit 2 on a bad one), lock the data directory (exit 1), bind every shard's
// SO_REUSEPORT socket, start the shards, print the ready line, then wait for SIGTERM/SIGINT on this
// thread and stop gracefully (exit 0 within 5 s).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <expected>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <thread>

#include <boost/version.hpp>

#include "crypto/digest.hpp"
#include "crypto/tls.hpp"
#include "shards/admin/admin_command.hpp"
#include "shards/apps/admin_token.hpp"
#include "shards/server/options.hpp"
#include "shards/base/key_owner.hpp"
#include "shards/runtime/group.hpp"
#include "shards/server/server.hpp"
#include "shards/server/service_notify.hpp"
#include "store/backup_restore.hpp"
#include "store/check.hpp"
#include "store/data_directory.hpp"
#include "store/data_layout.hpp"
#include "store/env.hpp"

namespace {

using namespace percore;

constexpr std::string_view version_text = "0.1.0";
constexpr auto forced_exit_after = std::chrono::milliseconds(4800);

void log_line(const std::string& line) {
    std::string out = "percore: " + line + "\n";
    ssize_t n = ::write(STDERR_FILENO, out.data(), out.size());
    (void)n;
}

// Every connection takes a file descriptor, and past the open-file limit a new connection can be
// neither served nor refused: it waits unanswered in the listen backlog. So the soft limit is
// raised to the hard one, and where even that is short, --max-connections is lowered to what fits
// beside the descriptors the shards need for themselves and their store's files (as Redis lowers
// maxclients); connections past it are then refused with 503 like any past --max-connections.
void fit_connections_to_descriptor_limit(shards::server_options& opts, unsigned shard_count) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
    if (lim.rlim_cur < lim.rlim_max) {
        rlimit raised = lim;
        raised.rlim_cur = lim.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
    }
    if (lim.rlim_cur == RLIM_INFINITY) return;
    std::uint64_t reserved = 64 + 64 * static_cast<std::uint64_t>(shard_count);
    std::uint64_t fit = lim.rlim_cur > reserved + shard_count ? (lim.rlim_cur - reserved) / shard_count : 1;
    if (opts.max_connections <= fit) return;
    log_line("--max-connections " + std::to_string(opts.max_connections) + " per shard lowered to " +
             std::to_string(fit) + ": the open file limit is " + std::to_string(lim.rlim_cur) + " for " +
             std::to_string(shard_count) + " shards");
    opts.max_connections = fit;
}

// A shard stuck in a system call (a hung disk) cannot be told to stop: SPEC §1 bounds the stop.
void exit_if_not_stopped_in_time(int code) {
    std::thread([code] {
        std::this_thread::sleep_for(forced_exit_after);
        log_line("shards did not stop in time; exiting");
        std::_Exit(code);
    }).detach();
}

std::string build_flags() {
    std::string flags = "g++ " __VERSION__ ", -std=c++23";
#ifdef NDEBUG
    flags += ", release";
#else
    flags += ", debug assertions";
#endif
#if defined(__SANITIZE_ADDRESS__)
    flags += ", address sanitizer";
#endif
#if defined(__SANITIZE_THREAD__)
    flags += ", thread sanitizer";
#endif
#if defined(__aarch64__)
    flags += ", aarch64";
#elif defined(__x86_64__)
    flags += ", x86_64";
#endif
    flags += ", Boost.Asio " + std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000);
    return flags;
}

std::string general_usage() {
    return "usage: percore <command> [options]\n"
           "  serve [options]    run the server\n"
           "  check [--repair] DIR  verify a stopped server's data directory\n"
           "  restore TAR DIR    unpack a backup (GET /_backup; TAR - is stdin) into a new data directory\n"
           "  admin COMMAND      administer a running server over its HTTP API (apps, tokens, deliveries, …)\n"
           "  version            print the version and build flags\n"
           "  help [command]     usage\n";
}

// The signals the main thread waits for; blocked in every thread (the shards inherit the mask).
// SIGUSR1 only with the watchdog's test hook (service_notify.hpp).
sigset_t block_signals(bool stall_hook) {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    if (stall_hook) sigaddset(&signals, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    return signals;
}

// Binds every shard (HTTP, and HTTPS with `tls`); the ports, or the line to print before exit 1.
shards::result<std::pair<std::uint16_t, std::uint16_t>> bind_all(shards::server& server,
                                                          crypto::tls_server* tls) {
    auto port = server.listen();
    if (!port) return std::unexpected(port.error());
    std::uint16_t tls_port = 0;
    if (tls) {
        auto bound = server.listen_tls(*tls);
        if (!bound) return std::unexpected(bound.error());
        tls_port = *bound;
    }
    return std::pair{*port, tls_port};
}

// Starts the shards and waits until they serve; the exit code when the start ended otherwise.
std::optional<int> start_or_exit(shards::server& server, shards::service_notify& notify) {
    notify.recovering();
    server.start();
    int early_signal = server.wait_started_or_signal();  // a failed shard stops the start, so does SIGTERM
    if (std::string why = server.failure(); !why.empty()) {
        log_line(why);
        exit_if_not_stopped_in_time(1);
        server.stop();
        server.join();
        return 1;
    }
    if (early_signal == 0) return std::nullopt;
    log_line(std::string("received ") + (early_signal == SIGTERM ? "SIGTERM" : "SIGINT") + " while starting, stopping");
    notify.stopping();
    exit_if_not_stopped_in_time(0);
    server.stop();
    server.join();
    if (std::string why = server.failure(); !why.empty()) {
        log_line(why);  // found before the stop reached that shard
        return 1;
    }
    log_line("stopped");
    return 0;
}

// Prints the ready line; returns the HOST:PORT it names.
std::string announce(const shards::server_options& opts, unsigned count, std::uint16_t port, std::uint16_t tls_port) {
    std::string host = opts.listen_host.find(':') != std::string::npos ? "[" + opts.listen_host + "]" : opts.listen_host;
    std::string ready = "percore listening on http://" + host + ":" + std::to_string(port) +
                        " shards=" + std::to_string(count);
    if (opts.tls_listen) {
        std::string tls_host = opts.tls_listen->substr(0, opts.tls_listen->rfind(':'));
        ready += " https://" + tls_host + ":" + std::to_string(tls_port);
    }
    ready += "\n";
    std::fwrite(ready.data(), 1, ready.size(), stdout);
    std::fflush(stdout);
    log_line("serving " + host + ":" + std::to_string(port) + " with " + std::to_string(count) + " shards, data " +
             opts.data_dir + " (durability " +
             (opts.durability == shards::durability_mode::sync ? "sync" : "none: writes are acknowledged before fdatasync") + ")");
    return host + ":" + std::to_string(port);
}

// Serves until SIGTERM or SIGINT; SIGHUP reloads the TLS certificate and key. The wait also
// keeps systemd's watchdog (service_notify.hpp).
void wait_for_stop(const sigset_t& signals, const shards::server_options& opts, crypto::tls_server* tls,
                   shards::service_notify& notify) {
    for (;;) {
        int sig = notify.wait_signal(signals);
        if (sig == SIGHUP) {
            if (!tls) {
                log_line("SIGHUP: nothing to reload (no TLS configured)");
            } else if (auto r = tls->reload(*opts.tls_cert, *opts.tls_key); !r) {
                log_line("SIGHUP: kept the current certificate: " + r.error());
            } else {
                log_line("SIGHUP: reloaded " + *opts.tls_cert + " and " + *opts.tls_key + " for new connections");
            }
            continue;
        }
        log_line(std::string("received ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") + ", stopping");
        notify.stopping();
        return;
    }
}

// --follow-ca-file: the operator's CA certificates for an https:// primary, read once at start
// (PEM text, at most max_follow_ca_bytes: a bundle of a few hundred certificates).
std::expected<std::string, std::string> read_follow_ca(const std::string& path) {
    constexpr std::size_t max_follow_ca_bytes = 1u << 20;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return std::unexpected("--follow-ca-file " + path + ": " + std::strerror(errno));
    std::string pem(max_follow_ca_bytes + 1, '\0');
    const std::size_t n = std::fread(pem.data(), 1, pem.size(), f);
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) return std::unexpected("--follow-ca-file " + path + ": cannot be read");
    if (n > max_follow_ca_bytes) return std::unexpected("--follow-ca-file " + path + ": larger than 1 MiB");
    if (n == 0) return std::unexpected("--follow-ca-file " + path + ": empty");
    pem.resize(n);
    return pem;
}

// --follow's credentials, read once at start (SPEC §10): the replication token (an admin token is
// refused: it would reach everything on the primary) and the CA of an https:// primary. 0, or the
// exit code after its one line.
int load_follow_credentials(shards::server_options& opts) {
    auto token = shards::read_token_file(*opts.follow_token_file, "--follow-token-file", log_line);
    if (!token && !opts.cluster.empty()) {  // read again whenever the board starts to follow (follower_slot.hpp)
        log_line(token.error().reason + "; this board copies nothing until it holds a replication token");
        token = std::string();
    }
    if (!token) {
        log_line(token.error().reason);
        return 1;
    }
    if (token->starts_with("pca_")) {
        log_line("--follow-token-file holds the primary's admin token; a follower needs a replication "
                 "token: POST /_replication/tokens on the primary");
        return 2;
    }
    opts.follow_token = std::move(*token);
    if (opts.follow_ca_file) {
        auto pem = read_follow_ca(*opts.follow_ca_file);
        if (!pem) {
            log_line(pem.error());
            return 1;
        }
        opts.follow_ca_pem = std::move(*pem);
    }
    if (opts.follow_insecure && opts.follow_url && opts.follow_url->starts_with("http://"))
        log_line("--follow-insecure: the replication token travels in clear to " + *opts.follow_url);
    return 0;
}

// --auth: with auth on, the admin token (read, or made and written 0600) and the crypto module
// for hashing tokens; one line and exit 1 when either cannot be had.
shards::result<shards::auth_config> auth_of(const shards::server_options& opts) {
    shards::auth_config auth;
    if (!shards::auth_enabled(opts)) {
        shards::server_options loopback = opts;
        loopback.auth = shards::auth_mode::automatic;
        if (shards::auth_enabled(loopback))  // --auth off where auto would be on: say so, once
            log_line("warning: --auth off on a non-loopback address: every request is served without a token");
        else  // loopback only: a browser page must not reach us by DNS rebinding (SPEC §7)
            auth.loopback_hosts_only = true;
        return auth;
    }
    auto token = shards::load_or_create_admin_token(shards::admin_token_path(opts), log_line);
    if (!token) return std::unexpected(token.error());
    auto api = crypto::load_crypto_module();
    if (!api) return std::unexpected("--auth on: " + std::string(api.error().message()));
    auto digest = crypto::sha256(**api, std::span<const char>(token->data(), token->size()));
    if (!digest) return std::unexpected("--auth on: cannot hash the admin token: " + std::string(digest.error().message()));
    auth.on = true;
    auth.admin_token = std::move(*token);
    auth.admin_digest = *digest;
    auth.api = *api;
    log_line("auth on: requests need a bearer token; the admin token is in " + shards::admin_token_path(opts));
    return auth;
}

int serve(int argc, char** argv) {
    auto parsed = shards::parse_serve_options(std::span<const char* const>(argv, static_cast<std::size_t>(argc)),
                                              [](const char* name) -> const char* { return std::getenv(name); });
    if (!parsed) {
        log_line(parsed.error().reason);
        return 2;
    }
    shards::server_options opts = *parsed;
    if (opts.follow_token_file)
        if (int exit_code = load_follow_credentials(opts)) return exit_code;
    // HTTPS: the crypto module (and OpenSSL with it) is loaded only here, when asked for; a missing
    // module, or a certificate or key that cannot be used, stops the start with one line, exit 1.
    std::optional<crypto::tls_server> tls;
    if (opts.tls_listen) {
        auto made = crypto::make_tls_server(*opts.tls_cert, *opts.tls_key);
        if (!made) {
            log_line("--tls-listen: " + made.error());
            return 1;
        }
        tls.emplace(std::move(*made));
    }
    std::vector<int> cpus = runtime::allowed_cpus();
    unsigned count = opts.shards ? opts.shards : static_cast<unsigned>(std::min<std::size_t>(cpus.size(), shards::max_shards));
    fit_connections_to_descriptor_limit(opts, count);
    // systemd's notify protocol (SPEC §11): read before the signals are blocked, which the
    // watchdog's test hook adds SIGUSR1 to.
    shards::service_notify notify([](const char* name) -> const char* { return std::getenv(name); }, count, log_line);
    auto dir = store::data_directory::open_locked(opts.data_dir);
    if (!dir) {
        log_line(dir.error());
        return 1;
    }
    if (std::string warning = store::wide_mode_warning(opts.data_dir); !warning.empty()) log_line(warning);
    sigset_t signals = block_signals(notify.stall_hook());
    auto layout = store::open_layout(store::posix_env(), opts.data_dir, count, shards::owner_of, log_line);
    if (!layout) {
        log_line(layout.error());
        return 1;
    }
    auto auth = auth_of(opts);  // after the layout: a new admin token file goes into a data directory that exists
    if (!auth) {
        log_line(auth.error().reason);
        return 1;
    }
    shards::server server(opts, *layout, cpus, std::move(*auth));
    server.on_shard_recovered([&notify] { notify.shard_recovered(); });
    notify.status("binding " + opts.listen_host + ":" + std::to_string(opts.listen_port));
    auto ports = bind_all(server, tls ? &*tls : nullptr);
    if (!ports) {
        log_line(ports.error().reason);
        return 1;
    }
    if (auto code = start_or_exit(server, notify)) return *code;
    server.set_serving();
    std::string where = announce(opts, count, ports->first, ports->second);
    notify.ready(shards::serving_status(count, where),
                 [&server](unsigned shard, std::function<void()> f) { server.run_on_shard(shard, std::move(f)); });
    wait_for_stop(signals, opts, tls ? &*tls : nullptr, notify);
    if (!opts.cluster.empty() && !server.hand_over())
        log_line("cluster: the handover did not finish in time; the lease ends by itself");
    exit_if_not_stopped_in_time(0);
    server.stop();
    server.join();
    log_line("stopped");
    return 0;
}

std::string check_usage() {
    return "usage: percore check [--repair] DIR\n"
           "  Verifies a stopped server's data directory offline (SPEC 11): FORMAT, every shard's\n"
           "  segment lists and every record's checksum, with the same rules as the server's start.\n"
           "  Prints a line per shard (documents, bytes, torn tails, damage with file and byte offset).\n"
           "  --repair  also makes the repairs the server's start would make (cut a torn tail, remove\n"
           "            segments that hold nothing) in shards without damage; never touches damage.\n"
           "  exit 0: clean (torn tails are normal after a crash), 1: damaged, 2: usage, or the\n"
           "  directory cannot be checked (missing, unreadable, in use by a running server)\n";
}

// percore check [--repair] DIR (SPEC §11): the report on stdout; exit 0 clean, 1 damaged, 2 usage
// or cannot check (docs/decisions.md, "percore check").
int check(int argc, char** argv) {
    bool repair = false;
    std::string dir;
    for (int i = 0; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "--repair") {
            repair = true;
        } else if (arg.starts_with("-") || !dir.empty()) {
            log_line("check: unexpected argument '" + std::string(arg) + "'");
            std::fputs(check_usage().c_str(), stderr);
            return 2;
        } else {
            dir = arg;
        }
    }
    if (dir.empty()) {
        std::fputs(check_usage().c_str(), stderr);
        return 2;
    }
    auto lock = store::data_directory::lock_existing(dir, repair);
    if (!lock) {
        log_line(lock.error());
        return 2;
    }
    auto report = store::check_data_directory(store::posix_env(), dir, repair);
    if (!report) {
        log_line(report.error());
        return 2;
    }
    for (const std::string& line : store::report_lines(*report)) std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
    switch (report->outcome()) {
    case store::check_report::verdict::clean: return 0;
    case store::check_report::verdict::damaged: return 1;
    case store::check_report::verdict::incomplete: return 2;
    }
    return 2;
}

std::string restore_usage() {
    return "usage: percore restore TAR DIR\n"
           "  Unpacks a backup taken with GET /_backup (SPEC 11) into DIR, which must not exist or be\n"
           "  empty; TAR - reads it from stdin. Then: percore serve --data DIR.\n"
           "  exit 0: restored, 1: refused (DIR not empty, not a complete percore backup) or failed,\n"
           "  2: usage\n";
}

// percore restore TAR DIR (SPEC §11, store/backup_restore.hpp): what it restored on stdout.
int restore(int argc, char** argv) {
    if (argc != 2) {
        std::fputs(restore_usage().c_str(), stderr);
        return 2;
    }
    const std::string_view tar = argv[0];
    const std::string dir = argv[1];
    const int input = tar == "-" ? STDIN_FILENO : ::open(argv[0], O_RDONLY | O_CLOEXEC);
    if (input < 0) {
        log_line("restore: cannot open " + std::string(tar) + ": " + std::strerror(errno));
        return 1;
    }
    auto restored = store::restore_backup(input, dir);
    if (input != STDIN_FILENO) ::close(input);
    if (!restored) {
        log_line("restore: " + restored.error());
        return 1;
    }
    std::string line = "restored " + std::to_string(restored->shards) + " shards (" + std::to_string(restored->files) +
                       " files, " + std::to_string(restored->bytes) + " bytes) into " + dir + "\n";
    std::fputs(line.c_str(), stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fputs(general_usage().c_str(), stderr);
        return 2;
    }
    std::string_view command = argv[1];
    if (command == "serve") return serve(argc - 2, argv + 2);
    if (command == "check") return check(argc - 2, argv + 2);
    if (command == "restore") return restore(argc - 2, argv + 2);
    if (command == "admin") return shards::run_admin(argc - 2, argv + 2);
    if (command == "version" || command == "--version") {
        std::string out = "percore " + std::string(version_text) + " (" + build_flags() + ")\n";
        std::fputs(out.c_str(), stdout);
        return 0;
    }
    if (command == "help" || command == "--help" || command == "-h") {
        if (argc >= 3 && std::string_view(argv[2]) == "serve") std::fputs(shards::serve_usage().c_str(), stdout);
        else if (argc >= 3 && std::string_view(argv[2]) == "check") std::fputs(check_usage().c_str(), stdout);
        else if (argc >= 3 && std::string_view(argv[2]) == "restore") std::fputs(restore_usage().c_str(), stdout);
        else if (argc >= 3 && std::string_view(argv[2]) == "admin") std::fputs(shards::admin_usage(), stdout);
        else std::fputs(general_usage().c_str(), stdout);
        return 0;
    }
    log_line("unknown command '" + std::string(command) + "' (try: percore help)");
    return 2;
}
