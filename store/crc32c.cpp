#include "store/crc32c.hpp"

#include <array>
#include <cstring>

#include "shards/runtime/check.hpp"
#include "store/crc32c_internal.hpp"

#if defined(__x86_64__)
#include <nmmintrin.h>
#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

namespace percore::store {

namespace detail {

namespace {

constexpr std::uint32_t castagnoli_reflected = 0x82F63B78u;

// Slicing-by-8 tables: tables[k][b] is the CRC register after b is followed by k zero bytes.
using crc_tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr crc_tables make_tables() {
    crc_tables t{};
    for (std::uint32_t b = 0; b < 256; ++b) {
        std::uint32_t r = b;
        for (int i = 0; i < 8; ++i) r = (r >> 1) ^ ((r & 1u) ? castagnoli_reflected : 0u);
        t[0][b] = r;
    }
    for (std::size_t k = 1; k < 8; ++k)
        for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
    return t;
}

constexpr crc_tables tables = make_tables();

std::uint32_t load_le32(const unsigned char* p) {
    return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

}  // namespace

std::uint32_t crc32c_table(std::uint32_t reg, const unsigned char* p, std::size_t n) {
    while (n >= 8) {
        std::uint32_t lo = load_le32(p) ^ reg;
        std::uint32_t hi = load_le32(p + 4);
        reg = tables[7][lo & 0xFF] ^ tables[6][(lo >> 8) & 0xFF] ^ tables[5][(lo >> 16) & 0xFF] ^ tables[4][lo >> 24] ^
              tables[3][hi & 0xFF] ^ tables[2][(hi >> 8) & 0xFF] ^ tables[1][(hi >> 16) & 0xFF] ^ tables[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) reg = (reg >> 8) ^ tables[0][(reg ^ *p++) & 0xFF];
    return reg;
}

#if defined(__x86_64__)

bool crc32c_hardware_available() { return __builtin_cpu_supports("sse4.2"); }

__attribute__((target("sse4.2"))) std::uint32_t crc32c_hardware(std::uint32_t reg, const unsigned char* p,
                                                                 std::size_t n) {
    while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7u) != 0) {
        reg = _mm_crc32_u8(reg, *p++);
        --n;
    }
    std::uint64_t wide = reg;
    while (n >= 8) {
        std::uint64_t word;
        std::memcpy(&word, p, 8);
        wide = _mm_crc32_u64(wide, word);
        p += 8;
        n -= 8;
    }
    reg = static_cast<std::uint32_t>(wide);
    while (n--) reg = _mm_crc32_u8(reg, *p++);
    return reg;
}

#elif defined(__aarch64__)

#if defined(__ARM_FEATURE_CRC32)
bool crc32c_hardware_available() { return true; }
#define PERCORE_CRC_TARGET
#else
bool crc32c_hardware_available() { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#define PERCORE_CRC_TARGET __attribute__((target("+crc")))
#endif

PERCORE_CRC_TARGET std::uint32_t crc32c_hardware(std::uint32_t reg, const unsigned char* p, std::size_t n) {
    while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7u) != 0) {
        reg = __crc32cb(reg, *p++);
        --n;
    }
    while (n >= 8) {
        std::uint64_t word;
        std::memcpy(&word, p, 8);
        reg = __crc32cd(reg, word);
        p += 8;
        n -= 8;
    }
    while (n--) reg = __crc32cb(reg, *p++);
    return reg;
}

#undef PERCORE_CRC_TARGET

#else

bool crc32c_hardware_available() { return false; }

std::uint32_t crc32c_hardware(std::uint32_t reg, const unsigned char* p, std::size_t n) {
    PERCORE_DEBUG_ASSERT(!"no CRC-32C instruction on this target");
    return crc32c_table(reg, p, n);
}

#endif

}  // namespace detail

namespace {

using crc_function = std::uint32_t (*)(std::uint32_t, const unsigned char*, std::size_t);

crc_function choose() { return detail::crc32c_hardware_available() ? detail::crc32c_hardware : detail::crc32c_table; }

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) {
    static const crc_function implementation = choose();
    return ~implementation(~crc, static_cast<const unsigned char*>(data), size);
}

}  // namespace percore::store
