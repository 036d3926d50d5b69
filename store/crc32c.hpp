// crc32c: CRC-32C (Castagnoli), the checksum of every log record. Uses the CPU's instruction where
// it has one (SSE4.2 crc32 on x86-64, the ARMv8 CRC extension on aarch64), a table otherwise; the
// result is the same everywhere. extend() continues a running CRC over more bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace percore::store {

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);
inline std::uint32_t crc32c(const void* data, std::size_t size) { return crc32c_extend(0, data, size); }

}  // namespace percore::store
