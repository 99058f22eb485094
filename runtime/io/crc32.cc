#include "io/crc32.h"

#include <dlfcn.h>
#include <zlib.h>

#include <algorithm>

namespace dtc::io {
namespace {

// ISA-L's CRC-32 (the same polynomial, reflected, chained as zlib's) folds with carry-less
// multiplication, several times zlib's rate (docs/benchmarks.md), which matters where whole
// checkpoints are checksummed (every write, every resume). Loaded where the library is
// installed (libisal2), so nothing needs it to build or run.
using IsalCrc = uint32_t (*)(uint32_t, const unsigned char*, uint64_t);

IsalCrc loadIsal() {
  void* library = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);
  return library ? reinterpret_cast<IsalCrc>(dlsym(library, "crc32_gzip_refl")) : nullptr;
}

IsalCrc isal() {
  static const IsalCrc function = loadIsal();
  return function;
}

uint32_t zlibCrc32(uint32_t crc, const void* data, size_t size) {
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

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t size) {
  if (IsalCrc fast = isal(); fast && size > 0)
    return fast(crc, static_cast<const unsigned char*>(data), size);
  return zlibCrc32(crc, data, size);
}

uint32_t referenceCrc32(uint32_t crc, const void* data, size_t size) {
  return zlibCrc32(crc, data, size);
}

bool fastCrc32() { return isal() != nullptr; }

uint32_t crc32Combine(uint32_t crcA, uint32_t crcB, uint64_t sizeB) {
  return static_cast<uint32_t>(::crc32_combine64(crcA, crcB, static_cast<z_off64_t>(sizeB)));
}

}  // namespace dtc::io
