// NumPy .npy files: memory-mapped reading (verified before use) and atomic writing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/files.h"
#include "io/mapped_file.h"
#include "support/dtype.h"
#include "support/status.h"

namespace dtc::io {

// A read-only, memory-mapped .npy array. Move-only.
class NpyArray {
 public:
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Samples: the first dimension (1 for a scalar).
  int64_t rows() const { return shape_.empty() ? 1 : shape_[0]; }
  // Bytes of one sample: everything after the first dimension.
  size_t rowBytes() const { return rows() ? bytes_ / static_cast<size_t>(rows()) : 0; }

 private:
  friend StatusOr<NpyArray> openNpy(const std::string& path);
  MappedFile file_;
  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  const uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

// Opens `path`: checks the magic, version (1–3), header ('descr', 'fortran_order', 'shape'),
// dtype (<f4, <f2, <i4, <i8) and that the data is all there.
StatusOr<NpyArray> openNpy(const std::string& path);

// Writes a C-order .npy (version 1.0) through a temporary file and a rename.
Status writeNpy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                const void* data);

}  // namespace dtc::io
