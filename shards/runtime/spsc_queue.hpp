// spsc_queue: a bounded lock-free ring that carries messages from exactly one producer thread to
// exactly one consumer thread.
//
// Contract
// - try_push() only on the producer thread; drain() and empty() only on the consumer thread.
//   size_approx() anywhere.
// - A message pushed is seen by the consumer with everything the producer wrote before pushing it
//   (release on the producer's index, acquire on the consumer's): correct on weakly ordered CPUs.
// - The producer keeps a private copy of the consumer's index and reloads it only when the ring
//   looks full; the consumer reads the producer's index once per drain() call. Shared cache lines
//   move once per batch, not once per message.
// - try_push() fails when the ring is full; the caller keeps the message and tries again later.
// - Allocates once, at construction. T must be trivially copyable.
#pragma once

#include <atomic>
#include <bit>
#include <cassert>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

namespace percore::runtime {

inline constexpr std::size_t cache_line_bytes = 64;

template <class T>
class spsc_queue {
    static_assert(std::is_trivially_copyable_v<T>);

public:
    explicit spsc_queue(std::size_t capacity)
        : mask_(std::bit_ceil(capacity < 2 ? 2 : capacity) - 1), slots_(new T[mask_ + 1]) {}

    std::size_t capacity() const { return mask_ + 1; }

    bool try_push(const T& message) {
        std::size_t tail = tail_.load(std::memory_order_relaxed);
        if (tail - head_cache_ > mask_) {
            head_cache_ = head_.load(std::memory_order_acquire);
            if (tail - head_cache_ > mask_) return false;
        }
        slots_[tail & mask_] = message;
        tail_.store(tail + 1, std::memory_order_release);
        return true;
    }

    // Calls f(T&) for up to `max` messages in order; returns how many.
    template <class F>
    std::size_t drain(F&& f, std::size_t max) {
        std::size_t head = head_.load(std::memory_order_relaxed);
        std::size_t tail = tail_.load(std::memory_order_acquire);
        if (head == tail) return 0;
        std::size_t available = tail - head;
        std::size_t n = available < max ? available : max;
        for (std::size_t i = 0; i < n; ++i) f(slots_[(head + i) & mask_]);
        head_.store(head + n, std::memory_order_release);
        return n;
    }

    // Consumer side. With acquire: if the producer's push happens-before, it is seen.
    bool empty() const { return head_.load(std::memory_order_relaxed) == tail_.load(std::memory_order_acquire); }

    std::size_t size_approx() const {
        return tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_relaxed);
    }

private:
    const std::size_t mask_;
    std::unique_ptr<T[]> slots_;
    alignas(cache_line_bytes) std::atomic<std::size_t> head_{0};  // next slot to read
    alignas(cache_line_bytes) std::atomic<std::size_t> tail_{0};  // next slot to write
    std::size_t head_cache_ = 0;                                   // producer's copy of head_
    alignas(cache_line_bytes) char pad_[cache_line_bytes] = {};
};

}  // namespace percore::runtime
