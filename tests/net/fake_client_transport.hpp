// fake_client_transport: a client_transport driven by the test. Each open() begins a new "socket"
// (a fake_transport, kept in `sockets` so that a test can look at what every connection carried);
// the test finishes the connect with connected() and says when readiness happens with ready(), as
// the shard's epoll set would. post_ready() only counts: the test's ready() stands for the posted turn.
#pragma once

#include <memory>
#include <vector>

#include "net/client_connection.hpp"
#include "fake_transport.hpp"

namespace percore::net::testing {

class fake_client_transport final : public client_transport {
public:
    std::vector<std::unique_ptr<fake_transport>> sockets;
    int posted = 0;

    fake_transport& socket() { return *sockets.back(); }
    const fake_transport& socket() const { return *sockets.back(); }
    void ready() {
        if (events_) events_->on_ready();
    }
    // The connect ends (open or failed), and its edge is reported.
    void connected(open_state result = open_state::open, int error = 0) {
        progress_ = result;
        error_ = error;
        ready();
    }

    void open() override {
        sockets.push_back(std::make_unique<fake_transport>());
        progress_ = open_state::connecting;
        open_ = true;
    }
    open_state open_progress() override { return progress_; }
    int open_error() const override { return error_; }
    bool is_open() const override { return open_; }
    void post_ready() override { ++posted; }

    bool readable() const override { return open_ && socket().readable(); }
    io_result read(std::span<char> into) override { return socket().read(into); }
    io_result write(std::span<const iovec> pieces) override { return socket().write(pieces); }
    io_result write_file(int fd, std::uint64_t offset, std::size_t bytes) override {
        return socket().write_file(fd, offset, bytes);
    }
    void shutdown_write() override { socket().shutdown_write(); }
    void close() override {
        socket().close();
        open_ = false;
        events_ = nullptr;
    }

private:
    open_state progress_ = open_state::connecting;
    int error_ = 0;
    bool open_ = false;
};

}  // namespace percore::net::testing
