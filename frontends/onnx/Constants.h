// Values known at compile time — initializers that are not parameters, Constant nodes, and
// whatever nodes compute from them alone (the shape subgraphs an export leaves, with the batch
// fixed) — and the evaluation of the ONNX ops such subgraphs use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "onnx/OnnxModel.h"

namespace onnx {
class NodeProto;
class AttributeProto;
}  // namespace onnx

namespace dtc::onnx_import {

using Shape = std::vector<int64_t>;

struct Constant {
  int32_t type = 1;  // ONNX element type
  Shape shape;
  std::vector<double> reals;  // floating-point types
  std::vector<int64_t> ints;  // integer types and bool
  // A sequence (ONNX's sequence type, which exports build in loops): its tensors; `type` is
  // theirs and `shape` empty.
  bool isSequence = false;
  std::vector<Constant> elements;

  static Constant ofInts(int32_t type, Shape shape, std::vector<int64_t> values);
  static Constant ofReals(int32_t type, Shape shape, std::vector<double> values);
  static Constant fromData(const TensorData& data);

  bool isFloat() const;
  uint64_t size() const;
  double real(uint64_t i) const { return isFloat() ? reals[i] : static_cast<double>(ints[i]); }
  int64_t integer(uint64_t i) const { return isFloat() ? static_cast<int64_t>(reals[i]) : ints[i]; }
  // The values as float32 bytes, little-endian (a parameter's initial values).
  std::vector<uint8_t> float32Bytes() const;
};

// Whether an ONNX element type is a floating-point one (float, double, float16, bfloat16).
bool isFloatType(int32_t type);
uint64_t elementsOf(const Shape& shape);
std::string shapeText(const Shape& shape);

// The attribute `name` of `node`, or null.
const onnx::AttributeProto* findAttribute(const onnx::NodeProto& node, const std::string& name);
int64_t intAttribute(const onnx::NodeProto& node, const std::string& name, int64_t fallback);
double floatAttribute(const onnx::NodeProto& node, const std::string& name, double fallback);
std::vector<int64_t> intsAttribute(const onnx::NodeProto& node, const std::string& name);
std::string stringAttribute(const onnx::NodeProto& node, const std::string& name,
                            const std::string& fallback);

// NumPy's broadcast of two shapes, or nullopt when they do not broadcast.
std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b);

// The most elements a folded constant may have (a causal mask for a context of 8192): a shape
// subgraph's values are small, and a malformed model's ConstantOfShape or Expand must not
// exhaust memory.
constexpr uint64_t kMaxFoldedElements = uint64_t{1} << 26;

// Whether `shape`'s elements are more than a folded constant may have (`error` says so).
bool tooLarge(const Shape& shape, std::string& error);

// ---- Fold.cpp

// Whether `evaluate` covers ops of this type (with known inputs).
bool foldable(const std::string& opType);

// Evaluates `node` on known inputs (null: an optional input left out). Returns nullopt when the
// op is not one compile-time evaluation covers; `error` is set when it is but the node is
// malformed (bad axes, shapes that do not broadcast).
std::optional<std::vector<Constant>> evaluate(const onnx::NodeProto& node,
                                              const std::vector<const Constant*>& inputs,
                                              std::string& error);

// ---- FoldIndexing.cpp

// CumSum, ScatterND, ScatterElements, GatherElements and Tile, as `evaluate` (which covers
// them through these).
bool foldableIndexing(const std::string& opType);
std::optional<std::vector<Constant>> evaluateIndexing(const onnx::NodeProto& node,
                                                      const std::vector<const Constant*>& inputs,
                                                      std::string& error);

// ---- FoldSequences.cpp

// SequenceEmpty, SequenceConstruct, SplitToSequence, SequenceAt, SequenceInsert,
// SequenceLength and ConcatFromSequence, and Split, as `evaluate`.
bool foldableSequence(const std::string& opType);
std::optional<std::vector<Constant>> evaluateSequence(const onnx::NodeProto& node,
                                                      const std::vector<const Constant*>& inputs,
                                                      std::string& error);

// ---- FoldMatmul.cpp

// NumPy's matmul of two known tensors (a rotary table's frequencies times its positions):
// [..., n, k] · [..., k, m] with the leading dimensions broadcast, a 1-D operand taken as a row
// or a column and its dimension dropped. nullopt with `error` set when the shapes do not fit.
std::optional<std::vector<Constant>> foldMatmul(const std::vector<const Constant*>& inputs,
                                                std::string& error);

}  // namespace dtc::onnx_import
