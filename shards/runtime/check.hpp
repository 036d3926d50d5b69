// check: assertions for every layer, and the shard a thread belongs to.
//
// - PERCORE_ASSERT(cond): always on, in release builds too. On failure it writes one line naming
//   the shard (or "main"), the file, the line and the condition to stderr, then aborts. For
//   invariants whose breach would corrupt data or answer a client wrongly.
// - PERCORE_DEBUG_ASSERT(cond): the same, compiled out with NDEBUG; for checks on the hot path.
// - PERCORE_REQUIRES(cond): a function's precondition (the header says it in a `REQUIRES:` line);
//   always on.
// - this_shard(): the shard whose thread is running (set once by the runtime when the thread
//   starts), or no_shard on every other thread. Any thread may call it.
//
// Lives in shards/runtime/ (the lowest layer: it knows neither HTTP nor storage) as its own tiny
// library, percore_check, so that net/, store/ and crypto/ can use it without linking the runtime.
#pragma once

namespace percore::runtime {

inline constexpr unsigned no_shard = ~0u;

namespace detail {
// Set once by the runtime when a shard's thread starts. constinit: no dynamic initialization, so
// a read is one thread-local load, no TLS wrapper call (the owner-thread REQUIRES of every task
// entry point run each round: callgrind counted ~6 instructions a call out of line).
extern thread_local constinit unsigned current_shard;
}  // namespace detail

inline unsigned this_shard() { return detail::current_shard; }
void set_this_shard(unsigned id);

[[noreturn]] void check_failed(const char* file, int line, const char* condition);

}  // namespace percore::runtime

#define PERCORE_ASSERT(cond) \
    ((cond) ? static_cast<void>(0) : ::percore::runtime::check_failed(__FILE__, __LINE__, #cond))
#define PERCORE_REQUIRES(cond) PERCORE_ASSERT(cond)
#ifdef NDEBUG
#define PERCORE_DEBUG_ASSERT(cond) static_cast<void>(0)
#else
#define PERCORE_DEBUG_ASSERT(cond) PERCORE_ASSERT(cond)
#endif
