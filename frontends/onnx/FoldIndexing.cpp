// Compile-time evaluation of the indexing and scanning ops exports compute positions, masks and
// rotary tables with: CumSum (positions from an attention mask), ScatterND and
// ScatterElements (a mask's rows written), GatherElements (a table's rows picked) and Tile.
#include <onnx/onnx_pb.h>

#include <algorithm>

#include "onnx/Constants.h"

namespace dtc::onnx_import {
namespace {

using Inputs = std::vector<const Constant*>;
using Result = std::optional<std::vector<Constant>>;

std::vector<uint64_t> stridesOf(const Shape& shape) {
  std::vector<uint64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

bool axisOf(int64_t& axis, size_t rank, std::string& error, const char* op) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    error = std::string(op) + ": axis " + std::to_string(axis) + " is outside a rank-" +
            std::to_string(rank) + " tensor";
    return false;
  }
  if (axis < 0) axis += r;
  return true;
}

// `v` combined with `u` under `reduction` (add, mul, max, min; none: replaced).
template <typename T>
T combined(T v, T u, const std::string& reduction) {
  return reduction == "add"   ? v + u
         : reduction == "mul" ? v * u
         : reduction == "max" ? std::max(v, u)
         : reduction == "min" ? std::min(v, u)
                              : u;
}

// Element `i` of `c` set from element `j` of `from`, or combined with it under `reduction`.
void store(Constant& c, uint64_t i, const Constant& from, uint64_t j,
           const std::string& reduction) {
  if (c.isFloat())
    c.reals[i] = combined(c.reals[i], from.real(j), reduction);
  else
    c.ints[i] = combined(c.ints[i], from.integer(j), reduction);
}

Result cumSum(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() != 2 || !in[0] || !in[1] || in[1]->size() != 1) return std::nullopt;
  Constant out = *in[0];
  int64_t axis = in[1]->integer(0);
  if (!axisOf(axis, out.shape.size(), error, "CumSum")) return std::nullopt;
  const bool exclusive = intAttribute(node, "exclusive", 0) != 0;
  const bool reverse = intAttribute(node, "reverse", 0) != 0;
  const uint64_t n = static_cast<uint64_t>(out.shape[axis]);
  const uint64_t inner = stridesOf(out.shape)[axis],
                 outer = out.size() / std::max<uint64_t>(n * inner, 1);
  for (uint64_t o = 0; o < outer; ++o)
    for (uint64_t i = 0; i < inner; ++i) {
      double realSum = 0;
      int64_t intSum = 0;
      for (uint64_t k = 0; k < n; ++k) {
        const uint64_t at = o * n * inner + (reverse ? n - 1 - k : k) * inner + i;
        const double real = in[0]->real(at);
        const int64_t integer = in[0]->isFloat() ? 0 : in[0]->ints[at];
        if (!exclusive) realSum += real, intSum += integer;
        if (out.isFloat())
          out.reals[at] = out.type == onnx::TensorProto::FLOAT
                              ? static_cast<double>(static_cast<float>(realSum))
                              : realSum;
        else
          out.ints[at] = intSum;
        if (exclusive) realSum += real, intSum += integer;
      }
    }
  return std::vector<Constant>{out};
}

Result scatterND(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() != 3 || !in[0] || !in[1] || !in[2]) return std::nullopt;
  const Constant &data = *in[0], &indices = *in[1], &updates = *in[2];
  if (indices.shape.empty()) {
    error = "ScatterND: indices must have a last dimension";
    return std::nullopt;
  }
  const uint64_t k = static_cast<uint64_t>(indices.shape.back());
  if (k > data.shape.size()) {
    error = "ScatterND: index tuples longer than the data's rank";
    return std::nullopt;
  }
  // Each tuple of k indices addresses a block: the data's dimensions past the k-th.
  const std::vector<uint64_t> strides = stridesOf(data.shape);
  const uint64_t block = k == 0 ? data.size() : strides[k - 1];
  const uint64_t tuples = indices.size() / std::max<uint64_t>(k, 1);
  if (updates.size() != tuples * block) {
    error = "ScatterND: updates hold " + std::to_string(updates.size()) + " values, the indices " +
            "address " + std::to_string(tuples * block);
    return std::nullopt;
  }
  const std::string reduction = stringAttribute(node, "reduction", "none");
  Constant out = data;
  for (uint64_t t = 0; t < tuples; ++t) {
    uint64_t offset = 0;
    for (uint64_t d = 0; d < k; ++d) {
      int64_t i = indices.integer(t * k + d);
      if (i < 0) i += data.shape[d];
      if (i < 0 || i >= data.shape[d]) {
        error = "ScatterND: index " + std::to_string(i) + " is outside dimension " +
                std::to_string(d) + " of " + shapeText(data.shape);
        return std::nullopt;
      }
      offset += static_cast<uint64_t>(i) * strides[d];
    }
    for (uint64_t e = 0; e < block; ++e) store(out, offset + e, updates, t * block + e, reduction);
  }
  return std::vector<Constant>{out};
}

// The flat index in a tensor of `shape` of element `flat` of `indices` (shaped as updates or the
// output) with its `axis` coordinate replaced by `value`.
uint64_t withAxis(uint64_t flat, const Shape& indexShape, const Shape& shape, int64_t axis,
                  int64_t value) {
  const std::vector<uint64_t> strides = stridesOf(shape), own = stridesOf(indexShape);
  uint64_t at = 0;
  for (size_t d = 0; d < indexShape.size(); ++d) {
    const uint64_t coord = flat / own[d] % static_cast<uint64_t>(indexShape[d]);
    at += (static_cast<int64_t>(d) == axis ? static_cast<uint64_t>(value) : coord) * strides[d];
  }
  return at;
}

Result scatterElements(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() != 3 || !in[0] || !in[1] || !in[2]) return std::nullopt;
  const Constant &data = *in[0], &indices = *in[1], &updates = *in[2];
  int64_t axis = intAttribute(node, "axis", 0);
  if (!axisOf(axis, data.shape.size(), error, "ScatterElements")) return std::nullopt;
  if (indices.shape != updates.shape || indices.shape.size() != data.shape.size()) {
    error = "ScatterElements: indices and updates must share a shape of the data's rank";
    return std::nullopt;
  }
  const std::string reduction = stringAttribute(node, "reduction", "none");
  Constant out = data;
  for (uint64_t i = 0; i < indices.size(); ++i) {
    int64_t v = indices.integer(i);
    if (v < 0) v += data.shape[axis];
    if (v < 0 || v >= data.shape[axis]) {
      error = "ScatterElements: index " + std::to_string(v) + " is outside axis " +
              std::to_string(axis);
      return std::nullopt;
    }
    store(out, withAxis(i, indices.shape, data.shape, axis, v), updates, i, reduction);
  }
  return std::vector<Constant>{out};
}

Result gatherElements(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() != 2 || !in[0] || !in[1]) return std::nullopt;
  const Constant &data = *in[0], &indices = *in[1];
  int64_t axis = intAttribute(node, "axis", 0);
  if (!axisOf(axis, data.shape.size(), error, "GatherElements")) return std::nullopt;
  if (indices.shape.size() != data.shape.size()) {
    error = "GatherElements: indices must have the data's rank";
    return std::nullopt;
  }
  Constant out;
  out.type = data.type;
  out.shape = indices.shape;
  for (uint64_t i = 0; i < indices.size(); ++i) {
    int64_t v = indices.integer(i);
    if (v < 0) v += data.shape[axis];
    if (v < 0 || v >= data.shape[axis]) {
      error =
          "GatherElements: index " + std::to_string(v) + " is outside axis " + std::to_string(axis);
      return std::nullopt;
    }
    const uint64_t at = withAxis(i, indices.shape, data.shape, axis, v);
    if (data.isFloat())
      out.reals.push_back(data.reals[at]);
    else
      out.ints.push_back(data.ints[at]);
  }
  return std::vector<Constant>{out};
}

Result tile(const Inputs& in, std::string& error) {
  if (in.size() != 2 || !in[0] || !in[1]) return std::nullopt;
  const Constant& x = *in[0];
  if (in[1]->size() != x.shape.size()) {
    error = "Tile: one repeat for each of the input's " + std::to_string(x.shape.size()) +
            " dimensions";
    return std::nullopt;
  }
  Shape shape = x.shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t r = in[1]->integer(d);
    if (r < 0) {
      error = "Tile: a negative repeat";
      return std::nullopt;
    }
    shape[d] *= r;
  }
  if (tooLarge(shape, error)) return std::nullopt;
  const std::vector<uint64_t> outStrides = stridesOf(shape), inStrides = stridesOf(x.shape);
  Constant out;
  out.type = x.type;
  out.shape = shape;
  const uint64_t n = elementsOf(shape);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t at = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      at += (i / outStrides[d] % static_cast<uint64_t>(shape[d])) %
            static_cast<uint64_t>(x.shape[d]) * inStrides[d];
    if (x.isFloat())
      out.reals.push_back(x.reals[at]);
    else
      out.ints.push_back(x.ints[at]);
  }
  return std::vector<Constant>{out};
}

}  // namespace

bool foldableIndexing(const std::string& op) {
  return op == "CumSum" || op == "ScatterND" || op == "ScatterElements" || op == "GatherElements" ||
         op == "Tile";
}

std::optional<std::vector<Constant>> evaluateIndexing(const onnx::NodeProto& node,
                                                      const std::vector<const Constant*>& in,
                                                      std::string& error) {
  const std::string& op = node.op_type();
  if (op == "CumSum") return cumSum(node, in, error);
  if (op == "ScatterND") return scatterND(node, in, error);
  if (op == "ScatterElements") return scatterElements(node, in, error);
  if (op == "GatherElements") return gatherElements(node, in, error);
  if (op == "Tile") return tile(in, error);
  return std::nullopt;
}

}  // namespace dtc::onnx_import
