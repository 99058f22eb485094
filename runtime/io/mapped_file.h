// A read-only memory mapping of a whole file, unmapped on destruction. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "support/status.h"

namespace dtc::io {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Maps `path`: a missing file or a directory is an InvalidInput error naming it.
  static StatusOr<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return static_cast<const uint8_t*>(map_); }
  size_t size() const { return size_; }

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dtc::io
