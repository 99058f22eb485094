#include "io/crc32.h"

#include <zlib.h>

#include <algorithm>

namespace dtc::io {

uint32_t crc32(uint32_t crc, const void* data, size_t size) {
  const Bytef* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (size > 0) {
    uInt n = static_cast<uInt>(std::min<size_t>(size, size_t{1} << 30));
    c = ::crc32(c, p, n);
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(c);
}

uint32_t crc32Combine(uint32_t crcA, uint32_t crcB, uint64_t sizeB) {
  return static_cast<uint32_t>(::crc32_combine64(crcA, crcB, static_cast<z_off64_t>(sizeB)));
}

}  // namespace dtc::io
