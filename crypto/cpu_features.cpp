#include "crypto/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace percore::crypto {

namespace {

bool detect() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (ecx & bit_AES) != 0 && (ecx & bit_PCLMUL) != 0;
#elif defined(__aarch64__)
    unsigned long hwcap = getauxval(AT_HWCAP);
    return (hwcap & HWCAP_AES) != 0 && (hwcap & HWCAP_PMULL) != 0;
#else
    return false;
#endif
}

}  // namespace

bool cpu_has_aes_instructions() {
    static const bool has = detect();
    return has;
}

}  // namespace percore::crypto
