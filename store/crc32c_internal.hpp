// crc32c_internal: the two implementations behind crc32c_extend(), exposed so tests can check that
// they agree. Not for use outside the store.
#pragma once

#include <cstddef>
#include <cstdint>

namespace percore::store::detail {

// Both take and return the running register (pre-inverted), not the finished CRC.
std::uint32_t crc32c_table(std::uint32_t reg, const unsigned char* data, std::size_t size);

// False when this CPU (or this build's target) has no CRC-32C instruction.
bool crc32c_hardware_available();
// Only when crc32c_hardware_available().
std::uint32_t crc32c_hardware(std::uint32_t reg, const unsigned char* data, std::size_t size);

}  // namespace percore::store::detail
