// The ONNX op rules for embeddings, normalisation, losses and convolutional networks (see
// RuleKit.h).
#include <algorithm>
#include <map>
#include <set>

#include "onnx/RuleKit.h"

namespace dtc::onnx_import::rules {

// ---- embeddings, normalisation, losses ----------------------------------------------------------

// Gather along `axis` of a float tensor: by ids the data holds, an Embedding over the tensor with
// the axis moved first and the rest flattened; by indices known when compiling, the slices they
// pick (runs of consecutive indices one slice each), concatenated. A position table read in full,
// or its first k rows as the first of equal pieces, keeps its parameter whole or in pieces.
static bool leadingPositions(Translator& t, int i) {
  const Value& table = *t.input(i, 0);
  const Constant* c = t.constant(i, 1);
  if (!c || intAttribute(t.node(i), "axis", 0) != 0 || table.kind != ValueKind::kParam ||
      rankOf(table) != 2 || rankOf(*t.input(i, 1)) != 1 || c->size() == 0 ||
      table.shape[0] % static_cast<int64_t>(c->size()) != 0)
    return false;
  for (uint64_t r = 0; r < c->size(); ++r)
    if (c->integer(r) != static_cast<int64_t>(r)) return false;
  return true;
}

static Error gatherConstantIndices(Translator& t, int i, const std::string& x, int64_t axis,
                                   const Constant& c) {
  const int64_t n = t.input(i, 0)->shape[axis];
  std::vector<std::pair<int64_t, int64_t>> runs;  // [start, end) of consecutive indices
  for (uint64_t k = 0; k < c.size(); ++k) {
    const int64_t v = c.integer(k) < 0 ? c.integer(k) + n : c.integer(k);
    if (!runs.empty() && runs.back().second == v)
      ++runs.back().second;
    else
      runs.push_back({v, v + 1});
  }
  std::vector<std::string> pieces;
  for (auto [start, end] : runs) {
    if (start == 0 && end == n) {
      pieces.push_back(x);
      continue;
    }
    std::vector<int64_t> sizes;
    std::vector<std::string> outputs;
    const std::string picked = t.fresh(out(t, i) + "::picked");
    if (start > 0) {
      sizes.push_back(start);
      outputs.push_back(t.fresh(out(t, i) + "::before"));
    }
    sizes.push_back(end - start);
    outputs.push_back(picked);
    if (end < n) {
      sizes.push_back(n - end);
      outputs.push_back(t.fresh(out(t, i) + "::after"));
    }
    t.emit(i, "Split", {x}, outputs,
           {NodeAttr::integer("axis", axis), NodeAttr::ints("sizes", sizes)});
    pieces.push_back(picked);
  }
  std::string joined = pieces.front();
  if (pieces.size() > 1) {
    joined = t.fresh(out(t, i) + "::joined");
    t.emit(i, "Concat", pieces, {joined}, {NodeAttr::integer("axis", axis)});
  }
  t.emit(i, "Reshape", {joined}, {out(t, i)}, {NodeAttr::ints("shape", t.value(out(t, i))->shape)});
  return Error::success();
}

static Error gatherByIds(Translator& t, int i, const std::string& x, int64_t axis) {
  const Shape &in = t.input(i, 0)->shape, &ids = t.input(i, 1)->shape;
  const int64_t rank = static_cast<int64_t>(in.size()), q = static_cast<int64_t>(ids.size());
  std::vector<int64_t> toFront = {axis};
  Shape rest;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) {
      toFront.push_back(d);
      rest.push_back(in[d]);
    }
  if (rank == 2 && axis == 0) {  // an embedding
    std::vector<NodeAttr> attributes;
    if (const int64_t padding = t.paddingIdx(x); padding >= 0)
      attributes.push_back(NodeAttr::integer("padding_idx", padding));
    t.emit(i, "Embedding", {operand(t, i, 1), x}, {out(t, i)}, attributes);
    return Error::success();
  }
  std::string front = x;
  if (axis != 0) {
    front = t.fresh(out(t, i) + "::axis_first");
    t.emit(i, "Transpose", {x}, {front}, {NodeAttr::ints("perm", toFront)});
  }
  const int64_t width = static_cast<int64_t>(elementsOf(rest));
  const std::string table = t.fresh(out(t, i) + "::table"), rows = t.fresh(out(t, i) + "::rows");
  t.emit(i, "Reshape", {front}, {table}, {NodeAttr::ints("shape", {in[axis], width})});
  t.emit(i, "Embedding", {operand(t, i, 1), table}, {rows});
  Shape gathered = ids;
  gathered.insert(gathered.end(), rest.begin(), rest.end());
  if (axis == 0) {
    t.emit(i, "Reshape", {rows}, {out(t, i)}, {NodeAttr::ints("shape", gathered)});
    return Error::success();
  }
  // [ids..., before..., after...] -> [before..., ids..., after...]
  const std::string unflat = t.fresh(out(t, i) + "::gathered");
  t.emit(i, "Reshape", {rows}, {unflat}, {NodeAttr::ints("shape", gathered)});
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < axis; ++d) perm.push_back(q + d);
  for (int64_t d = 0; d < q; ++d) perm.push_back(d);
  for (int64_t d = q + axis; d < q + rank - 1; ++d) perm.push_back(d);
  t.emit(i, "Transpose", {unflat}, {out(t, i)}, {NodeAttr::ints("perm", perm)});
  return Error::success();
}

OpRule gatherRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            const Value &table = *t.input(i, 0), &ids = *t.input(i, 1);
            int64_t axis = intAttribute(t.node(i), "axis", 0);
            if (rankOf(table) < 1 || !normalise(axis, rankOf(table)))
              return t.nodeError(i, "axis is out of range for " + shapeText(table.shape));
            if (ids.type != kInt64) return t.nodeError(i, "indices must be int64");
            if (elementsOf(ids.shape) == 0) return t.nodeError(i, "there are no indices");
            if (const Constant* c = t.constant(i, 1))
              for (uint64_t k = 0; k < c->size(); ++k)
                if (int64_t v = c->integer(k); v < -table.shape[axis] || v >= table.shape[axis])
                  return t.nodeError(i, "index " + std::to_string(v) + " is outside " +
                                            std::to_string(table.shape[axis]) + " entries");
            Shape shape(table.shape.begin(), table.shape.begin() + axis);
            shape.insert(shape.end(), ids.shape.begin(), ids.shape.end());
            shape.insert(shape.end(), table.shape.begin() + axis + 1, table.shape.end());
            t.define(out(t, i), kFloat, shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const Value& table = *t.input(i, 0);
            const std::string tableName =
                t.constant(i, 0) ? t.frozenConstant(i, *t.constant(i, 0)) : table.name;
            int64_t axis = intAttribute(t.node(i), "axis", 0);
            normalise(axis, rankOf(table));
            const Shape& shape = t.value(out(t, i))->shape;
            const Constant* c = t.constant(i, 1);
            if (c && leadingPositions(t, i)) {
              const int64_t parts = table.shape[0] / static_cast<int64_t>(c->size());
              if (parts == 1) {
                t.emit(i, "Reshape", {tableName}, {out(t, i)}, {NodeAttr::ints("shape", shape)});
                return Error::success();
              }
              std::vector<std::string> pieces = {out(t, i)};
              for (int64_t p = 1; p < parts; ++p) pieces.push_back(t.fresh(out(t, i) + "::rest"));
              t.emit(i, "Split", {tableName}, pieces, {NodeAttr::integer("axis", 0)});
              return Error::success();
            }
            if (c) return gatherConstantIndices(t, i, tableName, axis, *c);
            if (t.input(i, 1)->emulated && axis == 0) return gatherByComputedIds(t, i, tableName);
            if (t.input(i, 1)->emulated)
              return t.nodeError(i, "a Gather by computed indices along other than axis 0");
            return gatherByIds(t, i, tableName, axis);
          }};
}

// LayerNormalization's optional outputs, Mean and InvStdDev = 1/√(variance + ε) over the
// normalised dimensions (kept as 1s), where the graph reads them.
static Error layerNormStatistics(Translator& t, int i, int64_t axis, int64_t width,
                                 double epsilon) {
  const onnx::NodeProto& n = t.node(i);
  auto wanted = [&](int k) {
    return k < n.output_size() && !n.output(k).empty() &&
           (!t.users(n.output(k)).empty() || t.isGraphOutput(n.output(k)));
  };
  if (!wanted(1) && !wanted(2)) return Error::success();
  const Value& x = *t.input(i, 0);
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rankOf(x); ++d) axes.push_back(d);
  auto mean = [&](const std::string& of, const std::string& into) {
    const std::string sum = t.fresh(into + "::sum");
    t.emit(i, "ReduceSum", {of}, {sum},
           {NodeAttr::ints("axes", axes), NodeAttr::integer("keepdims", 1)});
    t.emit(i, "Scale", {sum}, {into}, {NodeAttr::real("factor", 1.0 / static_cast<double>(width))});
  };
  const std::string m = wanted(1) ? n.output(1) : t.fresh(out(t, i) + "::mean");
  mean(x.name, m);
  if (!wanted(2)) return Error::success();
  const std::string centred = t.fresh(out(t, i) + "::centred"),
                    squares = t.fresh(out(t, i) + "::squares");
  const std::string variance = t.fresh(out(t, i) + "::variance"),
                    shifted = t.fresh(out(t, i) + "::shifted");
  const std::string deviation = t.fresh(out(t, i) + "::deviation");
  t.emit(i, "Sub", {x.name, m}, {centred});
  t.emit(i, "Mul", {centred, centred}, {squares});
  mean(squares, variance);
  t.emit(i, "Add", {variance, t.frozenConstant(i, Constant::ofReals(kFloat, {1}, {epsilon}))},
         {shifted});
  t.emit(i, "Sqrt", {shifted}, {deviation});
  t.emit(i, "Reciprocal", {deviation}, {n.output(2)});
  return Error::success();
}

// LayerNormalization over the dimensions from `axis` on: dtc's LayerNorm runs over the last,
// so several are flattened into one around it (the scale and bias with them). No bias is a
// bias of zeros.
OpRule layerNormRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0, 1, 2})) return e;
            const Value& x = *t.input(i, 0);
            int64_t axis = intAttribute(t.node(i), "axis", -1);
            if (!normalise(axis, rankOf(x))) return t.nodeError(i, "axis is out of range");
            const Shape normalised(x.shape.begin() + axis, x.shape.end());
            for (int k : {1, 2}) {
              const Value* v = t.input(i, k);
              if (!v && k == 2) continue;
              if (!v || v->kind != ValueKind::kParam)
                return t.nodeError(i, "scale and bias must be parameters");
              if (v->shape != normalised)
                return t.nodeError(i, "scale and bias must be " + shapeText(normalised));
            }
            t.define(out(t, i), kFloat, x.shape);
            // Mean and InvStdDev: [..., 1, ..., 1] over the normalised dimensions.
            Shape stats(x.shape.begin(), x.shape.begin() + axis);
            stats.resize(x.shape.size(), 1);
            for (int k = 1; k < std::min(3, t.node(i).output_size()); ++k)
              if (!t.node(i).output(k).empty()) t.define(out(t, i, k), kFloat, stats);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const Value& x = *t.input(i, 0);
            int64_t axis = intAttribute(t.node(i), "axis", -1);
            normalise(axis, rankOf(x));
            const int64_t width =
                static_cast<int64_t>(elementsOf(Shape(x.shape.begin() + axis, x.shape.end())));
            std::string scale = operand(t, i, 1);
            std::string bias =
                t.input(i, 2)
                    ? operand(t, i, 2)
                    : t.frozenConstant(
                          i, Constant::ofReals(kFloat, {width}, std::vector<double>(width, 0.0)));
            const double epsilon = floatAttribute(t.node(i), "epsilon", 1e-5);
            const NodeAttr eps = NodeAttr::real("eps", epsilon);
            // The statistics, where the graph reads them: computed apart, with their gradients.
            if (Error e = layerNormStatistics(t, i, axis, width, epsilon)) return e;
            if (axis == rankOf(x) - 1) {
              t.emit(i, "LayerNorm", {x.name, scale, bias}, {out(t, i)}, {eps});
              return Error::success();
            }
            Shape flat(x.shape.begin(), x.shape.begin() + axis);
            flat.push_back(width);
            auto reshaped = [&](const std::string& name, const Shape& shape, const char* what) {
              const std::string r = t.fresh(out(t, i) + what);
              t.emit(i, "Reshape", {name}, {r}, {NodeAttr::ints("shape", shape)});
              return r;
            };
            const std::string normed = t.fresh(out(t, i) + "::normalised");
            t.emit(i, "LayerNorm",
                   {reshaped(x.name, flat, "::rows"), reshaped(scale, {width}, "::scale"),
                    reshaped(bias, {width}, "::bias")},
                   {normed}, {eps});
            t.emit(i, "Reshape", {normed}, {out(t, i)}, {NodeAttr::ints("shape", x.shape)});
            return Error::success();
          }};
}

// Softmax cross-entropy over classes on dimension 1 (scores [N, C, d...], labels [N, d...]): the
// classes moved last for dtc's ops, which read [..., C]. A weighted mean divides by the weights
// of the step's positions (ignored ones 0), a mean over ignored labels by the positions that
// count: the label fraction of either, over the all-position mean.
void emitCrossEntropy(Translator& t, int i, const LossInputs& in, const std::string& output,
                      const std::string& dtcOp) {
  std::vector<NodeAttr> attrs;
  if (in.ignore) attrs.push_back(NodeAttr::integer("ignore_index", *in.ignore));
  std::vector<std::string> operands = {in.logits, in.labels};
  if (!in.weights.empty()) operands.push_back(in.weights);
  if (in.reduction == Reduction::kNone) {
    attrs.push_back(NodeAttr::text("reduction", "none"));
    t.emit(i, dtcOp, operands, {output}, attrs);
    return;
  }
  const bool sum = in.reduction == Reduction::kSum;
  const bool divides = !sum && (in.ignore || !in.weights.empty());
  const std::string mean = sum || divides ? t.fresh(output + "::mean") : output;
  t.emit(i, dtcOp, operands, {mean}, attrs);
  if (sum)
    t.emit(i, "Scale", {mean}, {output},
           {NodeAttr::real("factor", static_cast<double>(in.positions))});
  if (divides) {
    const std::string kept = t.fresh(output + "::kept");
    operands.erase(operands.begin());
    t.emit(i, "LabelFraction", operands, {kept}, attrs);
    t.emit(i, "Div", {mean, kept}, {output});
  }
}

// SoftmaxCrossEntropyLoss (`dtcOp` SoftmaxCrossEntropy), or NegativeLogLikelihoodLoss on its own
// (NLLLoss; after a LogSoftmax the patterns make it the fused cross-entropy). Class weights, one
// loss per position, or the log-probabilities as an output make a cross-entropy a LogSoftmax
// and NLL.
OpRule crossEntropyRule(const std::string& dtcOp) {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            if (Error e = requireFloat(t, i, {0, 2})) return e;
            const Value &scores = *t.input(i, 0), &labels = *t.input(i, 1);
            const std::string reduction = stringAttribute(n, "reduction", "mean");
            if (reduction != "mean" && reduction != "sum" && reduction != "none")
              return t.nodeError(i, "reduction '" + reduction + "' is not mean, sum or none");
            Shape positions = scores.shape;
            if (rankOf(scores) >= 2) positions.erase(positions.begin() + 1);
            if (rankOf(scores) < 2 || labels.type != kInt64 || labels.shape != positions)
              return t.nodeError(i, "needs scores [N, C, ...] and int64 labels [N, ...], got " +
                                        shapeText(scores.shape) + " and " +
                                        shapeText(labels.shape));
            if (const Value* w = t.input(i, 2); w && w->shape != Shape{scores.shape[1]})
              return t.nodeError(i, "class weights " + shapeText(w->shape) + " do not match " +
                                        std::to_string(scores.shape[1]) + " classes");
            t.define(out(t, i), kFloat, reduction == "none" ? positions : Shape{});
            if (n.output_size() > 1 && !n.output(1).empty())
              t.define(n.output(1), kFloat, scores.shape);  // SoftmaxCrossEntropyLoss's log_prob
            return Error::success();
          },
          [dtcOp](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            const Value& scores = *t.input(i, 0);
            const int64_t rank = rankOf(scores);
            std::string logits = scores.name;
            std::vector<int64_t> perm = {0};
            for (int64_t d = 2; d < rank; ++d) perm.push_back(d);
            perm.push_back(1);
            if (rank > 2) {
              logits = t.fresh(out(t, i) + "::classes_last");
              t.emit(i, "Transpose", {scores.name}, {logits}, {NodeAttr::ints("perm", perm)});
            }
            const std::string reduction = stringAttribute(n, "reduction", "mean");
            const onnx::AttributeProto* ignore = findAttribute(n, "ignore_index");
            // Class weights are constants (initializers no gradient reaches) or data.
            std::string weights;
            if (const Constant* w = t.constant(i, 2))
              weights = t.frozenConstant(i, *w);
            else if (t.input(i, 2))
              weights = operand(t, i, 2);
            LossInputs in{logits,
                          operand(t, i, 1),
                          weights,
                          reduction == "sum"    ? Reduction::kSum
                          : reduction == "none" ? Reduction::kNone
                                                : Reduction::kMean,
                          ignore ? std::optional<int64_t>(ignore->i()) : std::nullopt,
                          static_cast<int64_t>(elementsOf(t.input(i, 1)->shape))};
            const bool logProbs = n.output_size() > 1 && !n.output(1).empty();
            std::string op = dtcOp;
            if (op == "SoftmaxCrossEntropy" &&
                (logProbs || !in.weights.empty() || in.reduction == Reduction::kNone)) {
              const std::string lp =
                  logProbs && rank == 2 ? n.output(1) : t.fresh(out(t, i) + "::log_probs");
              t.emit(i, "LogSoftmax", {logits}, {lp});
              if (logProbs && rank > 2) {  // back to [N, C, d...]
                std::vector<int64_t> inverse(rank);
                for (int64_t d = 0; d < rank; ++d) inverse[perm[d]] = d;
                t.emit(i, "Transpose", {lp}, {n.output(1)}, {NodeAttr::ints("perm", inverse)});
              }
              in.logits = lp;
              op = "NLLLoss";
            }
            emitCrossEntropy(t, i, in, out(t, i), op);
            return Error::success();
          }};
}

// ---- convolutional networks ---------------------------------------------------------------------

static std::vector<int64_t> pairOf(const onnx::NodeProto& n, const std::string& name,
                                   int64_t fallback) {
  std::vector<int64_t> v = intsAttribute(n, name);
  return v.empty() ? std::vector<int64_t>{fallback, fallback} : v;
}

OpRule convRule() {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            if (Error e = requireFloat(t, i, {0, 1, 2})) return e;
            const Value &x = *t.input(i, 0), &w = *t.input(i, 1);
            if (rankOf(x) != 4 || rankOf(w) != 4)
              return t.nodeError(i, "only 2-D convolutions are supported");
            if (intAttribute(n, "group", 1) != 1)
              return t.nodeError(i, "grouped convolutions are not supported yet");
            if (stringAttribute(n, "auto_pad", "NOTSET") != "NOTSET")
              return t.nodeError(i, "auto_pad is not supported; export explicit pads");
            const std::vector<int64_t> dil = pairOf(n, "dilations", 1),
                                       strides = pairOf(n, "strides", 1);
            std::vector<int64_t> pads = intsAttribute(n, "pads");
            if (pads.empty()) pads.assign(4, 0);
            if (dil != std::vector<int64_t>{1, 1})
              return t.nodeError(i, "dilated convolutions are not supported yet");
            if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3])
              return t.nodeError(i, "only symmetric padding is supported");
            if (x.shape[1] != w.shape[1])
              return t.nodeError(i, "channels differ between input and weight");
            if (strides.size() != 2 || strides[0] < 1 || strides[1] < 1 || pads[0] < 0 ||
                pads[1] < 0 || pads[0] > w.shape[2] || pads[1] > w.shape[3])
              return t.nodeError(i, "strides must be positive and pads within the kernel");
            const int64_t oh = (x.shape[2] + 2 * pads[0] - w.shape[2]) / strides[0] + 1;
            const int64_t ow = (x.shape[3] + 2 * pads[1] - w.shape[3]) / strides[1] + 1;
            if (x.shape[2] + 2 * pads[0] < w.shape[2] || x.shape[3] + 2 * pads[1] < w.shape[3])
              return t.nodeError(i, "the kernel is larger than the padded input");
            t.define(out(t, i), kFloat, {x.shape[0], w.shape[0], oh, ow});
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            std::vector<int64_t> pads = intsAttribute(n, "pads");
            if (pads.empty()) pads.assign(4, 0);
            std::vector<std::string> in = {operand(t, i, 0), operand(t, i, 1)};
            if (t.input(i, 2)) in.push_back(operand(t, i, 2));
            t.emit(i, "Conv", in, {out(t, i)},
                   {NodeAttr::ints("stride", pairOf(n, "strides", 1)),
                    NodeAttr::ints("padding", {pads[0], pads[1]})});
            return Error::success();
          }};
}

// BatchNormalization trains on batch statistics and updates the running ones in place (the
// buffers), as nn.BatchNorm2d in training mode; ONNX's momentum weighs the old running value.
OpRule batchNormRule() {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            if (Error e = requireFloat(t, i, {0})) return e;
            for (int k = 1; k <= 4; ++k)
              if (!t.input(i, k) || t.input(i, k)->kind != ValueKind::kParam)
                return t.nodeError(i, "scale, bias and running statistics must be initializers");
            for (int k = 1; k < n.output_size(); ++k)
              if (!n.output(k).empty() && !t.users(n.output(k)).empty())
                return t.nodeError(
                    i, "its running statistics outputs are read; dtc updates them in place");
            t.define(out(t, i), kFloat, t.input(i, 0)->shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            t.emit(i, "BatchNormalization",
                   {operand(t, i, 0), operand(t, i, 1), operand(t, i, 2), operand(t, i, 3),
                    operand(t, i, 4)},
                   {out(t, i)},
                   {NodeAttr::real("eps", floatAttribute(n, "epsilon", 1e-5)),
                    NodeAttr::real("momentum", 1.0 - floatAttribute(n, "momentum", 0.9))});
            return Error::success();
          }};
}

OpRule maxPoolRule() {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            const Value& x = *t.input(i, 0);
            if (rankOf(x) != 4) return t.nodeError(i, "only 2-D pooling is supported");
            const std::vector<int64_t> k = intsAttribute(n, "kernel_shape"),
                                       s = pairOf(n, "strides", 1);
            std::vector<int64_t> pads = intsAttribute(n, "pads");
            if (k.size() != 2 || s.size() != 2 || k[0] < 1 || k[1] < 1 || s[0] < 1 || s[1] < 1 ||
                k[0] > x.shape[2] || k[1] > x.shape[3])
              return t.nodeError(i,
                                 "kernel_shape and strides must be two positive sizes, the "
                                 "kernel within the input");
            if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }) ||
                intAttribute(n, "ceil_mode", 0) != 0 ||
                pairOf(n, "dilations", 1) != std::vector<int64_t>{1, 1})
              return t.nodeError(i, "padding, ceil_mode and dilations are not supported yet");
            if (n.output_size() > 1 && !n.output(1).empty())
              return t.nodeError(i, "its indices output is not supported");
            t.define(out(t, i), kFloat,
                     {x.shape[0], x.shape[1], (x.shape[2] - k[0]) / s[0] + 1,
                      (x.shape[3] - k[1]) / s[1] + 1});
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            t.emit(i, "MaxPool", {operand(t, i, 0)}, {out(t, i)},
                   {NodeAttr::ints("kernel", intsAttribute(n, "kernel_shape")),
                    NodeAttr::ints("stride", pairOf(n, "strides", 1))});
            return Error::success();
          }};
}

// The mean over H·W: a sum over the spatial dimensions, scaled.
OpRule globalAveragePoolRule() {
  return {[](Translator& t, int i) -> Error {
            const Value& x = *t.input(i, 0);
            if (rankOf(x) != 4) return t.nodeError(i, "needs [N, C, H, W]");
            t.define(out(t, i), kFloat, {x.shape[0], x.shape[1], 1, 1});
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const Value& x = *t.input(i, 0);
            const std::string sum = t.fresh(out(t, i) + "::sum");
            t.emit(i, "ReduceSum", {x.name}, {sum},
                   {NodeAttr::ints("axes", {2, 3}), NodeAttr::integer("keepdims", 1)});
            t.emit(i, "Scale", {sum}, {out(t, i)},
                   {NodeAttr::real("factor", 1.0 / static_cast<double>(x.shape[2] * x.shape[3]))});
            return Error::success();
          }};
}

// AveragePool whose windows tile the input (strides equal to the kernel, no padding, each
// spatial size a multiple of the kernel: nn.AvgPool2d(k) and its 1-D and 3-D kin): each spatial
// dimension d viewed as [d/k, k], the k's summed away, scaled by 1/(product of the kernel).
static Expected<std::vector<int64_t>> tilingKernel(Translator& t, int i) {
  const onnx::NodeProto& n = t.node(i);
  const Value& x = *t.input(i, 0);
  const int64_t spatial = rankOf(x) - 2;
  const std::vector<int64_t> k = intsAttribute(n, "kernel_shape");
  std::vector<int64_t> s = intsAttribute(n, "strides"), pads = intsAttribute(n, "pads"),
                       dilations = intsAttribute(n, "dilations");
  if (spatial < 1 || static_cast<int64_t>(k.size()) != spatial)
    return t.nodeError(i, "needs [N, C, spatial...] and one kernel size per spatial dimension");
  if (s.empty()) s.assign(k.size(), 1);
  const std::string autoPad = stringAttribute(n, "auto_pad", "NOTSET");
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }) ||
      intAttribute(n, "ceil_mode", 0) != 0 || (autoPad != "NOTSET" && autoPad != "VALID") ||
      std::any_of(dilations.begin(), dilations.end(), [](int64_t d) { return d != 1; }))
    return t.nodeError(i, "padding, ceil_mode and dilations are not supported yet");
  for (int64_t d = 0; d < spatial; ++d)
    if (k[d] < 1 || s.size() != k.size() || s[d] != k[d] || x.shape[2 + d] % k[d] != 0)
      return t.nodeError(i,
                         "only windows that tile the input are supported yet (strides equal "
                         "to the kernel, each spatial size a multiple of it)");
  return k;
}

OpRule averagePoolRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            Expected<std::vector<int64_t>> k = tilingKernel(t, i);
            if (!k) return k.takeError();
            Shape shape = t.input(i, 0)->shape;
            for (size_t d = 0; d < k->size(); ++d) shape[2 + d] /= (*k)[d];
            t.define(out(t, i), kFloat, shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            Expected<std::vector<int64_t>> k = tilingKernel(t, i);
            if (!k) return k.takeError();
            const Shape& x = t.input(i, 0)->shape;
            std::vector<int64_t> windows = {x[0], x[1]}, axes;
            double size = 1;
            for (size_t d = 0; d < k->size(); ++d) {
              windows.push_back(x[2 + d] / (*k)[d]);
              windows.push_back((*k)[d]);
              axes.push_back(static_cast<int64_t>(3 + 2 * d));
              size *= static_cast<double>((*k)[d]);
            }
            const std::string view = t.fresh(out(t, i) + "::windows"),
                              sum = t.fresh(out(t, i) + "::sum");
            t.emit(i, "Reshape", {operand(t, i, 0)}, {view}, {NodeAttr::ints("shape", windows)});
            t.emit(i, "ReduceSum", {view}, {sum},
                   {NodeAttr::ints("axes", axes), NodeAttr::integer("keepdims", 0)});
            t.emit(i, "Scale", {sum}, {out(t, i)}, {NodeAttr::real("factor", 1.0 / size)});
            return Error::success();
          }};
}

// ReduceSum and ReduceMean over constant axes.
OpRule reduceRule(bool mean) {
  auto axesOf = [](Translator& t, int i, std::vector<int64_t>& axes) -> Error {
    if (Error e = requireConstant(t, i, 1, "the axes")) return e;
    const Value& x = *t.input(i, 0);
    axes = t.constant(i, 1) ? intsOf(*t.constant(i, 1)) : intsAttribute(t.node(i), "axes");
    // No axes: all of them, or none (noop_with_empty_axes: a copy).
    if (axes.empty() && intAttribute(t.node(i), "noop_with_empty_axes", 0) == 0)
      for (int64_t d = 0; d < rankOf(x); ++d) axes.push_back(d);
    for (int64_t& a : axes)
      if (!normalise(a, rankOf(x))) return t.nodeError(i, "axes are out of range");
    std::sort(axes.begin(), axes.end());
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
      return t.nodeError(i, "an axis is repeated");
    return Error::success();
  };
  return {[axesOf](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            std::vector<int64_t> axes;
            if (Error e = axesOf(t, i, axes)) return e;
            const Value& x = *t.input(i, 0);
            const bool keep = intAttribute(t.node(i), "keepdims", 1) != 0;
            Shape shape;
            for (int64_t d = 0; d < rankOf(x); ++d) {
              const bool reduced = std::binary_search(axes.begin(), axes.end(), d);
              if (!reduced || keep) shape.push_back(reduced ? 1 : x.shape[d]);
            }
            t.define(out(t, i), kFloat, shape);
            return Error::success();
          },
          [axesOf, mean](Translator& t, int i) -> Error {
            std::vector<int64_t> axes;
            if (Error e = axesOf(t, i, axes)) return e;
            const Value& x = *t.input(i, 0);
            const int64_t keep = intAttribute(t.node(i), "keepdims", 1) != 0;
            if (axes.empty()) {  // noop_with_empty_axes
              t.emit(i, "Reshape", {x.name}, {out(t, i)}, {NodeAttr::ints("shape", x.shape)});
              return Error::success();
            }
            const std::string sum = mean ? t.fresh(out(t, i) + "::sum") : out(t, i);
            t.emit(i, "ReduceSum", {x.name}, {sum},
                   {NodeAttr::ints("axes", axes), NodeAttr::integer("keepdims", keep)});
            if (mean) {
              int64_t count = 1;
              for (int64_t a : axes) count *= x.shape[a];
              t.emit(i, "Scale", {sum}, {out(t, i)},
                     {NodeAttr::real("factor", 1.0 / static_cast<double>(count))});
            }
            return Error::success();
          }};
}

// `rule` taking `min` to `max` inputs.

}  // namespace dtc::onnx_import::rules
