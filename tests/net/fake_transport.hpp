// fake_transport: a transport driven by the test — scripted input in pieces, a write window that
// says how many bytes the "socket" takes before it would block, and a record of everything sent —
// so the connection state machine can be run through every byte split and readiness order
// without sockets or sleeps (like store/env's fault layer for the store).
//
// The test decides when readiness happens: deliver()/open_window() change what the transport can
// do, ready() tells the connection (as the shard's epoll set would, once per edge).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

#include "net/transport.hpp"

namespace percore::net::testing {

class fake_transport final : public transport {
public:
    // input
    void deliver(std::string_view bytes) { input_.append(bytes); }
    void deliver_eof() { eof_ = true; }
    void fail_next_read() { fail_read_ = true; }
    // at most this many bytes per read() (1: byte by byte); a read that returns less than asked
    // does not end readability here, unlike a socket, so the connection must cope either way
    std::size_t read_chunk = std::numeric_limits<std::size_t>::max();
    // output
    void set_window(std::size_t bytes) { window_ = bytes; }
    void open_window(std::size_t bytes) { window_ += bytes; }
    // readiness: what the epoll set would report
    void ready() {
        ++ready_calls;
        if (events_) events_->on_ready();
    }

    std::string written;
    bool closed = false;
    bool write_shut = false;
    bool stream_ended = false;
    int writes_with_more = 0;
    bool low_latency = false;
    int ready_calls = 0;
    std::size_t reads = 0;
    std::size_t unread() const { return input_.size() - read_pos_; }

    bool readable() const override { return read_pos_ < input_.size() || eof_ || fail_read_; }
    io_result read(std::span<char> into) override {
        ++reads;
        if (fail_read_) return io_result::failed();
        if (read_pos_ == input_.size()) return eof_ ? io_result::eof() : io_result::would_block();
        std::size_t n = std::min({into.size(), input_.size() - read_pos_, read_chunk});
        std::copy_n(input_.data() + read_pos_, n, into.data());
        read_pos_ += n;
        return io_result::ok(n);
    }
    // Records which writes said more follows (their bytes are written the same).
    io_result write_more(std::span<const iovec> pieces) override {
        io_result r = write(pieces);
        if (r.status == io_status::ok) ++writes_with_more;
        return r;
    }
    io_result write(std::span<const iovec> pieces) override {
        if (window_ == 0) return io_result::would_block();
        std::size_t taken = 0;
        for (const iovec& v : pieces) {
            std::size_t n = std::min(v.iov_len, window_ - taken);
            written.append(static_cast<const char*>(v.iov_base), n);
            taken += n;
            if (taken == window_) break;
        }
        window_ -= taken;
        return io_result::ok(taken);
    }
    io_result write_file(int fd, std::uint64_t offset, std::size_t bytes) override {
        if (window_ == 0) return io_result::would_block();
        std::string buf(std::min(bytes, window_), '\0');
        ssize_t got = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(offset));
        if (got <= 0) return io_result::failed();
        written.append(buf.data(), static_cast<std::size_t>(got));
        window_ -= static_cast<std::size_t>(got);
        return io_result::ok(static_cast<std::size_t>(got));
    }
    void shutdown_write() override { write_shut = true; }
    void end_stream() override { stream_ended = true; }
    void set_low_latency() override { low_latency = true; }
    void close() override {
        closed = true;
        events_ = nullptr;
    }

private:
    std::string input_;
    std::size_t read_pos_ = 0;
    bool eof_ = false;
    bool fail_read_ = false;
    std::size_t window_ = std::numeric_limits<std::size_t>::max();
};

}  // namespace percore::net::testing
