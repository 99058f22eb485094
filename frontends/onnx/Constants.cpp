#include "onnx/Constants.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

namespace dtc::onnx_import {
namespace {

// The little-endian value of type T at p (unaligned).
template <typename T>
T loadAs(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while (!(m & 0x400));
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool exceedsFoldLimit(const Shape& shape, std::string& error) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      error = "a negative dimension";
      return true;
    }
    if (d > 0 && n > kMaxFoldedElements / static_cast<uint64_t>(d)) {
      error =
          "a constant of shape " + shapeText(shape) + " is larger than dtc folds (2^26 elements)";
      return true;
    }
    n *= static_cast<uint64_t>(d);
  }
  if (n > kMaxFoldedElements) {
    error = "a constant of shape " + shapeText(shape) + " is larger than dtc folds (2^26 elements)";
    return true;
  }
  return false;
}

}  // namespace

bool isFloatType(int32_t type) {
  return type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::DOUBLE ||
         type == onnx::TensorProto::FLOAT16 || type == onnx::TensorProto::BFLOAT16;
}

Constant Constant::ofInts(int32_t type, Shape shape, std::vector<int64_t> values) {
  Constant c;
  c.type = type;
  c.shape = std::move(shape);
  c.ints = std::move(values);
  return c;
}

Constant Constant::ofReals(int32_t type, Shape shape, std::vector<double> values) {
  Constant c;
  c.type = type;
  c.shape = std::move(shape);
  c.reals = std::move(values);
  return c;
}

Constant Constant::fromData(const TensorData& data) {
  Constant c;
  c.type = data.type;
  c.shape = data.dims;
  const size_t width = elementSize(data.type), n = width ? data.bytes.size() / width : 0;
  const uint8_t* p = data.bytes.data();
  for (size_t i = 0; i < n; ++i, p += width) {
    switch (data.type) {
      case onnx::TensorProto::FLOAT: c.reals.push_back(loadAs<float>(p)); break;
      case onnx::TensorProto::DOUBLE: c.reals.push_back(loadAs<double>(p)); break;
      case onnx::TensorProto::FLOAT16: c.reals.push_back(halfToFloat(loadAs<uint16_t>(p))); break;
      case onnx::TensorProto::BFLOAT16: {
        const uint32_t bits = static_cast<uint32_t>(loadAs<uint16_t>(p)) << 16;
        c.reals.push_back(loadAs<float>(reinterpret_cast<const uint8_t*>(&bits)));
        break;
      }
      case onnx::TensorProto::INT64:
      case onnx::TensorProto::UINT64: c.ints.push_back(loadAs<int64_t>(p)); break;
      case onnx::TensorProto::INT32: c.ints.push_back(loadAs<int32_t>(p)); break;
      case onnx::TensorProto::UINT32: c.ints.push_back(loadAs<uint32_t>(p)); break;
      case onnx::TensorProto::INT16: c.ints.push_back(loadAs<int16_t>(p)); break;
      case onnx::TensorProto::UINT16: c.ints.push_back(loadAs<uint16_t>(p)); break;
      case onnx::TensorProto::INT8: c.ints.push_back(static_cast<int8_t>(*p)); break;
      default: c.ints.push_back(*p); break;  // uint8, bool
    }
  }
  return c;
}

bool Constant::isFloat() const { return isFloatType(type); }

uint64_t Constant::size() const { return isFloat() ? reals.size() : ints.size(); }

std::vector<uint8_t> Constant::float32Bytes() const {
  std::vector<uint8_t> out(size() * 4);
  for (uint64_t i = 0; i < size(); ++i) {
    const float v = static_cast<float>(real(i));
    std::memcpy(out.data() + i * 4, &v, 4);
  }
  return out;
}

uint64_t elementsOf(const Shape& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return n;
}

std::string shapeText(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

const onnx::AttributeProto* findAttribute(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t intAttribute(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = findAttribute(node, name);
  return a && a->has_i() ? a->i() : fallback;
}

double floatAttribute(const onnx::NodeProto& node, const std::string& name, double fallback) {
  const onnx::AttributeProto* a = findAttribute(node, name);
  return a && a->has_f() ? a->f() : fallback;
}

std::vector<int64_t> intsAttribute(const onnx::NodeProto& node, const std::string& name) {
  const onnx::AttributeProto* a = findAttribute(node, name);
  if (!a) return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string stringAttribute(const onnx::NodeProto& node, const std::string& name,
                            const std::string& fallback) {
  const onnx::AttributeProto* a = findAttribute(node, name);
  return a && a->has_s() ? a->s() : fallback;
}

std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool tooLarge(const Shape& shape, std::string& error) { return exceedsFoldLimit(shape, error); }

}  // namespace dtc::onnx_import
