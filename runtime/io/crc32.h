// CRC-32 (the polynomial of zlib, gzip and PNG, so Python's zlib.crc32 checks the same
// values): what checkpoint files record to detect corruption. zlib computes it; buffers of any
// size are fed in pieces its 32-bit lengths accept.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtc::io {

// The CRC-32 of `size` bytes continuing from `crc` (0 to start).
uint32_t crc32(uint32_t crc, const void* data, size_t size);
// The CRC-32 of A followed by B, from crcA, crcB and B's length (zlib's crc32_combine).
uint32_t crc32Combine(uint32_t crcA, uint32_t crcB, uint64_t sizeB);

}  // namespace dtc::io
