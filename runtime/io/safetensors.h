// safetensors writing (https://github.com/huggingface/safetensors format): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the bytes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "support/dtype.h"
#include "support/status.h"

namespace dtc::io {

struct TensorRef {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  size_t bytes;
};

// Writes `tensors` (in the given order, header keys sorted) through a temporary file and a
// rename. Names must be unique.
Status writeSafetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                        const std::map<std::string, std::string>& metadata);

}  // namespace dtc::io
