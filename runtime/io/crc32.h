// CRC-32 (the polynomial of zlib, gzip and PNG, so Python's zlib.crc32 checks the same
// values): what checkpoint files record to detect corruption. ISA-L computes it where its
// library is installed, zlib otherwise; buffers of any size are fed in pieces zlib's 32-bit
// lengths accept.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtc::io {

// The CRC-32 of `size` bytes continuing from `crc` (0 to start).
uint32_t crc32(uint32_t crc, const void* data, size_t size);
// zlib's, for tests of the fast one.
uint32_t referenceCrc32(uint32_t crc, const void* data, size_t size);
// Whether crc32 is ISA-L's.
bool fastCrc32();
// The CRC-32 of A followed by B, from crcA, crcB and B's length (zlib's crc32_combine).
uint32_t crc32Combine(uint32_t crcA, uint32_t crcB, uint64_t sizeB);

}  // namespace dtc::io
