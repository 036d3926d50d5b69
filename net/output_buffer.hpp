// output_buffer: the bytes a connection will send next, as one reusable buffer plus references to
// large bodies that are sent from where they lie (a gathered write), never copied.
//
// Contract
// - One per connection, used by its shard's thread only.
// - append() copies into the buffer, which grows on demand and keeps its capacity between
//   requests (no allocation per request in the steady state); shrink() gives back a buffer grown
//   past `keep_bytes` once everything has been sent.
// - add_reference() queues `size` bytes at `data` to be sent at this point of the stream; `release`
//   is called once with `context` when they have been sent or the connection is dropped.
// - gather()/consume() turn what is queued into iovecs for sendmsg() and advance past what the
//   kernel took.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

namespace percore::net {

class output_buffer {
public:
    using release_fn = void (*)(void* context);

    output_buffer() = default;
    ~output_buffer() { clear(); std::free(data_); }
    output_buffer(const output_buffer&) = delete;
    output_buffer& operator=(const output_buffer&) = delete;

    // Space for `bytes` more; the returned pointer is valid until the next call that may grow.
    char* reserve(std::size_t bytes) {
        if (capacity_ - size_ < bytes) grow(bytes);
        return data_ + size_;
    }
    void commit(std::size_t bytes) { size_ += bytes; }
    void append(std::string_view s) {
        std::memcpy(reserve(s.size()), s.data(), s.size());
        size_ += s.size();
    }
    void append(char c) { *reserve(1) = c; ++size_; }

    void add_reference(const char* data, std::size_t size, release_fn release, void* context);
    // Queues `size` bytes of the file `fd` from `offset` (sent with sendfile); `release` as above.
    void add_file(int fd, std::uint64_t offset, std::size_t size, release_fn release, void* context);

    // When the next unsent bytes come from a file: its descriptor, the offset and size left.
    bool front_file(int& fd, std::uint64_t& offset, std::size_t& size) const;

    bool empty() const { return sent_ == size_ && refs_sent_ == refs_.size(); }
    std::size_t pending_bytes() const;

    // Fills up to `max` iovecs with the unsent bytes in stream order, stopping before a file
    // reference; returns how many.
    std::size_t gather(iovec* iov, std::size_t max) const;
    // Marks `bytes` as sent; releases references that have gone out; resets when all is sent.
    void consume(std::size_t bytes);

    // Drops everything unsent (releasing references) and empties the buffer.
    void clear();
    void shrink(std::size_t keep_bytes);

private:
    struct reference {
        std::size_t offset;  // position in data_ before which these bytes go
        const char* data;    // null for a file reference
        std::size_t size;
        release_fn release;
        void* context;
        int fd = -1;
        std::uint64_t file_offset = 0;
    };
    void grow(std::size_t bytes);

    char* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
    std::size_t sent_ = 0;           // bytes of data_ already sent
    std::vector<reference> refs_;
    std::size_t refs_sent_ = 0;      // references fully sent
    std::size_t ref_progress_ = 0;   // bytes sent of refs_[refs_sent_]
};

}  // namespace percore::net
