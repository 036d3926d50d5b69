// poison: marks memory a store pool holds but has not handed out, so that AddressSanitizer reports
// a use of a freed tree node or document (the pools' memory is not malloc's, which ASan watches).
//
// - PERCORE_POISON(p, n) / PERCORE_UNPOISON(p, n): no-ops unless built with -fsanitize=address.
// - Any thread; a range must not be poisoned by one thread while another unpoisons it.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define PERCORE_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define PERCORE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define PERCORE_POISON(p, n) ((void)(p), (void)(n))
#define PERCORE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
