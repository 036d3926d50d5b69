#include "net/output_buffer.hpp"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <new>

namespace percore::net {

void output_buffer::grow(std::size_t bytes) {
    std::size_t want = std::max<std::size_t>(capacity_ ? capacity_ * 2 : 4096, size_ + bytes);
    auto* p = static_cast<char*>(std::realloc(data_, want));
    if (!p) throw std::bad_alloc();
    data_ = p;
    capacity_ = want;
}

void output_buffer::add_reference(const char* data, std::size_t size, release_fn release, void* context) {
    refs_.push_back({size_, data, size, release, context});
}

void output_buffer::add_file(int fd, std::uint64_t offset, std::size_t size, release_fn release, void* context) {
    refs_.push_back({size_, nullptr, size, release, context, fd, offset});
}

bool output_buffer::front_file(int& fd, std::uint64_t& offset, std::size_t& size) const {
    if (refs_sent_ >= refs_.size()) return false;
    const reference& r = refs_[refs_sent_];
    if (r.fd < 0 || r.offset != sent_) return false;
    fd = r.fd;
    offset = r.file_offset + ref_progress_;
    size = r.size - ref_progress_;
    return true;
}

std::size_t output_buffer::pending_bytes() const {
    std::size_t n = size_ - sent_;
    for (std::size_t i = refs_sent_; i < refs_.size(); ++i) n += refs_[i].size;
    return n - ref_progress_;
}

std::size_t output_buffer::gather(iovec* iov, std::size_t max) const {
    std::size_t count = 0;
    std::size_t pos = sent_;
    for (std::size_t i = refs_sent_; i < refs_.size() && count < max; ++i) {
        const reference& r = refs_[i];
        if (r.offset > pos) {
            iov[count++] = {data_ + pos, r.offset - pos};
            pos = r.offset;
            if (count == max) return count;
        }
        if (r.fd >= 0) return count;  // sent with sendfile
        std::size_t skip = i == refs_sent_ ? ref_progress_ : 0;
        iov[count++] = {const_cast<char*>(r.data) + skip, r.size - skip};
    }
    if (count < max && pos < size_) iov[count++] = {data_ + pos, size_ - pos};
    return count;
}

void output_buffer::consume(std::size_t bytes) {
    while (bytes > 0) {
        std::size_t next_ref_offset = refs_sent_ < refs_.size() ? refs_[refs_sent_].offset : size_;
        if (sent_ < next_ref_offset) {
            std::size_t n = std::min(bytes, next_ref_offset - sent_);
            sent_ += n;
            bytes -= n;
            continue;
        }
        assert(refs_sent_ < refs_.size());
        reference& r = refs_[refs_sent_];
        std::size_t n = std::min(bytes, r.size - ref_progress_);
        ref_progress_ += n;
        bytes -= n;
        if (ref_progress_ == r.size) {
            if (r.release) r.release(r.context);
            ++refs_sent_;
            ref_progress_ = 0;
        }
    }
    // references of size 0 at the current position count as sent
    while (refs_sent_ < refs_.size() && refs_[refs_sent_].offset == sent_ && refs_[refs_sent_].size == 0) {
        if (refs_[refs_sent_].release) refs_[refs_sent_].release(refs_[refs_sent_].context);
        ++refs_sent_;
    }
    if (sent_ == size_ && refs_sent_ == refs_.size()) {
        sent_ = size_ = 0;
        refs_.clear();
        refs_sent_ = 0;
    }
}

void output_buffer::clear() {
    for (std::size_t i = refs_sent_; i < refs_.size(); ++i)
        if (refs_[i].release) refs_[i].release(refs_[i].context);
    refs_.clear();
    refs_sent_ = ref_progress_ = 0;
    sent_ = size_ = 0;
}

void output_buffer::shrink(std::size_t keep_bytes) {
    if (!empty() || capacity_ <= keep_bytes) return;
    std::free(data_);
    data_ = nullptr;
    capacity_ = 0;
    if (refs_.capacity() > 16) std::vector<reference>().swap(refs_);
}

}  // namespace percore::net
