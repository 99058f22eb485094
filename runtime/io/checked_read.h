// Reading large byte ranges at disk speed while checking them: several threads each pread(2)
// pieces of the ranges, through descriptors of their own, and compute each piece's CRC-32 as it
// arrives (still in cache), so the checksum costs no pass of its own and the disk sees several
// sequential streams at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace dtc::io {

struct CheckedRead {
  uint64_t offset = 0;  // in the file
  size_t size = 0;
  void* dst = nullptr;
  uint32_t crc32 = 0;  // filled in: the CRC-32 of the bytes read
};

// Reads every request from file `path` (a short read is a truncated file, named in the error).
Status readChecked(const std::string& path, std::vector<CheckedRead>& reads);

}  // namespace dtc::io
