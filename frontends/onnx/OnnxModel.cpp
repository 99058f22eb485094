#include "onnx/OnnxModel.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <cstring>
#include <fstream>

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace dtc::onnx_import {
namespace {

llvm::Error error(const std::string& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// Tensors larger than this are refused (the compiler's limit on any tensor, 2^40 elements).
constexpr uint64_t kMaxElements = uint64_t{1} << 40;

template <typename T>
void append(std::vector<uint8_t>& out, T value) {
  uint8_t bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

// The typed fields' values packed as the element type's bytes.
llvm::Error packTyped(const onnx::TensorProto& t, std::vector<uint8_t>& out) {
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      for (float v : t.float_data()) append(out, v);
      return llvm::Error::success();
    case onnx::TensorProto::DOUBLE:
      for (double v : t.double_data()) append(out, v);
      return llvm::Error::success();
    case onnx::TensorProto::INT64:
      for (int64_t v : t.int64_data()) append(out, v);
      return llvm::Error::success();
    case onnx::TensorProto::UINT32:
      for (uint64_t v : t.uint64_data()) append(out, static_cast<uint32_t>(v));
      return llvm::Error::success();
    case onnx::TensorProto::UINT64:
      for (uint64_t v : t.uint64_data()) append(out, v);
      return llvm::Error::success();
    case onnx::TensorProto::INT32:
      for (int32_t v : t.int32_data()) append(out, v);
      return llvm::Error::success();
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:  // 16-bit patterns in int32_data
      for (int32_t v : t.int32_data()) append(out, static_cast<uint16_t>(v));
      return llvm::Error::success();
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      for (int32_t v : t.int32_data()) append(out, static_cast<uint8_t>(v));
      return llvm::Error::success();
    default:
      return error("tensor '" + t.name() + "' has element type " + elementTypeName(t.data_type()) +
                   ", which dtc does not read");
  }
}

// A relative path inside the model's directory: no absolute paths, no "..".
bool staysInside(const std::string& location) {
  if (location.empty() || llvm::sys::path::is_absolute(location)) return false;
  for (auto it = llvm::sys::path::begin(location), end = llvm::sys::path::end(location); it != end;
       ++it)
    if (*it == "..") return false;
  return true;
}

}  // namespace

uint64_t TensorData::elements() const {
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);
  return n;
}

size_t elementSize(int32_t type) {
  switch (type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32: return 4;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64: return 8;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: return 2;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL: return 1;
    default: return 0;
  }
}

std::string elementTypeName(int32_t type) {
  switch (type) {
    case onnx::TensorProto::FLOAT: return "float32";
    case onnx::TensorProto::DOUBLE: return "float64";
    case onnx::TensorProto::FLOAT16: return "float16";
    case onnx::TensorProto::BFLOAT16: return "bfloat16";
    case onnx::TensorProto::INT64: return "int64";
    case onnx::TensorProto::INT32: return "int32";
    case onnx::TensorProto::INT16: return "int16";
    case onnx::TensorProto::INT8: return "int8";
    case onnx::TensorProto::UINT64: return "uint64";
    case onnx::TensorProto::UINT32: return "uint32";
    case onnx::TensorProto::UINT16: return "uint16";
    case onnx::TensorProto::UINT8: return "uint8";
    case onnx::TensorProto::BOOL: return "bool";
    case onnx::TensorProto::STRING: return "string";
    default: return "type " + std::to_string(type);
  }
}

bool isDtcModel(const uint8_t* bytes, size_t size) {
  return size >= 8 && std::memcmp(bytes + 4, "DTCM", 4) == 0;
}

llvm::Expected<OnnxModel> OnnxModel::read(const std::string& path) {
  auto buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) return error(path + ": cannot read: " + buffer.getError().message());
  llvm::SmallString<256> directory(path);
  llvm::sys::path::remove_filename(directory);
  if (directory.empty()) directory = ".";
  const auto* bytes = reinterpret_cast<const uint8_t*>((*buffer)->getBufferStart());
  return fromBytes(bytes, (*buffer)->getBufferSize(), path, std::string(directory));
}

llvm::Expected<OnnxModel> OnnxModel::fromBytes(const uint8_t* bytes, size_t size,
                                               const std::string& name,
                                               const std::string& directory) {
  if (size > static_cast<size_t>(INT_MAX))
    return error(name +
                 ": an ONNX file over 2 GiB (protobuf's limit); export the weights to "
                 "external data (torch.onnx.export does so for large models)");
  auto proto = std::make_shared<onnx::ModelProto>();
  if (!proto->ParseFromArray(bytes, static_cast<int>(size)))
    return error(name +
                 " is not a dtc model file (identifier 'DTCM' missing) nor an ONNX model "
                 "(it does not parse as an ONNX ModelProto)");
  if (!proto->has_graph())
    return error(name +
                 " is not a dtc model file (identifier 'DTCM' missing) nor an ONNX model "
                 "(no graph)");
  OnnxModel model;
  model.name_ = name;
  model.directory_ = directory;
  for (const onnx::OperatorSetIdProto& set : proto->opset_import()) {
    if (!set.domain().empty() && set.domain() != "ai.onnx")
      return error(name + ": unknown opset domain '" + set.domain() +
                   "' (dtc reads the default domain, ai.onnx)");
    model.opset_ = set.version();
  }
  if (model.opset_ < kMinOpset || model.opset_ > kMaxOpset)
    return error(name + ": ONNX opset " + std::to_string(model.opset_) + "; dtc reads opsets " +
                 std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                 " (torch.onnx.export(..., opset_version=17))");
  model.proto_ = std::move(proto);
  return model;
}

const onnx::GraphProto& OnnxModel::graph() const { return proto_->graph(); }

llvm::Expected<TensorData> OnnxModel::values(const onnx::TensorProto& t) const {
  TensorData data;
  data.type = t.data_type();
  const size_t width = elementSize(data.type);
  if (width == 0)
    return error("tensor '" + t.name() + "' has element type " + elementTypeName(data.type) +
                 ", which dtc does not read");
  uint64_t elements = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && elements > kMaxElements / static_cast<uint64_t>(d)))
      return error("tensor '" + t.name() + "' has a negative or too large dimension");
    elements *= static_cast<uint64_t>(d);
    data.dims.push_back(d);
  }
  const uint64_t bytes = elements * width;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    uint64_t offset = 0, length = bytes;
    for (const onnx::StringStringEntryProto& e : t.external_data()) {
      if (e.key() == "location") location = e.value();
      if (e.key() == "offset") offset = std::strtoull(e.value().c_str(), nullptr, 10);
      if (e.key() == "length") length = std::strtoull(e.value().c_str(), nullptr, 10);
    }
    if (!staysInside(location))
      return error("tensor '" + t.name() + "': external data location '" + location +
                   "' is not a file beside the model");
    if (directory_.empty())
      return error("tensor '" + t.name() + "' keeps its values in external data '" + location +
                   "', and this model was given without its directory");
    llvm::SmallString<256> path(directory_);
    llvm::sys::path::append(path, location);
    std::ifstream in(std::string(path), std::ios::binary);
    if (!in)
      return error("tensor '" + t.name() + "': external data file '" + std::string(path) +
                   "' not found");
    if (length != bytes)
      return error("tensor '" + t.name() + "': external data holds " + std::to_string(length) +
                   " bytes, its type and dimensions need " + std::to_string(bytes));
    in.seekg(0, std::ios::end);
    const uint64_t fileSize = static_cast<uint64_t>(in.tellg());
    if (offset > fileSize || bytes > fileSize - offset)
      return error("tensor '" + t.name() + "': external data file '" + std::string(path) +
                   "' ends before offset " + std::to_string(offset) + " + " +
                   std::to_string(bytes) + " bytes");
    data.bytes.resize(bytes);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(reinterpret_cast<char*>(data.bytes.data()), static_cast<std::streamsize>(bytes));
    if (!in) return error("tensor '" + t.name() + "': reading '" + std::string(path) + "' failed");
    return data;
  }
  if (t.has_raw_data()) {
    data.bytes.assign(t.raw_data().begin(), t.raw_data().end());
  } else if (llvm::Error e = packTyped(t, data.bytes)) {
    return e;
  }
  if (data.bytes.size() != bytes)
    return error("tensor '" + t.name() + "' holds " + std::to_string(data.bytes.size()) +
                 " bytes of values, its type and dimensions need " + std::to_string(bytes));
  return data;
}

}  // namespace dtc::onnx_import
