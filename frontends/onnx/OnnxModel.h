// An ONNX model file read with protobuf (Debian's libonnx's generated ModelProto) and checked
// before anything looks at its graph: a graph is there, every opset it imports is the default
// domain's in the range dtc reads, and tensors' values (inline or in external data files) can be
// had as little-endian bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llvm/Support/Error.h"

namespace onnx {
class ModelProto;
class GraphProto;
class TensorProto;
}  // namespace onnx

namespace dtc::onnx_import {

// The default domain's opsets dtc reads: PyTorch 1.13 exports 14 by default, and
// LayerNormalization needs 17.
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 17;

// A tensor's values: its ONNX element type, dimensions and elements packed little-endian.
struct TensorData {
  int32_t type = 0;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  uint64_t elements() const;
};

// The bytes of one element of an ONNX element type; 0 for types dtc does not read (strings,
// complex numbers).
size_t elementSize(int32_t type);
// "float32", "int64", ... for messages.
std::string elementTypeName(int32_t type);

class OnnxModel {
 public:
  // Reads `path`; external data files are looked up beside it.
  static llvm::Expected<OnnxModel> read(const std::string& path);
  // `bytes` as an ONNX model named `name` (messages), its external data files in `directory`
  // ("": a model that refers to any is an error).
  static llvm::Expected<OnnxModel> fromBytes(const uint8_t* bytes, size_t size,
                                             const std::string& name, const std::string& directory);

  const onnx::GraphProto& graph() const;
  const std::string& name() const { return name_; }
  int64_t opset() const { return opset_; }
  // The tensor's values, read from its external data file when it has one (checked against
  // its type and dimensions).
  llvm::Expected<TensorData> values(const onnx::TensorProto& tensor) const;

 private:
  OnnxModel() = default;
  std::shared_ptr<const onnx::ModelProto> proto_;
  std::string name_, directory_;
  int64_t opset_ = 0;
};

// Whether `bytes` start as a dtc model file (its FlatBuffers identifier "DTCM").
bool isDtcModel(const uint8_t* bytes, size_t size);

}  // namespace dtc::onnx_import
