// Compile-time evaluation of ONNX's sequence ops, which exports write for repeat_interleave and
// other loops over a tensor's pieces (a rotary table's columns interleaved), and of Split.
#include <onnx/onnx_pb.h>

#include "onnx/Constants.h"

namespace dtc::onnx_import {
namespace {

using Inputs = std::vector<const Constant*>;
using Result = std::optional<std::vector<Constant>>;

Constant sequenceOf(int32_t type, std::vector<Constant> elements) {
  Constant s;
  s.type = type;
  s.isSequence = true;
  s.elements = std::move(elements);
  return s;
}

// `x`'s pieces along `axis` of the given sizes.
std::vector<Constant> pieces(const Constant& x, int64_t axis, const std::vector<int64_t>& sizes) {
  uint64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const uint64_t length = static_cast<uint64_t>(x.shape[axis]);
  const uint64_t outer = x.size() / std::max<uint64_t>(length * inner, 1);
  std::vector<Constant> out;
  int64_t start = 0;
  for (int64_t size : sizes) {
    Constant p;
    p.type = x.type;
    p.shape = x.shape;
    p.shape[axis] = size;
    for (uint64_t o = 0; o < outer; ++o)
      for (uint64_t k = 0; k < static_cast<uint64_t>(size) * inner; ++k) {
        const uint64_t at = (o * length + static_cast<uint64_t>(start)) * inner + k;
        if (x.isFloat())
          p.reals.push_back(x.reals[at]);
        else
          p.ints.push_back(x.ints[at]);
      }
    out.push_back(std::move(p));
    start += size;
  }
  return out;
}

bool normalised(int64_t& axis, size_t rank, std::string& error) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    error =
        "axis " + std::to_string(axis) + " is outside a rank-" + std::to_string(rank) + " tensor";
    return false;
  }
  if (axis < 0) axis += r;
  return true;
}

// The sizes a split of `length` takes: `split` (a tensor of sizes, or a scalar chunk size), or
// `count` equal pieces.
std::optional<std::vector<int64_t>> splitSizes(const Constant* split, int64_t length, int64_t count,
                                               std::string& error) {
  std::vector<int64_t> sizes;
  if (split && split->shape.empty()) {  // a chunk size: the last piece what is left
    const int64_t chunk = split->integer(0);
    if (chunk < 1) {
      error = "a split of size " + std::to_string(chunk);
      return std::nullopt;
    }
    for (int64_t at = 0; at < length; at += chunk) sizes.push_back(std::min(chunk, length - at));
  } else if (split) {
    int64_t total = 0;
    for (uint64_t k = 0; k < split->size(); ++k) {
      sizes.push_back(split->integer(k));
      total += sizes.back();
    }
    if (total != length) {
      error = "split sizes sum to " + std::to_string(total) + ", the axis has " +
              std::to_string(length);
      return std::nullopt;
    }
  } else {
    if (count < 1 || length % count != 0) {
      error = "the axis of " + std::to_string(length) + " does not split into " +
              std::to_string(count) + " equal pieces";
      return std::nullopt;
    }
    sizes.assign(static_cast<size_t>(count), length / count);
  }
  return sizes;
}

Result splitToSequence(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.empty() || !in[0] || in[0]->isSequence) return std::nullopt;
  const Constant& x = *in[0];
  int64_t axis = intAttribute(node, "axis", 0);
  if (!normalised(axis, x.shape.size(), error)) return std::nullopt;
  const Constant* split = in.size() > 1 ? in[1] : nullptr;
  const bool keepdims = intAttribute(node, "keepdims", 1) != 0;
  auto sizes = splitSizes(split ? split : nullptr, x.shape[axis], x.shape[axis], error);
  if (!sizes) return std::nullopt;
  std::vector<Constant> elements = pieces(x, axis, *sizes);
  if (!split && !keepdims)  // pieces of one: their axis dropped
    for (Constant& e : elements) e.shape.erase(e.shape.begin() + axis);
  return std::vector<Constant>{sequenceOf(x.type, std::move(elements))};
}

Result split(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.empty() || !in[0] || in[0]->isSequence) return std::nullopt;
  const Constant& x = *in[0];
  int64_t axis = intAttribute(node, "axis", 0);
  if (!normalised(axis, x.shape.size(), error)) return std::nullopt;
  const Constant* sizesInput = in.size() > 1 ? in[1] : nullptr;
  std::optional<Constant> fromAttribute;
  if (!sizesInput && findAttribute(node, "split")) {
    std::vector<int64_t> v = intsAttribute(node, "split");
    fromAttribute = Constant::ofInts(onnx::TensorProto::INT64, {static_cast<int64_t>(v.size())}, v);
    sizesInput = &*fromAttribute;
  }
  auto sizes = splitSizes(sizesInput, x.shape[axis], node.output_size(), error);
  if (!sizes) return std::nullopt;
  if (static_cast<int>(sizes->size()) != node.output_size()) {
    error = "Split into " + std::to_string(sizes->size()) + " pieces for " +
            std::to_string(node.output_size()) + " outputs";
    return std::nullopt;
  }
  return pieces(x, axis, *sizes);
}

// A sequence position (negative from the end); `insert` allows one past the last.
std::optional<size_t> position(const Constant* p, size_t size, bool insert, std::string& error) {
  if (!p) return size;
  int64_t i = p->integer(0);
  const int64_t n = static_cast<int64_t>(size) + (insert ? 1 : 0);
  if (i < 0) i += static_cast<int64_t>(size);
  if (i < 0 || i >= n) {
    error = "sequence position " + std::to_string(p->integer(0)) + " outside a sequence of " +
            std::to_string(size);
    return std::nullopt;
  }
  return static_cast<size_t>(i);
}

Result concatFromSequence(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() != 1 || !in[0] || !in[0]->isSequence || in[0]->elements.empty()) {
    if (in.size() == 1 && in[0] && in[0]->isSequence) error = "ConcatFromSequence of no tensors";
    return std::nullopt;
  }
  const std::vector<Constant>& parts = in[0]->elements;
  const bool newAxis = intAttribute(node, "new_axis", 0) != 0;
  int64_t axis = intAttribute(node, "axis", 0);
  if (!normalised(axis, parts[0].shape.size() + (newAxis ? 1 : 0), error)) return std::nullopt;
  Shape shape = parts[0].shape;
  if (newAxis) shape.insert(shape.begin() + axis, 1);
  // Each part as `shape`'s rank, then joined along the axis.
  uint64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  uint64_t outer = 1;
  for (size_t d = 0; d < static_cast<size_t>(axis); ++d) outer *= shape[d];
  Constant out;
  out.type = parts[0].type;
  out.shape = shape;
  out.shape[axis] = 0;
  for (const Constant& p : parts) {
    Shape ps = p.shape;
    if (newAxis) ps.insert(ps.begin() + axis, 1);
    for (size_t d = 0; d < ps.size(); ++d)
      if (static_cast<int64_t>(d) != axis && ps[d] != shape[d]) {
        error = "ConcatFromSequence of tensors of shapes " + shapeText(parts[0].shape) + " and " +
                shapeText(p.shape);
        return std::nullopt;
      }
    out.shape[axis] += ps[axis];
  }
  for (uint64_t o = 0; o < outer; ++o)
    for (const Constant& p : parts) {
      const uint64_t length = newAxis ? 1 : static_cast<uint64_t>(p.shape[axis]);
      for (uint64_t k = 0; k < length * inner; ++k) {
        const uint64_t at = o * length * inner + k;
        if (p.isFloat())
          out.reals.push_back(p.reals[at]);
        else
          out.ints.push_back(p.ints[at]);
      }
    }
  return std::vector<Constant>{out};
}

}  // namespace

bool foldableSequence(const std::string& op) {
  return op == "SequenceEmpty" || op == "SequenceConstruct" || op == "SplitToSequence" ||
         op == "SequenceAt" || op == "SequenceInsert" || op == "SequenceLength" ||
         op == "ConcatFromSequence" || op == "Split";
}

std::optional<std::vector<Constant>> evaluateSequence(const onnx::NodeProto& node,
                                                      const std::vector<const Constant*>& in,
                                                      std::string& error) {
  const std::string& op = node.op_type();
  if (op == "SequenceEmpty")
    return std::vector<Constant>{sequenceOf(
        static_cast<int32_t>(intAttribute(node, "dtype", onnx::TensorProto::FLOAT)), {})};
  if (op == "Split") return split(node, in, error);
  if (op == "SplitToSequence") return splitToSequence(node, in, error);
  if (op == "SequenceConstruct") {
    std::vector<Constant> elements;
    for (const Constant* c : in) {
      if (!c || c->isSequence) return std::nullopt;
      elements.push_back(*c);
    }
    if (elements.empty()) return std::nullopt;
    const int32_t type = elements[0].type;
    return std::vector<Constant>{sequenceOf(type, std::move(elements))};
  }
  if (in.empty() || !in[0] || !in[0]->isSequence) return std::nullopt;
  const Constant& seq = *in[0];
  if (op == "SequenceLength")
    return std::vector<Constant>{Constant::ofInts(onnx::TensorProto::INT64, {},
                                                  {static_cast<int64_t>(seq.elements.size())})};
  if (op == "SequenceAt") {
    auto at = position(in.size() > 1 ? in[1] : nullptr, seq.elements.size(), false, error);
    if (!at || in.size() < 2) return std::nullopt;
    return std::vector<Constant>{seq.elements[*at]};
  }
  if (op == "SequenceInsert") {
    if (in.size() < 2 || !in[1] || in[1]->isSequence) return std::nullopt;
    auto at = position(in.size() > 2 ? in[2] : nullptr, seq.elements.size(), true, error);
    if (!at) return std::nullopt;
    Constant out = seq;
    out.elements.insert(out.elements.begin() + static_cast<std::ptrdiff_t>(*at), *in[1]);
    return std::vector<Constant>{out};
  }
  if (op == "ConcatFromSequence") return concatFromSequence(node, in, error);
  return std::nullopt;
}

}  // namespace dtc::onnx_import
