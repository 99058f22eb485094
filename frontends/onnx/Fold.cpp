// The evaluation of the ONNX ops shape subgraphs use, on known inputs (see Constants.h).
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "onnx/Constants.h"

namespace dtc::onnx_import {
namespace {

using Inputs = std::vector<const Constant*>;
using Result = std::optional<std::vector<Constant>>;

// The most elements of any tensor (the compiler's limit): shapes past it are errors before their
// products overflow.
constexpr int64_t kMaxShapeElements = int64_t{1} << 40;

// float32 results are computed in double and rounded once, as the exporter's own folding does.
double roundedTo(int32_t type, double v) {
  return type == onnx::TensorProto::FLOAT ? static_cast<double>(static_cast<float>(v)) : v;
}

// The index into a broadcast operand of shape `in` (right-aligned to `out`) for the row-major
// index `flat` of `out`.
uint64_t broadcastIndex(uint64_t flat, const Shape& out, const Shape& in) {
  uint64_t index = 0, stride = 1;
  const size_t offset = out.size() - in.size();
  for (size_t d = out.size(); d-- > 0;) {
    const uint64_t coord = flat % static_cast<uint64_t>(out[d]);
    flat /= static_cast<uint64_t>(out[d]);
    if (d >= offset) {
      const int64_t size = in[d - offset];
      if (size != 1) index += coord * stride;
      stride *= static_cast<uint64_t>(size);
    }
  }
  return index;
}

std::vector<uint64_t> stridesOf(const Shape& shape) {
  std::vector<uint64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// A copy of `c` with the values at `indices` (into c's flat values), shaped `shape`.
Constant gathered(const Constant& c, Shape shape, const std::vector<uint64_t>& indices) {
  // (callers bound the indices by their inputs' sizes and kMaxFoldedElements)
  Constant out;
  out.type = c.type;
  out.shape = std::move(shape);
  for (uint64_t i : indices) {
    if (c.isFloat())
      out.reals.push_back(c.reals[i]);
    else
      out.ints.push_back(c.ints[i]);
  }
  return out;
}

bool normaliseAxis(int64_t& axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  return true;
}

std::vector<int64_t> intsOf(const Constant& c) {
  std::vector<int64_t> v;
  for (uint64_t i = 0; i < c.size(); ++i) v.push_back(c.integer(i));
  return v;
}

// ---- element-wise -------------------------------------------------------------------------------

using RealFn = std::function<double(double, double)>;
using IntFn = std::function<int64_t(int64_t, int64_t)>;

Result binary(const Inputs& in, std::string& error, const RealFn& real, const IntFn& integer,
              bool comparison) {
  if (in.size() != 2 || !in[0] || !in[1]) return std::nullopt;
  const Constant &a = *in[0], &b = *in[1];
  std::optional<Shape> shape = broadcastShapes(a.shape, b.shape);
  if (!shape) {
    error = "shapes " + shapeText(a.shape) + " and " + shapeText(b.shape) + " do not broadcast";
    return std::nullopt;
  }
  if (tooLarge(*shape, error)) return std::nullopt;
  Constant out;
  out.shape = *shape;
  const uint64_t n = elementsOf(*shape);
  const bool floating = a.isFloat() || b.isFloat();
  out.type = comparison ? static_cast<int32_t>(onnx::TensorProto::BOOL) : a.type;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t ia = broadcastIndex(i, *shape, a.shape), ib = broadcastIndex(i, *shape, b.shape);
    if (floating) {
      const double v = real(a.real(ia), b.real(ib));
      if (comparison)
        out.ints.push_back(v != 0);
      else
        out.reals.push_back(roundedTo(out.type, v));
    } else {
      out.ints.push_back(integer(a.ints[ia], b.ints[ib]));
    }
  }
  return std::vector<Constant>{out};
}

Result unary(const Inputs& in, const std::function<double(double)>& fn, bool floatOnly) {
  if (in.size() != 1 || !in[0]) return std::nullopt;
  if (floatOnly && !in[0]->isFloat()) return std::nullopt;
  Constant out = *in[0];
  for (double& v : out.reals) v = roundedTo(out.type, fn(v));
  for (int64_t& v : out.ints) v = static_cast<int64_t>(fn(static_cast<double>(v)));
  return std::vector<Constant>{out};
}

// ---- layout -------------------------------------------------------------------------------------

Result reshape(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() < 2 || !in[0] || !in[1]) return std::nullopt;
  const Constant& x = *in[0];
  Shape shape = intsOf(*in[1]);
  const bool allowZero = intAttribute(node, "allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 && !allowZero) {
      if (d >= x.shape.size()) {
        error = "Reshape copies dimension " + std::to_string(d) + " of " + shapeText(x.shape);
        return std::nullopt;
      }
      shape[d] = x.shape[d];
    }
    if (shape[d] == -1) {
      if (infer >= 0) {
        error = "Reshape has two -1 dimensions";
        return std::nullopt;
      }
      infer = static_cast<int64_t>(d);
    } else if (shape[d] < 0) {
      error = "Reshape to a negative dimension";
      return std::nullopt;
    } else if (__builtin_mul_overflow(known, shape[d], &known) || known > kMaxShapeElements) {
      error = "Reshape to " + shapeText(shape) + ", more than 2^40 elements";
      return std::nullopt;
    }
  }
  const int64_t total = static_cast<int64_t>(elementsOf(x.shape));  // x may be a shape alone
  if (infer >= 0) {
    if (known == 0 || total % known != 0) {
      error = "cannot reshape " + shapeText(x.shape) + " to " + shapeText(shape);
      return std::nullopt;
    }
    shape[infer] = total / known;
  }
  if (elementsOf(shape) != elementsOf(x.shape)) {
    error = "cannot reshape " + shapeText(x.shape) + " to " + shapeText(shape);
    return std::nullopt;
  }
  Constant out = x;
  out.shape = shape;
  return std::vector<Constant>{out};
}

Result transpose(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() != 1 || !in[0]) return std::nullopt;
  const Constant& x = *in[0];
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> perm = intsAttribute(node, "perm");
  if (perm.empty())
    for (int64_t d = rank; d-- > 0;) perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != rank) {
    error = "Transpose's perm does not match rank " + std::to_string(rank);
    return std::nullopt;
  }
  Shape shape;
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) {
      error = "Transpose's perm is not a permutation of the dimensions";
      return std::nullopt;
    }
    seen[p] = true;
    shape.push_back(x.shape[p]);
  }
  const std::vector<uint64_t> inStrides = stridesOf(x.shape);
  std::vector<uint64_t> indices;
  const uint64_t n = x.size();
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t flat = i, index = 0;
    for (int64_t d = rank; d-- > 0;) {
      const uint64_t coord = flat % static_cast<uint64_t>(shape[d]);
      flat /= static_cast<uint64_t>(shape[d]);
      index += coord * inStrides[perm[d]];
    }
    indices.push_back(index);
  }
  return std::vector<Constant>{gathered(x, shape, indices)};
}

Result concat(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.empty()) return std::nullopt;
  for (const Constant* c : in)
    if (!c) return std::nullopt;
  int64_t axis = intAttribute(node, "axis", 0);
  const int64_t rank = static_cast<int64_t>(in[0]->shape.size());
  if (!normaliseAxis(axis, rank)) {
    error = "Concat's axis is out of range";
    return std::nullopt;
  }
  Constant out;
  out.type = in[0]->type;
  out.shape = in[0]->shape;
  out.shape[axis] = 0;
  for (const Constant* c : in) {
    if (static_cast<int64_t>(c->shape.size()) != rank || c->isFloat() != in[0]->isFloat()) {
      error = "Concat's inputs differ in rank or type";
      return std::nullopt;
    }
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && c->shape[d] != in[0]->shape[d]) {
        error = "Concat's inputs differ outside the axis";
        return std::nullopt;
      }
    out.shape[axis] += c->shape[axis];
  }
  uint64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= static_cast<uint64_t>(out.shape[d]);
  for (uint64_t o = 0; o < outer; ++o)
    for (const Constant* c : in) {
      const uint64_t run = outer ? c->size() / outer : 0;
      for (uint64_t i = o * run; i < (o + 1) * run; ++i) {
        if (c->isFloat())
          out.reals.push_back(c->reals[i]);
        else
          out.ints.push_back(c->ints[i]);
      }
    }
  return std::vector<Constant>{out};
}

Result gather(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() != 2 || !in[0] || !in[1]) return std::nullopt;
  const Constant &data = *in[0], &indices = *in[1];
  int64_t axis = intAttribute(node, "axis", 0);
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  if (!normaliseAxis(axis, rank)) {
    error = "Gather's axis is out of range";
    return std::nullopt;
  }
  Shape shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (tooLarge(shape, error)) return std::nullopt;
  uint64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= static_cast<uint64_t>(data.shape[d]);
  for (int64_t d = axis + 1; d < rank; ++d) inner *= static_cast<uint64_t>(data.shape[d]);
  const int64_t size = data.shape[axis];
  std::vector<uint64_t> picks;
  for (uint64_t o = 0; o < outer; ++o)
    for (uint64_t k = 0; k < indices.size(); ++k) {
      int64_t i = indices.integer(k);
      if (i < -size || i >= size) {
        error = "Gather's index " + std::to_string(i) + " is out of range";
        return std::nullopt;
      }
      if (i < 0) i += size;
      for (uint64_t j = 0; j < inner; ++j)
        picks.push_back((o * static_cast<uint64_t>(size) + static_cast<uint64_t>(i)) * inner + j);
    }
  return std::vector<Constant>{gathered(data, shape, picks)};
}

Result unsqueeze(const onnx::NodeProto& node, const Inputs& in, std::string& error, bool squeeze) {
  if (in.empty() || !in[0]) return std::nullopt;
  const Constant& x = *in[0];
  std::vector<int64_t> axes = in.size() > 1 && in[1] ? intsOf(*in[1]) : intsAttribute(node, "axes");
  Shape shape;
  if (squeeze) {
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    for (int64_t& a : axes)
      if (!normaliseAxis(a, rank) || x.shape[a] != 1) {
        error = "Squeeze of a dimension that is not 1";
        return std::nullopt;
      }
    for (int64_t d = 0; d < rank; ++d) {
      const bool dropped =
          axes.empty() ? x.shape[d] == 1 : std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!dropped) shape.push_back(x.shape[d]);
    }
  } else {
    const int64_t rank = static_cast<int64_t>(x.shape.size() + axes.size());
    for (int64_t& a : axes)
      if (!normaliseAxis(a, rank)) {
        error = "Unsqueeze's axes are out of range";
        return std::nullopt;
      }
    size_t next = 0;
    for (int64_t d = 0; d < rank; ++d)
      shape.push_back(std::find(axes.begin(), axes.end(), d) != axes.end() ? 1 : x.shape[next++]);
    if (next != x.shape.size()) {
      error = "Unsqueeze has repeated axes";
      return std::nullopt;
    }
  }
  Constant out = x;
  out.shape = shape;
  return std::vector<Constant>{out};
}

Result slice(const Inputs& in, std::string& error) {
  if (in.size() < 3 || !in[0] || !in[1] || !in[2]) return std::nullopt;
  const Constant& x = *in[0];
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const std::vector<int64_t> starts = intsOf(*in[1]), ends = intsOf(*in[2]);
  std::vector<int64_t> axes, steps;
  if (in.size() > 3 && in[3]) axes = intsOf(*in[3]);
  if (in.size() > 4 && in[4]) steps = intsOf(*in[4]);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    error = "Slice's starts, ends, axes and steps differ in length";
    return std::nullopt;
  }
  std::vector<int64_t> begin(rank, 0), step(rank, 1), count(x.shape.begin(), x.shape.end());
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (!normaliseAxis(a, rank) || steps[i] == 0) {
      error = "Slice has a bad axis or a zero step";
      return std::nullopt;
    }
    const int64_t dim = x.shape[a];
    auto clampIndex = [&](int64_t v, bool forward) {
      if (v < 0) v += dim;
      return forward ? std::clamp<int64_t>(v, 0, dim) : std::clamp<int64_t>(v, -1, dim - 1);
    };
    const bool forward = steps[i] > 0;
    const int64_t s = clampIndex(starts[i], forward), e = clampIndex(ends[i], forward);
    begin[a] = s;
    step[a] = steps[i];
    count[a] = forward ? std::max<int64_t>(0, (e - s + steps[i] - 1) / steps[i])
                       : std::max<int64_t>(0, (s - e - steps[i] - 1) / -steps[i]);
  }
  const std::vector<uint64_t> strides = stridesOf(x.shape);
  std::vector<uint64_t> picks;
  const uint64_t n = elementsOf(count);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t flat = i, index = 0;
    for (int64_t d = rank; d-- > 0;) {
      const int64_t coord = static_cast<int64_t>(flat % static_cast<uint64_t>(count[d]));
      flat /= static_cast<uint64_t>(count[d]);
      index += static_cast<uint64_t>(begin[d] + coord * step[d]) * strides[d];
    }
    picks.push_back(index);
  }
  return std::vector<Constant>{gathered(x, count, picks)};
}

Result expand(const Inputs& in, std::string& error) {
  if (in.size() != 2 || !in[0] || !in[1]) return std::nullopt;
  const Constant& x = *in[0];
  std::optional<Shape> shape = broadcastShapes(x.shape, intsOf(*in[1]));
  if (!shape) {
    error = "Expand of " + shapeText(x.shape) + " to " + shapeText(intsOf(*in[1])) +
            " does not broadcast";
    return std::nullopt;
  }
  if (tooLarge(*shape, error)) return std::nullopt;
  std::vector<uint64_t> picks;
  for (uint64_t i = 0; i < elementsOf(*shape); ++i)
    picks.push_back(broadcastIndex(i, *shape, x.shape));
  return std::vector<Constant>{gathered(x, *shape, picks)};
}

Result whereOp(const Inputs& in, std::string& error) {
  if (in.size() != 3 || !in[0] || !in[1] || !in[2]) return std::nullopt;
  const Constant &c = *in[0], &a = *in[1], &b = *in[2];
  std::optional<Shape> ab = broadcastShapes(a.shape, b.shape);
  std::optional<Shape> shape = ab ? broadcastShapes(c.shape, *ab) : std::nullopt;
  if (!shape) {
    error = "Where's operands do not broadcast";
    return std::nullopt;
  }
  if (tooLarge(*shape, error)) return std::nullopt;
  Constant out;
  out.type = a.type;
  out.shape = *shape;
  for (uint64_t i = 0; i < elementsOf(*shape); ++i) {
    const bool pick = c.integer(broadcastIndex(i, *shape, c.shape)) != 0;
    const Constant& from = pick ? a : b;
    const uint64_t j = broadcastIndex(i, *shape, from.shape);
    if (a.isFloat())
      out.reals.push_back(from.real(j));
    else
      out.ints.push_back(from.integer(j));
  }
  return std::vector<Constant>{out};
}

Result cast(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() != 1 || !in[0]) return std::nullopt;
  const int32_t to = static_cast<int32_t>(intAttribute(node, "to", 0));
  if (elementSize(to) == 0) {
    error = "Cast to " + elementTypeName(to);
    return std::nullopt;
  }
  Constant out;
  out.type = to;
  out.shape = in[0]->shape;
  for (uint64_t i = 0; i < in[0]->size(); ++i) {
    if (isFloatType(to)) {
      double v = in[0]->real(i);
      if (to == onnx::TensorProto::FLOAT) v = static_cast<float>(v);
      out.reals.push_back(v);
    } else if (to == onnx::TensorProto::BOOL) {
      out.ints.push_back(in[0]->real(i) != 0);
    } else {
      out.ints.push_back(in[0]->isFloat() ? static_cast<int64_t>(std::trunc(in[0]->reals[i]))
                                          : in[0]->ints[i]);
    }
  }
  return std::vector<Constant>{out};
}

Result range(const Inputs& in, std::string& error) {
  if (in.size() != 3 || !in[0] || !in[1] || !in[2]) return std::nullopt;
  const double start = in[0]->real(0), limit = in[1]->real(0), delta = in[2]->real(0);
  if (delta == 0) {
    error = "Range with a zero delta";
    return std::nullopt;
  }
  const double count = std::ceil((limit - start) / delta);
  if (!(count < static_cast<double>(kMaxFoldedElements))) {
    if (count > 0) {
      error = "a Range of more elements than dtc folds (2^26)";
      return std::nullopt;
    }
  }
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  Constant out;
  out.type = in[0]->type;
  out.shape = {n};
  for (int64_t i = 0; i < n; ++i) {
    if (in[0]->isFloat())
      out.reals.push_back(start + static_cast<double>(i) * delta);
    else
      out.ints.push_back(in[0]->ints[0] + i * in[2]->ints[0]);
  }
  return std::vector<Constant>{out};
}

Result constantOfShape(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.size() != 1 || !in[0]) return std::nullopt;
  const Shape shape = intsOf(*in[0]);
  if (tooLarge(shape, error)) return std::nullopt;
  Constant value = Constant::ofReals(onnx::TensorProto::FLOAT, {}, {0.0});
  if (const onnx::AttributeProto* a = findAttribute(node, "value"); a && a->has_t()) {
    TensorData data;
    data.type = a->t().data_type();
    const std::string& raw = a->t().raw_data();
    data.bytes.assign(raw.begin(), raw.end());
    if (data.bytes.empty()) {
      if (a->t().float_data_size())
        for (float f : a->t().float_data())
          data.bytes.insert(data.bytes.end(), reinterpret_cast<const uint8_t*>(&f),
                            reinterpret_cast<const uint8_t*>(&f) + 4);
      for (int64_t v : a->t().int64_data())
        data.bytes.insert(data.bytes.end(), reinterpret_cast<const uint8_t*>(&v),
                          reinterpret_cast<const uint8_t*>(&v) + 8);
      for (int32_t v : a->t().int32_data()) {
        const size_t w = elementSize(data.type);
        data.bytes.insert(data.bytes.end(), reinterpret_cast<const uint8_t*>(&v),
                          reinterpret_cast<const uint8_t*>(&v) + std::min<size_t>(w, 4));
      }
    }
    if (elementSize(data.type) == 0 || data.bytes.size() != elementSize(data.type)) {
      error = "ConstantOfShape's value is not one element";
      return std::nullopt;
    }
    value = Constant::fromData(data);
  }
  Constant out;
  out.type = value.type;
  out.shape = shape;
  const uint64_t n = elementsOf(shape);
  if (value.isFloat())
    out.reals.assign(n, value.reals[0]);
  else
    out.ints.assign(n, value.ints[0]);
  return std::vector<Constant>{out};
}

Result trilu(const onnx::NodeProto& node, const Inputs& in, std::string& error) {
  if (in.empty() || !in[0]) return std::nullopt;
  const Constant& x = *in[0];
  if (x.shape.size() < 2) {
    error = "Trilu needs at least 2 dimensions";
    return std::nullopt;
  }
  const int64_t k = in.size() > 1 && in[1] ? in[1]->integer(0) : 0;
  const bool upper = intAttribute(node, "upper", 1) != 0;
  const int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  Constant out = x;
  for (uint64_t i = 0; i < x.size(); ++i) {
    const int64_t c = static_cast<int64_t>(i % cols), r = static_cast<int64_t>(i / cols % rows);
    const bool keep = upper ? c - r >= k : c - r <= k;
    if (!keep) {
      if (out.isFloat())
        out.reals[i] = 0;
      else
        out.ints[i] = 0;
    }
  }
  return std::vector<Constant>{out};
}

Result reduce(const onnx::NodeProto& node, const Inputs& in, std::string& error,
              const std::string& kind) {
  if (in.empty() || !in[0]) return std::nullopt;
  const Constant& x = *in[0];
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes = in.size() > 1 && in[1] ? intsOf(*in[1]) : intsAttribute(node, "axes");
  if (axes.empty() && intAttribute(node, "noop_with_empty_axes", 0) == 0)
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  for (int64_t& a : axes)
    if (!normaliseAxis(a, rank)) {
      error = kind + "'s axes are out of range";
      return std::nullopt;
    }
  const bool keep = intAttribute(node, "keepdims", 1) != 0;
  Shape kept, shape;
  for (int64_t d = 0; d < rank; ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    kept.push_back(reduced ? 1 : x.shape[d]);
    if (!reduced || keep) shape.push_back(reduced ? 1 : x.shape[d]);
  }
  std::vector<double> acc(elementsOf(kept), kind == "ReduceProd" ? 1.0 : 0.0);
  std::vector<bool> seen(acc.size(), false);
  for (uint64_t i = 0; i < x.size(); ++i) {
    // The index of i's group: its coordinates with the reduced ones set to 0.
    uint64_t flat = i, index = 0, stride = 1;
    for (int64_t d = rank; d-- > 0;) {
      const uint64_t coord = flat % static_cast<uint64_t>(x.shape[d]);
      flat /= static_cast<uint64_t>(x.shape[d]);
      if (kept[d] != 1 || x.shape[d] == 1) index += coord * stride;
      stride *= static_cast<uint64_t>(kept[d]);
    }
    const double v = x.real(i);
    double& a = acc[index];
    if (kind == "ReduceProd")
      a *= v;
    else if (kind == "ReduceMax")
      a = seen[index] ? std::max(a, v) : v;
    else if (kind == "ReduceMin")
      a = seen[index] ? std::min(a, v) : v;
    else
      a += v;
    seen[index] = true;
  }
  if (kind == "ReduceMean" && !acc.empty()) {
    const double count = static_cast<double>(x.size()) / static_cast<double>(acc.size());
    for (double& a : acc) a /= count;
  }
  Constant out;
  out.type = x.type;
  out.shape = shape;
  for (double a : acc) {
    if (x.isFloat())
      out.reals.push_back(a);
    else
      out.ints.push_back(static_cast<int64_t>(a));
  }
  return std::vector<Constant>{out};
}

Result variadic(const Inputs& in, std::string& error, bool takeMax) {
  if (in.empty() || !in[0]) return std::nullopt;
  Result acc = std::vector<Constant>{*in[0]};
  for (size_t i = 1; i < in.size() && acc; ++i) {
    const Constant* pair[2] = {&(*acc)[0], in[i]};
    acc = binary(
        Inputs(pair, pair + 2), error,
        [takeMax](double a, double b) { return takeMax ? std::max(a, b) : std::min(a, b); },
        [takeMax](int64_t a, int64_t b) { return takeMax ? std::max(a, b) : std::min(a, b); },
        false);
  }
  return acc;
}

int64_t floorDiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

bool foldable(const std::string& op) {
  static const std::set<std::string> ops = {"Identity",
                                            "Cast",
                                            "Reshape",
                                            "Transpose",
                                            "Concat",
                                            "Gather",
                                            "Unsqueeze",
                                            "Squeeze",
                                            "Slice",
                                            "Expand",
                                            "Where",
                                            "Range",
                                            "ConstantOfShape",
                                            "Trilu",
                                            "ReduceSum",
                                            "ReduceProd",
                                            "ReduceMax",
                                            "ReduceMin",
                                            "ReduceMean",
                                            "Max",
                                            "Min",
                                            "Add",
                                            "Sub",
                                            "Mul",
                                            "Div",
                                            "Pow",
                                            "Mod",
                                            "Equal",
                                            "Less",
                                            "Greater",
                                            "LessOrEqual",
                                            "GreaterOrEqual",
                                            "And",
                                            "Or",
                                            "Xor",
                                            "Neg",
                                            "Abs",
                                            "Sqrt",
                                            "Exp",
                                            "Log",
                                            "Reciprocal",
                                            "Floor",
                                            "Ceil",
                                            "Not",
                                            "Sign",
                                            "Cos",
                                            "Sin",
                                            "MatMul"};
  return ops.count(op) > 0 || foldableIndexing(op) || foldableSequence(op);
}

std::optional<std::vector<Constant>> evaluate(const onnx::NodeProto& node,
                                              const std::vector<const Constant*>& in,
                                              std::string& error) {
  const std::string& op = node.op_type();
  if (op == "Identity") return in.size() == 1 && in[0] ? Result{{*in[0]}} : std::nullopt;
  if (op == "Cast") return cast(node, in, error);
  if (op == "Reshape") return reshape(node, in, error);
  if (op == "Transpose") return transpose(node, in, error);
  if (op == "Concat") return concat(node, in, error);
  if (op == "Gather") return gather(node, in, error);
  if (op == "Unsqueeze") return unsqueeze(node, in, error, false);
  if (op == "Squeeze") return unsqueeze(node, in, error, true);
  if (op == "Slice") return slice(in, error);
  if (op == "Expand") return expand(in, error);
  if (op == "Where") return whereOp(in, error);
  if (op == "Range") return range(in, error);
  if (op == "ConstantOfShape") return constantOfShape(node, in, error);
  if (op == "Trilu") return trilu(node, in, error);
  if (op == "ReduceSum" || op == "ReduceProd" || op == "ReduceMax" || op == "ReduceMin" ||
      op == "ReduceMean")
    return reduce(node, in, error, op);
  if (op == "Max" || op == "Min") return variadic(in, error, op == "Max");
  if (op == "MatMul") return foldMatmul(in, error);
  if (foldableIndexing(op)) return evaluateIndexing(node, in, error);
  if (foldableSequence(op)) return evaluateSequence(node, in, error);
  for (const Constant* c : in)
    if (c && c->isSequence) return std::nullopt;  // the tensor ops below take no sequence
  static const std::map<std::string, std::pair<RealFn, IntFn>> arithmetic = {
      {"Add",
       {[](double a, double b) { return a + b; }, [](int64_t a, int64_t b) { return a + b; }}},
      {"Sub",
       {[](double a, double b) { return a - b; }, [](int64_t a, int64_t b) { return a - b; }}},
      {"Mul",
       {[](double a, double b) { return a * b; }, [](int64_t a, int64_t b) { return a * b; }}},
      {"Div",
       {[](double a, double b) { return a / b; },
        [](int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }}},
      {"Pow",
       {[](double a, double b) { return std::pow(a, b); },
        [](int64_t a, int64_t b) { return static_cast<int64_t>(std::pow(a, b)); }}},
      {"Mod",
       {[](double a, double b) { return std::fmod(a, b); },
        [](int64_t a, int64_t b) { return b == 0 ? 0 : a - floorDiv(a, b) * b; }}},
  };
  if (auto it = arithmetic.find(op); it != arithmetic.end())
    return binary(in, error, it->second.first, it->second.second, false);
  static const std::map<std::string, RealFn> comparisons = {
      {"Equal", [](double a, double b) { return a == b ? 1.0 : 0.0; }},
      {"Less", [](double a, double b) { return a < b ? 1.0 : 0.0; }},
      {"Greater", [](double a, double b) { return a > b ? 1.0 : 0.0; }},
      {"LessOrEqual", [](double a, double b) { return a <= b ? 1.0 : 0.0; }},
      {"GreaterOrEqual", [](double a, double b) { return a >= b ? 1.0 : 0.0; }},
      {"And", [](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; }},
      {"Or", [](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; }},
      {"Xor", [](double a, double b) { return (a != 0) != (b != 0) ? 1.0 : 0.0; }},
  };
  if (auto it = comparisons.find(op); it != comparisons.end()) {
    const RealFn& f = it->second;
    return binary(
        in, error, f, [f](int64_t a, int64_t b) { return static_cast<int64_t>(f(a, b)); }, true);
  }
  static const std::map<std::string, std::pair<std::function<double(double)>, bool>> unaries = {
      {"Neg", {[](double v) { return -v; }, false}},
      {"Abs", {[](double v) { return std::fabs(v); }, false}},
      {"Sqrt", {[](double v) { return std::sqrt(v); }, true}},
      {"Exp", {[](double v) { return std::exp(v); }, true}},
      {"Log", {[](double v) { return std::log(v); }, true}},
      {"Reciprocal", {[](double v) { return 1.0 / v; }, true}},
      {"Floor", {[](double v) { return std::floor(v); }, true}},
      {"Ceil", {[](double v) { return std::ceil(v); }, true}},
      {"Not", {[](double v) { return v == 0 ? 1.0 : 0.0; }, false}},
      {"Sign", {[](double v) { return static_cast<double>((v > 0) - (v < 0)); }, false}},
      {"Cos", {[](double v) { return std::cos(v); }, true}},
      {"Sin", {[](double v) { return std::sin(v); }, true}},
  };
  if (auto it = unaries.find(op); it != unaries.end())
    return unary(in, it->second.first, it->second.second);
  return std::nullopt;
}

}  // namespace dtc::onnx_import
