// etcd_cluster: a real etcd cluster for a test — `members` etcd processes on 127.0.0.1, free ports,
// data directories in a temp_dir, started by the constructor (which waits until every member
// answers /health with a leader) and killed (SIGKILL, reaped) by the destructor, which also removes
// the data. etcd not installed is a FAILED test with a message saying so, never a skip: these are
// the only tests of the gateway percore's failover speaks to (SPEC §12).
#pragma once

#include <doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../temp_dir.hpp"

extern char** environ;

namespace percore::test {

class etcd_cluster {
public:
    explicit etcd_cluster(std::size_t members = 3) {
        const std::string etcd = find_etcd();
        if (etcd.empty())
            FAIL("etcd is not installed (no `etcd` on PATH): these tests need a real etcd 3.4+ "
                 "(Debian: apt-get install etcd-server; .ci/deps installs it)");
        std::vector<int> held;  // the ports' sockets stay bound until every port is chosen
        for (std::size_t i = 0; i < members; ++i) {
            client_ports_.push_back(free_port(held));
            peer_ports_.push_back(free_port(held));
        }
        for (int fd : held) ::close(fd);
        std::string initial;
        for (std::size_t i = 0; i < members; ++i)
            initial += (i ? "," : "") + name(i) + "=" + url(peer_ports_[i]);
        try {  // a member that does not start fails the test, and takes none of the others' processes with it
            for (std::size_t i = 0; i < members; ++i) pids_.push_back(spawn(etcd, i, initial));
            wait_ready();
        } catch (...) {
            kill_all();
            throw;
        }
    }
    ~etcd_cluster() { kill_all(); }
    etcd_cluster(const etcd_cluster&) = delete;
    etcd_cluster& operator=(const etcd_cluster&) = delete;

    // "http://127.0.0.1:P0,http://127.0.0.1:P1,…" in member order.
    std::string endpoints() const {
        std::string out;
        for (std::size_t i = 0; i < client_ports_.size(); ++i) out += (i ? "," : "") + url(client_ports_[i]);
        return out;
    }
    std::string client_url(std::size_t i) const { return url(client_ports_.at(i)); }

    // SIGKILL, reaped: the member is gone at once, as a crashed machine's.
    void kill_member(std::size_t i) {
        if (pids_.at(i) <= 0) return;
        ::kill(pids_[i], SIGKILL);
        int status = 0;
        ::waitpid(pids_[i], &status, 0);
        pids_[i] = -1;
    }

private:
    void kill_all() {
        for (std::size_t i = 0; i < pids_.size(); ++i) kill_member(i);
    }

    static std::string url(int port) { return "http://127.0.0.1:" + std::to_string(port); }
    static std::string name(std::size_t i) { return "m" + std::to_string(i); }

    static std::string find_etcd() {
        const char* path = std::getenv("PATH");
        std::stringstream dirs(path ? path : "/usr/bin:/bin");
        for (std::string dir; std::getline(dirs, dir, ':');) {
            const std::string candidate = (dir.empty() ? "." : dir) + "/etcd";
            if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        }
        return {};
    }

    // An ephemeral port of 127.0.0.1 nobody else holds while `held` keeps it bound.
    static int free_port(std::vector<int>& held) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(fd >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        socklen_t size = sizeof a;
        REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) == 0);
        held.push_back(fd);
        return ntohs(a.sin_port);
    }

    pid_t spawn(const std::string& etcd, std::size_t i, const std::string& initial) {
        const std::string data = dir_ / name(i);
        std::vector<std::string> args = {
            etcd, "--name", name(i), "--data-dir", data,
            "--listen-client-urls", url(client_ports_[i]), "--advertise-client-urls", url(client_ports_[i]),
            "--listen-peer-urls", url(peer_ports_[i]), "--initial-advertise-peer-urls", url(peer_ports_[i]),
            "--initial-cluster", initial, "--initial-cluster-state", "new",
            "--initial-cluster-token", "percore-test"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        const std::string log = data + ".log";
        posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_adddup2(&actions, 1, 2);
        pid_t pid = -1;
        const int rc = ::posix_spawn(&pid, etcd.c_str(), &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        REQUIRE_MESSAGE(rc == 0, "cannot start " << etcd);
        return pid;
    }

    // One blocking GET /health on 127.0.0.1:port: true when it says {"health":"true"} (a leader).
    static bool healthy(int port) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return false;
        timeval t{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        std::string got;
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
            const std::string ask = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
            if (::send(fd, ask.data(), ask.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(ask.size())) {
                char buffer[1024];
                for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) got.append(buffer, static_cast<std::size_t>(n));
            }
        }
        ::close(fd);
        return got.find("\"health\":\"true\"") != std::string::npos;
    }

    // Every member healthy within 30 s (a three-member cluster elects its leader in ~2 s here).
    void wait_ready() {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        for (std::size_t i = 0; i < client_ports_.size(); ++i) {
            while (!healthy(client_ports_[i])) {
                if (std::chrono::steady_clock::now() >= until) {
                    std::ifstream log(dir_ / (name(i) + ".log"));
                    std::stringstream text;
                    text << log.rdbuf();
                    const std::string all = text.str();
                    FAIL("etcd member " << name(i) << " not healthy within 30 s; its log ends:\n"
                                        << all.substr(all.size() > 3000 ? all.size() - 3000 : 0));
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        }
    }

    temp_dir dir_;
    std::vector<int> client_ports_;
    std::vector<int> peer_ports_;
    std::vector<pid_t> pids_;
};

}  // namespace percore::test
