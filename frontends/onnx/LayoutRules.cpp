// The ONNX op rules for layout: reshapes, transposes, splits, concatenations, slices, softmax
// over any axis (see RuleKit.h).
#include <algorithm>
#include <map>
#include <set>

#include "onnx/RuleKit.h"

namespace dtc::onnx_import::rules {

// ---- layout -------------------------------------------------------------------------------------

// Reshape, Flatten, Unsqueeze and Squeeze on computed values: a dtc Reshape to the shape the
// walk worked out.
OpRule reshapeRule() {
  return {
      [](Translator& t, int i) -> Error {
        const onnx::NodeProto& n = t.node(i);
        const Value& x = *t.input(i, 0);
        const std::string& op = n.op_type();
        Shape shape;
        if (op == "Flatten") {
          int64_t axis = intAttribute(n, "axis", 1);  // in [-rank, rank]
          if (axis < 0) axis += rankOf(x);
          if (axis < 0 || axis > rankOf(x)) return t.nodeError(i, "Flatten's axis is out of range");
          int64_t outer = 1;
          for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
          shape = {outer, static_cast<int64_t>(elementsOf(x.shape)) / std::max<int64_t>(outer, 1)};
        } else {
          if (Error e = requireConstant(t, i, 1, "the shape or axes")) return e;
          // The constant evaluation of the same node on a stand-in of x's shape.
          // (its shape alone: the rules of these ops read no values of x)
          Constant standIn = Constant::ofInts(kInt64, x.shape, {});
          std::vector<const Constant*> in = {&standIn};
          for (int k = 1; k < n.input_size(); ++k) in.push_back(t.constant(i, k));
          std::string problem;
          std::optional<std::vector<Constant>> r = evaluate(n, in, problem);
          if (!r) return t.nodeError(i, problem.empty() ? "cannot work out its shape" : problem);
          shape = (*r)[0].shape;
        }
        t.define(out(t, i), x.type, shape);
        return Error::success();
      },
      [](Translator& t, int i) -> Error {
        t.emit(i, "Reshape", {operand(t, i, 0)}, {out(t, i)},
               {NodeAttr::ints("shape", t.value(out(t, i))->shape)});
        return Error::success();
      }};
}

OpRule transposeRule() {
  return {[](Translator& t, int i) -> Error {
            const Value& x = *t.input(i, 0);
            std::vector<int64_t> perm = intsAttribute(t.node(i), "perm");
            if (perm.empty())
              for (int64_t d = rankOf(x); d-- > 0;) perm.push_back(d);
            if (static_cast<int64_t>(perm.size()) != rankOf(x))
              return t.nodeError(i, "perm does not match the rank of " + shapeText(x.shape));
            Shape shape;
            std::vector<bool> seen(perm.size(), false);
            for (int64_t p : perm) {
              if (p < 0 || p >= rankOf(x) || seen[p])
                return t.nodeError(i, "perm is not a permutation of the dimensions");
              seen[p] = true;
              shape.push_back(x.shape[p]);
            }
            t.define(out(t, i), x.type, shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            std::vector<int64_t> perm = intsAttribute(t.node(i), "perm");
            if (perm.empty())
              for (int64_t d = rankOf(*t.input(i, 0)); d-- > 0;) perm.push_back(d);
            t.emit(i, "Transpose", {operand(t, i, 0)}, {out(t, i)}, {NodeAttr::ints("perm", perm)});
            return Error::success();
          }};
}

// The sizes of Split's pieces: the `split` input or attribute, else equal pieces.
static Expected<std::vector<int64_t>> splitSizes(Translator& t, int i, int64_t axis) {
  const onnx::NodeProto& n = t.node(i);
  const int64_t parts = n.output_size(), whole = t.input(i, 0)->shape[axis];
  std::vector<int64_t> sizes =
      t.constant(i, 1) ? intsOf(*t.constant(i, 1)) : intsAttribute(n, "split");
  if (sizes.empty()) {
    if (parts == 0 || whole % parts != 0)
      return t.nodeError(i, "dimension " + std::to_string(whole) + " does not split into " +
                                std::to_string(parts));
    sizes.assign(parts, whole / parts);
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 1 || s > whole - total) return t.nodeError(i, "pieces must have positive sizes");
    total += s;
  }
  if (static_cast<int64_t>(sizes.size()) != parts || total != whole)
    return t.nodeError(i, "its sizes do not add up to dimension " + std::to_string(whole) + " in " +
                              std::to_string(parts) + " pieces");
  return sizes;
}

// Split into pieces (dtc's Split: equal ones, or of the sizes given).
OpRule splitRule() {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            if (Error e = requireFloat(t, i, {0})) return e;
            if (Error e = requireConstant(t, i, 1, "the split sizes")) return e;
            const Value& x = *t.input(i, 0);
            int64_t axis = intAttribute(n, "axis", 0);
            if (!normalise(axis, rankOf(x))) return t.nodeError(i, "axis is out of range");
            for (const std::string& piece : n.output())
              if (piece.empty()) return t.nodeError(i, "an output of Split has no name");
            Expected<std::vector<int64_t>> sizes = splitSizes(t, i, axis);
            if (!sizes) return sizes.takeError();
            for (size_t k = 0; k < sizes->size(); ++k) {
              Shape shape = x.shape;
              shape[axis] = (*sizes)[k];
              t.define(out(t, i, static_cast<int>(k)), kFloat, shape);
            }
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            int64_t axis = intAttribute(t.node(i), "axis", 0);
            normalise(axis, rankOf(*t.input(i, 0)));
            Expected<std::vector<int64_t>> sizes = splitSizes(t, i, axis);
            if (!sizes) return sizes.takeError();
            std::vector<std::string> outs(t.node(i).output().begin(), t.node(i).output().end());
            std::vector<NodeAttr> attrs = {NodeAttr::integer("axis", axis)};
            if (!std::all_of(sizes->begin(), sizes->end(),
                             [&](int64_t s) { return s == sizes->front(); }))
              attrs.push_back(NodeAttr::ints("sizes", *sizes));
            t.emit(i, "Split", {operand(t, i, 0)}, outs, attrs);
            return Error::success();
          }};
}

// Concat of float values (int64 shape arithmetic is folded): dtc's Concat, constant pieces as
// frozen initializers.
OpRule concatRule() {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            if (n.input_size() == 0) return t.nodeError(i, "Concat has no inputs");
            for (int k = 0; k < n.input_size(); ++k) {
              if (!t.input(i, k)) return t.nodeError(i, "an input of Concat is absent");
              if (Error e = requireFloat(t, i, {k})) return e;
            }
            Shape shape = t.input(i, 0)->shape;
            int64_t axis = intAttribute(n, "axis", 0);
            if (!normalise(axis, rankOf(*t.input(i, 0))))
              return t.nodeError(i, "axis is out of range");
            shape[axis] = 0;
            for (int k = 0; k < n.input_size(); ++k) {
              const Shape& piece = t.input(i, k)->shape;
              bool fits = piece.size() == shape.size();
              for (size_t d = 0; fits && d < piece.size(); ++d)
                fits = static_cast<int64_t>(d) == axis || piece[d] == shape[d];
              if (!fits)
                return t.nodeError(i, "pieces " + shapeText(t.input(i, 0)->shape) + " and " +
                                          shapeText(piece) + " differ beyond the axis");
              shape[axis] += piece[axis];
            }
            t.define(out(t, i), kFloat, shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            int64_t axis = intAttribute(n, "axis", 0);
            normalise(axis, rankOf(*t.input(i, 0)));
            std::vector<std::string> pieces;
            for (int k = 0; k < n.input_size(); ++k) {
              const Constant* c = t.constant(i, k);
              pieces.push_back(c ? t.frozenConstant(i, *c) : operand(t, i, k));
            }
            t.emit(i, "Concat", pieces, {out(t, i)}, {NodeAttr::integer("axis", axis)});
            return Error::success();
          }};
}

// Slice with known starts, ends, axes and positive steps: per sliced axis a Split into the part
// before, the slice and the part after, of which only the slice is used. A step s > 1 takes a
// window of length·s elements from `start` (its first element `offset` in, so that the window
// fits the axis), reshaped [length, s]: the slice is the column `offset` of that (GPT-J's
// rotary halves, x[..., ::2] and x[..., 1::2]).
struct SliceRange {
  int64_t axis, start, length;
  int64_t step = 1, offset = 0;
};

static Expected<std::vector<SliceRange>> sliceRanges(Translator& t, int i) {
  for (int k = 1; k <= 4; ++k)
    if (Error e = requireConstant(t, i, k, "Slice's starts, ends, axes and steps")) return e;
  const Value& x = *t.input(i, 0);
  if (!t.constant(i, 1) || !t.constant(i, 2))
    return t.nodeError(i, "Slice needs its starts and ends");
  const std::vector<int64_t> starts = intsOf(*t.constant(i, 1)), ends = intsOf(*t.constant(i, 2));
  std::vector<int64_t> axes, steps;
  if (t.constant(i, 3)) axes = intsOf(*t.constant(i, 3));
  if (t.constant(i, 4)) steps = intsOf(*t.constant(i, 4));
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return t.nodeError(i, "starts, ends, axes and steps differ in length");
  std::vector<SliceRange> ranges;
  std::vector<bool> seen(x.shape.size(), false);
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = axes[k];
    if (!normalise(axis, rankOf(x)) || seen[axis])
      return t.nodeError(i, "its axes are out of range or repeated");
    seen[axis] = true;
    if (steps[k] < 1)
      return t.nodeError(
          i, "steps below 1 are not supported yet (step " + std::to_string(steps[k]) + ")");
    const int64_t dim = x.shape[axis], step = steps[k];
    auto clamp = [dim](int64_t v) {
      if (v < 0) v = v < -dim ? 0 : v + dim;
      return std::min(v, dim);
    };
    const int64_t start = clamp(starts[k]), end = clamp(ends[k]);
    if (end <= start)
      return t.nodeError(i, "the slice along axis " + std::to_string(axis) + " is empty");
    if (step == 1) {
      if (end - start < dim) ranges.push_back({axis, start, end - start});
      continue;
    }
    const int64_t count = (end - start + step - 1) / step;
    const int64_t window = std::min(start, dim - count * step);
    if (window < 0 || start - window >= step)
      return t.nodeError(i, "a slice of step " + std::to_string(step) + " from " +
                                std::to_string(start) + " that no window of the axis holds");
    ranges.push_back({axis, window, count, step, start - window});
  }
  return ranges;
}

// Float data, or int64 labels (a causal LM's shift, labels[..., 1:]).
OpRule sliceRule() {
  return {[](Translator& t, int i) -> Error {
            if (t.input(i, 0)->type != kInt64)
              if (Error e = requireFloat(t, i, {0})) return e;
            Expected<std::vector<SliceRange>> ranges = sliceRanges(t, i);
            if (!ranges) return ranges.takeError();
            if (ranges->empty()) {  // the whole tensor
              t.alias(out(t, i), t.node(i).input(0));
              return Error::success();
            }
            Shape shape = t.input(i, 0)->shape;
            for (const SliceRange& r : *ranges) {
              if (r.step > 1 && t.input(i, 0)->type != kFloat)
                return t.nodeError(i, "a slice of step " + std::to_string(r.step) +
                                          " of int64 data is not supported yet");
              shape[r.axis] = r.length;
            }
            t.define(out(t, i), t.input(i, 0)->type, shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            Expected<std::vector<SliceRange>> ranges = sliceRanges(t, i);
            if (!ranges) return ranges.takeError();
            std::string current = operand(t, i, 0);
            Shape shape = t.input(i, 0)->shape;
            for (size_t k = 0; k < ranges->size(); ++k) {
              const SliceRange& r = (*ranges)[k];
              const std::string last =
                  k + 1 == ranges->size() ? out(t, i) : t.fresh(out(t, i) + ".slice");
              const std::string kept = r.step > 1 ? t.fresh(out(t, i) + ".window") : last;
              // The contiguous part: the slice, or a stepped slice's window.
              const int64_t span = r.length * r.step;
              if (span < shape[r.axis]) {
                std::vector<int64_t> sizes;
                std::vector<std::string> pieces;
                if (r.start > 0) {
                  sizes.push_back(r.start);
                  pieces.push_back(t.fresh(out(t, i) + ".before"));
                }
                sizes.push_back(span);
                pieces.push_back(kept);
                if (r.start + span < shape[r.axis]) {
                  sizes.push_back(shape[r.axis] - r.start - span);
                  pieces.push_back(t.fresh(out(t, i) + ".after"));
                }
                t.emit(i, "Split", {current}, pieces,
                       {NodeAttr::integer("axis", r.axis), NodeAttr::ints("sizes", sizes)});
              } else {
                t.emit(i, "Reshape", {current}, {kept}, {NodeAttr::ints("shape", shape)});
              }
              shape[r.axis] = r.length;
              current = kept;
              if (r.step > 1) {
                // [..., length·s, ...] -> [..., length, s, ...]: column `offset`.
                Shape rows = shape;
                rows.insert(rows.begin() + r.axis + 1, r.step);
                const std::string grid = t.fresh(out(t, i) + ".grid");
                t.emit(i, "Reshape", {kept}, {grid}, {NodeAttr::ints("shape", rows)});
                std::vector<int64_t> sizes;
                std::vector<std::string> pieces;
                const std::string column = t.fresh(out(t, i) + ".column");
                if (r.offset > 0) {
                  sizes.push_back(r.offset);
                  pieces.push_back(t.fresh(out(t, i) + ".left"));
                }
                sizes.push_back(1);
                pieces.push_back(column);
                if (r.offset + 1 < r.step) {
                  sizes.push_back(r.step - r.offset - 1);
                  pieces.push_back(t.fresh(out(t, i) + ".right"));
                }
                t.emit(i, "Split", {grid}, pieces,
                       {NodeAttr::integer("axis", r.axis + 1), NodeAttr::ints("sizes", sizes)});
                t.emit(i, "Reshape", {column}, {last}, {NodeAttr::ints("shape", shape)});
                current = last;
              }
            }
            return Error::success();
          }};
}

// Tile(x, repeats) of float activations: x reshaped [1, d0, 1, d1, ...], broadcast to
// [r0, d0, r1, d1, ...] (each copy outside the original, as Tile lays them) and joined back;
// the gradient sums the copies (Expand's).
OpRule tileRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            if (Error e = requireConstant(t, i, 1, "Tile's repeats")) return e;
            const Value& x = *t.input(i, 0);
            const Constant* repeats = t.constant(i, 1);
            if (!repeats || repeats->size() != x.shape.size())
              return t.nodeError(i, "one repeat for each of the input's dimensions");
            Shape shape = x.shape;
            for (size_t d = 0; d < shape.size(); ++d) {
              if (repeats->integer(d) < 1) return t.nodeError(i, "repeats must be positive");
              shape[d] *= repeats->integer(d);
            }
            t.define(out(t, i), kFloat, shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const Value& x = *t.input(i, 0);
            const Constant& repeats = *t.constant(i, 1);
            Shape spread, copies;
            for (size_t d = 0; d < x.shape.size(); ++d) {
              spread.insert(spread.end(), {1, x.shape[d]});
              copies.insert(copies.end(), {repeats.integer(d), x.shape[d]});
            }
            const std::string apart = t.fresh(out(t, i) + "::apart");
            const std::string copied = t.fresh(out(t, i) + "::copies");
            t.emit(i, "Reshape", {x.name}, {apart}, {NodeAttr::ints("shape", spread)});
            t.emit(i, "Expand", {apart}, {copied}, {NodeAttr::ints("shape", copies)});
            t.emit(i, "Reshape", {copied}, {out(t, i)},
                   {NodeAttr::ints("shape", t.value(out(t, i))->shape)});
            return Error::success();
          },
          2, 2};
}

// Pad by zero everywhere (what PyTorch writes before an AveragePool without padding): the
// identity. Other padding of data is not translated yet.
OpRule padRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireConstant(t, i, 1, "the pads")) return e;
            const Constant* pads = t.constant(i, 1);
            std::vector<int64_t> amounts = pads ? intsOf(*pads) : intsAttribute(t.node(i), "pads");
            if (std::any_of(amounts.begin(), amounts.end(), [](int64_t p) { return p != 0; }))
              return t.nodeError(i, "padding data is not supported yet (only zero pads)");
            t.alias(out(t, i), t.node(i).input(0));
            return Error::success();
          },
          [](Translator&, int) { return Error::success(); }};
}

// Softmax over any axis: dtc's runs over the last, so another axis is transposed there and back.
OpRule softmaxRule(const std::string& dtcOp) {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            const Value& x = *t.input(i, 0);
            int64_t axis = intAttribute(t.node(i), "axis", -1);
            if (!normalise(axis, rankOf(x))) return t.nodeError(i, "axis is out of range");
            t.define(out(t, i), kFloat, x.shape);
            return Error::success();
          },
          [dtcOp](Translator& t, int i) -> Error {
            const Value& x = *t.input(i, 0);
            int64_t axis = intAttribute(t.node(i), "axis", -1);
            normalise(axis, rankOf(x));
            if (axis == rankOf(x) - 1) {
              t.emit(i, dtcOp, {x.name}, {out(t, i)});
              return Error::success();
            }
            std::vector<int64_t> perm;
            for (int64_t d = 0; d < rankOf(x); ++d) perm.push_back(d);
            std::swap(perm[axis], perm.back());
            const std::string moved = t.fresh(out(t, i) + "::moved"),
                              soft = t.fresh(out(t, i) + "::softmax");
            t.emit(i, "Transpose", {x.name}, {moved}, {NodeAttr::ints("perm", perm)});
            t.emit(i, dtcOp, {moved}, {soft});
            t.emit(i, "Transpose", {soft}, {out(t, i)}, {NodeAttr::ints("perm", perm)});
            return Error::success();
          }};
}

}  // namespace dtc::onnx_import::rules
