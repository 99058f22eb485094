// safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON naming each tensor's dtype, shape and byte range within the data
// section, then the data section. dtypes: "F32", "F16", "BF16", "I32", "I64".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "support/dtype.h"
#include "support/status.h"

namespace dtc::io {

struct TensorRef {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  size_t bytes;  // must equal product(shape) * dtypeSize(dtype)
};

// Writes `tensors`, data in the given order, header keys sorted by name after "__metadata__"
// (omitted when `metadata` is empty), the header padded with spaces so the data starts 8-byte
// aligned. Goes through "<path>.tmp.<pid>" and rename(2): a crash never leaves a half-written
// `path`, and nothing else is created. Duplicate names or inconsistent sizes are Internal errors.
Status writeSafetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                        const std::map<std::string, std::string>& metadata);

// A safetensors file, memory-mapped and validated: header length within the file (and at most
// 100 MB, as the reference implementation allows), well-formed JSON, known dtypes, shapes of
// non-negative integers, and data_offsets that match shape × dtype and tile the data section
// exactly (no gaps, no overlaps). Anything else is an InvalidInput error naming the file.
// Move-only; the TensorRefs point into the mapping and stay valid as long as this object (moves
// keep the mapping where it is).
class SafetensorsFile {
 public:
  static StatusOr<SafetensorsFile> read(const std::string& path);

  // Sorted by name.
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  const TensorRef* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<TensorRef> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The safetensors name of a dtype ("F32").
const char* safetensorsDTypeName(DType t);

}  // namespace dtc::io
