// How each ONNX op that computes on data or parameters becomes dtc model ops: its outputs' types
// and shapes (infer, during the walk) and the ops emitted for it (emit).
#include <algorithm>
#include <map>
#include <set>

#include "onnx/Translator.h"

namespace dtc::onnx_import {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt64 = onnx::TensorProto::INT64;
using Error = llvm::Error;

const std::string& out(Translator& t, int i, int k = 0) { return t.node(i).output(k); }

// The dtc name of input `k`, which must be computed, data or a parameter.
std::string operand(Translator& t, int i, int k) { return t.input(i, k)->name; }

int64_t rankOf(const Value& v) { return static_cast<int64_t>(v.shape.size()); }

bool normalise(int64_t& axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  return true;
}

std::vector<int64_t> intsOf(const Constant& c) {
  std::vector<int64_t> v;
  for (uint64_t k = 0; k < c.size(); ++k) v.push_back(c.integer(k));
  return v;
}

// Inputs `from`.. must be known at compile time (shapes, axes, sizes).
Error requireConstant(Translator& t, int i, int k, const std::string& what) {
  if (t.input(i, k) && !t.constant(i, k))
    return t.nodeError(i, what + " must be known when compiling (it depends on the data)");
  return Error::success();
}

// Float inputs only: dtc's ops compute on float32 (int64 only as labels and ids).
Error requireFloat(Translator& t, int i, std::initializer_list<int> inputs) {
  for (int k : inputs)
    if (const Value* v = t.input(i, k); v && v->type != kFloat)
      return t.nodeError(i, "input " + std::to_string(k) + " is " + elementTypeName(v->type) +
                                "; dtc computes this op on float32");
  return Error::success();
}

// ---- element-wise -------------------------------------------------------------------------------

OpRule unaryRule(const std::string& dtcOp) {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            t.define(out(t, i), kFloat, t.input(i, 0)->shape);
            return Error::success();
          },
          [dtcOp](Translator& t, int i) -> Error {
            t.emit(i, dtcOp, {operand(t, i, 0)}, {out(t, i)});
            return Error::success();
          }};
}

// Passes its input through (Identity; a float-to-float32 Cast).
OpRule passThrough() {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            if (n.op_type() == "Cast") {
              const int64_t to = intAttribute(n, "to", 0);
              if (to != kFloat || t.input(i, 0)->type != kFloat)
                return t.nodeError(i, "a Cast computed on data from " +
                                          elementTypeName(t.input(i, 0)->type) + " to " +
                                          elementTypeName(static_cast<int32_t>(to)));
            }
            t.alias(out(t, i), n.input(0));
            return Error::success();
          },
          [](Translator&, int) { return Error::success(); }};
}

// Dropout's ratio when it drops in training (training_mode true, ratio > 0); 0 when it is the
// identity (evaluation, as the default export writes it, or ratio 0).
llvm::Expected<double> dropoutRatio(Translator& t, int i) {
  const onnx::NodeProto& n = t.node(i);
  const Constant* ratio = t.constant(i, 1);
  const Constant* training = t.constant(i, 2);
  if ((t.input(i, 1) && !ratio) || (t.input(i, 2) && !training))
    return t.nodeError(i, "ratio and training_mode must be known when compiling");
  if ((ratio && ratio->size() != 1) || (training && training->size() != 1))
    return t.nodeError(i, "ratio and training_mode must be scalars");
  const double p = ratio ? ratio->real(0) : 0.5;
  if (!(p >= 0.0 && p < 1.0))
    return t.nodeError(i, "ratio must lie in [0, 1), got " + std::to_string(p));
  if (n.output_size() > 1 && !n.output(1).empty() && !t.users(n.output(1)).empty())
    return t.nodeError(i, "its mask output is read; dtc draws masks without storing them");
  return training && training->integer(0) != 0 ? p : 0.0;
}

// Dropout: torch's training-mode dropout (dtc's counter-based mask), or the identity.
OpRule dropoutRule() {
  return {[](Translator& t, int i) -> Error {
            llvm::Expected<double> p = dropoutRatio(t, i);
            if (!p) return p.takeError();
            if (*p == 0.0) {
              t.alias(out(t, i), t.node(i).input(0));
              return Error::success();
            }
            if (Error e = requireFloat(t, i, {0})) return e;
            t.define(out(t, i), kFloat, t.input(i, 0)->shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            llvm::Expected<double> p = dropoutRatio(t, i);
            if (!p) return p.takeError();
            if (*p != 0.0)
              t.emit(i, "Dropout", {operand(t, i, 0)}, {out(t, i)}, {NodeAttr::real("ratio", *p)});
            return Error::success();
          }};
}

// Add, Sub, Mul with NumPy broadcasting; a constant operand is a product by a scalar (Scale) or a
// non-trainable initializer.
OpRule binaryRule(const std::string& dtcOp) {
  return {
      [](Translator& t, int i) -> Error {
        if (Error e = requireFloat(t, i, {0, 1})) return e;
        std::optional<Shape> shape = broadcastShapes(t.input(i, 0)->shape, t.input(i, 1)->shape);
        if (!shape)
          return t.nodeError(i, "shapes " + shapeText(t.input(i, 0)->shape) + " and " +
                                    shapeText(t.input(i, 1)->shape) + " do not broadcast");
        t.define(out(t, i), kFloat, *shape);
        return Error::success();
      },
      [dtcOp](Translator& t, int i) -> Error {
        const Constant* c[2] = {t.constant(i, 0), t.constant(i, 1)};
        const Shape& shape = t.value(out(t, i))->shape;
        for (int k = 0; k < 2; ++k)
          if (c[k] && dtcOp == "Mul" && c[k]->size() == 1 && t.input(i, 1 - k)->shape == shape) {
            t.emit(i, "Scale", {operand(t, i, 1 - k)}, {out(t, i)},
                   {NodeAttr::real("factor", c[k]->real(0))});
            return Error::success();
          }
        std::string a = c[0] ? t.frozenConstant(i, *c[0]) : operand(t, i, 0);
        std::string b = c[1] ? t.frozenConstant(i, *c[1]) : operand(t, i, 1);
        t.emit(i, dtcOp, {a, b}, {out(t, i)});
        return Error::success();
      }};
}

// The broadcast of the inputs' shapes (inputs `from`..), for ops whose output has it.
Error defineBroadcast(Translator& t, int i, int from, int32_t type) {
  Shape shape;
  for (int k = from; k < t.node(i).input_size(); ++k) {
    const Value* v = t.input(i, k);
    if (!v) continue;
    std::optional<Shape> s = broadcastShapes(shape, v->shape);
    if (!s) return t.nodeError(i, "its inputs' shapes do not broadcast");
    shape = *s;
  }
  t.define(out(t, i), type, shape);
  return Error::success();
}

// −x: a product by −1.
OpRule negRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            t.define(out(t, i), kFloat, t.input(i, 0)->shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            t.emit(i, "Scale", {operand(t, i, 0)}, {out(t, i)}, {NodeAttr::real("factor", -1.0)});
            return Error::success();
          }};
}

// x / y with NumPy broadcasting; a constant scalar divisor is a product by its reciprocal.
OpRule divRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0, 1})) return e;
            return defineBroadcast(t, i, 0, kFloat);
          },
          [](Translator& t, int i) -> Error {
            const Constant* c = t.constant(i, 1);
            if (c && c->size() == 1 && !t.constant(i, 0) &&
                t.input(i, 0)->shape == t.value(out(t, i))->shape) {
              t.emit(i, "Scale", {operand(t, i, 0)}, {out(t, i)},
                     {NodeAttr::real("factor", 1.0 / c->real(0))});
              return Error::success();
            }
            const Constant* a = t.constant(i, 0);
            t.emit(i, "Div",
                   {a ? t.frozenConstant(i, *a) : operand(t, i, 0),
                    c ? t.frozenConstant(i, *c) : operand(t, i, 1)},
                   {out(t, i)});
            return Error::success();
          }};
}

// x ^ p for a constant scalar p.
OpRule powRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            return defineBroadcast(t, i, 0, kFloat);
          },
          [](Translator& t, int i) -> Error {
            const Constant* p = t.constant(i, 1);
            if (!p || p->size() != 1 || t.input(i, 0)->shape != t.value(out(t, i))->shape)
              return t.unsupported(i, "an exponent that is not one constant number");
            t.emit(i, "Pow", {operand(t, i, 0)}, {out(t, i)},
                   {NodeAttr::real("exponent", p->real(0))});
            return Error::success();
          }};
}

// Ops dtc runs only inside the patterns it fuses (Patterns.cpp): their shapes for the walk, and
// an unsupported node where no pattern took them.
OpRule patternOnly(int32_t outputType, bool scalarOutput, const std::string& why) {
  OpRule rule{[outputType, scalarOutput](Translator& t, int i) -> Error {
                if (scalarOutput) {
                  t.define(out(t, i), outputType, {});
                  return Error::success();
                }
                const int from = t.node(i).op_type() == "Where" ? 1 : 0;
                if (Error e = defineBroadcast(t, i, from, outputType)) return e;
                if (from == 1 && t.input(i, 0)) {  // the condition broadcasts too
                  std::optional<Shape> s =
                      broadcastShapes(t.input(i, 0)->shape, t.value(out(t, i))->shape);
                  if (!s) return t.nodeError(i, "its condition does not broadcast");
                  t.define(out(t, i), outputType, *s);
                }
                return Error::success();
              },
              [why](Translator& t, int i) -> Error { return t.unsupported(i, why); }};
  rule.insidePatternsOnly = true;
  return rule;
}

// ---- contractions -------------------------------------------------------------------------------

// NumPy matmul of [..., M, K] and [..., K, N]: equal batch dimensions, or a 2-D right side (the
// left side's leading dimensions then fold into its rows).
OpRule matmulRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0, 1})) return e;
            const Value &a = *t.input(i, 0), &b = *t.input(i, 1);
            if (rankOf(a) < 2 || rankOf(b) < 2)
              return t.nodeError(i, "vector operands of MatMul are not supported yet");
            if (a.shape.back() != b.shape[b.shape.size() - 2])
              return t.nodeError(
                  i, "inner dimensions differ: " + shapeText(a.shape) + " · " + shapeText(b.shape));
            if (rankOf(b) != 2 &&
                !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin(), b.shape.end() - 2))
              return t.nodeError(i, "batch dimensions " + shapeText(a.shape) + " and " +
                                        shapeText(b.shape) + " must be equal (or B 2-D)");
            Shape shape(a.shape.begin(), a.shape.end() - 1);
            shape.push_back(b.shape.back());
            t.define(out(t, i), kFloat, shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const Value &a = *t.input(i, 0), &b = *t.input(i, 1);
            if (t.constant(i, 0) || t.constant(i, 1))
              return t.nodeError(i, "a product with a constant matrix is not supported yet");
            if (rankOf(b) == 2 && rankOf(a) > 2) {
              const int64_t k = a.shape.back();
              const std::string rows = t.fresh(out(t, i) + "::rows");
              const std::string product = t.fresh(out(t, i) + "::product");
              t.emit(i, "Reshape", {a.name}, {rows},
                     {NodeAttr::ints("shape", {static_cast<int64_t>(elementsOf(a.shape)) / k, k})});
              t.emit(i, "MatMul", {rows, b.name}, {product});
              t.emit(i, "Reshape", {product}, {out(t, i)},
                     {NodeAttr::ints("shape", t.value(out(t, i))->shape)});
              return Error::success();
            }
            t.emit(i, "MatMul", {a.name, b.name}, {out(t, i)});
            return Error::success();
          }};
}

// Gemm: α·op(A)·op(B) + β·C. nn.Linear's export (B a parameter [out, in], transB = 1, α = β = 1)
// is dtc's Linear; the rest a MatMul with the factors as Scales and C added.
OpRule gemmRule() {
  return {
      [](Translator& t, int i) -> Error {
        if (Error e = requireFloat(t, i, {0, 1, 2})) return e;
        const onnx::NodeProto& n = t.node(i);
        const Value &a = *t.input(i, 0), &b = *t.input(i, 1);
        if (rankOf(a) != 2 || rankOf(b) != 2) return t.nodeError(i, "Gemm takes 2-D A and B");
        const bool ta = intAttribute(n, "transA", 0), tb = intAttribute(n, "transB", 0);
        const int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
        const int64_t kb = tb ? b.shape[1] : b.shape[0], nn = tb ? b.shape[0] : b.shape[1];
        if (k != kb) return t.nodeError(i, "inner dimensions differ");
        if (const Value* c = t.input(i, 2); c && !broadcastShapes(c->shape, {m, nn}))
          return t.nodeError(i, "C " + shapeText(c->shape) + " does not broadcast to the product");
        if (t.constant(i, 0) || t.constant(i, 1))
          return t.nodeError(i, "a product with a constant matrix is not supported yet");
        t.define(out(t, i), kFloat, {m, nn});
        return Error::success();
      },
      [](Translator& t, int i) -> Error {
        const onnx::NodeProto& n = t.node(i);
        const bool ta = intAttribute(n, "transA", 0), tb = intAttribute(n, "transB", 0);
        const double alpha = floatAttribute(n, "alpha", 1.0), beta = floatAttribute(n, "beta", 1.0);
        const Value* c = t.input(i, 2);
        const Shape& shape = t.value(out(t, i))->shape;
        const bool vectorBias = c && c->kind == ValueKind::kParam && c->shape == Shape{shape[1]};
        if (!ta && tb && alpha == 1.0 && (!c || (beta == 1.0 && vectorBias))) {
          std::vector<std::string> in = {operand(t, i, 0), operand(t, i, 1)};
          if (c) in.push_back(c->name);
          t.emit(i, "Linear", in, {out(t, i)});
          return Error::success();
        }
        const std::string product =
            c || alpha != 1.0 ? t.fresh(out(t, i) + "::product") : out(t, i);
        t.emit(i, "MatMul", {operand(t, i, 0), operand(t, i, 1)}, {product},
               {NodeAttr::integer("transpose_a", ta), NodeAttr::integer("transpose_b", tb)});
        std::string scaled = product;
        if (alpha != 1.0) {
          scaled = c ? t.fresh(out(t, i) + "::scaled") : out(t, i);
          t.emit(i, "Scale", {product}, {scaled}, {NodeAttr::real("factor", alpha)});
        }
        if (!c) return Error::success();
        std::string bias =
            c->kind == ValueKind::kConst ? t.frozenConstant(i, *c->constant) : c->name;
        if (beta != 1.0) {
          const std::string b2 = t.fresh(out(t, i) + "::bias");
          t.emit(i, "Scale", {bias}, {b2}, {NodeAttr::real("factor", beta)});
          bias = b2;
        }
        t.emit(i, "Add", {scaled, bias}, {out(t, i)});
        return Error::success();
      }};
}

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

// Split into equal pieces (dtc's Split): the sizes given by the `split` input or attribute must
// all be equal.
OpRule splitRule() {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            if (Error e = requireFloat(t, i, {0})) return e;
            if (Error e = requireConstant(t, i, 1, "the split sizes")) return e;
            const Value& x = *t.input(i, 0);
            int64_t axis = intAttribute(n, "axis", 0);
            if (!normalise(axis, rankOf(x))) return t.nodeError(i, "axis is out of range");
            const int64_t parts = n.output_size();
            for (const std::string& piece : n.output())
              if (piece.empty()) return t.nodeError(i, "an output of Split has no name");
            std::vector<int64_t> sizes =
                t.constant(i, 1) ? intsOf(*t.constant(i, 1)) : intsAttribute(n, "split");
            if (sizes.empty()) {
              if (x.shape[axis] % parts != 0)
                return t.nodeError(i, "dimension " + std::to_string(x.shape[axis]) +
                                          " does not split into " + std::to_string(parts));
              sizes.assign(parts, x.shape[axis] / parts);
            }
            if (parts == 0 || sizes.empty() || sizes[0] < 1)
              return t.nodeError(i, "pieces must have positive sizes");
            if (static_cast<int64_t>(sizes.size()) != parts ||
                std::any_of(sizes.begin(), sizes.end(), [&](int64_t s) { return s != sizes[0]; }) ||
                sizes[0] * parts != x.shape[axis])
              return t.nodeError(i, "pieces of unequal sizes are not supported yet");
            for (int k = 0; k < parts; ++k) {
              Shape shape = x.shape;
              shape[axis] = sizes[0];
              t.define(out(t, i, k), kFloat, shape);
            }
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            int64_t axis = intAttribute(t.node(i), "axis", 0);
            normalise(axis, rankOf(*t.input(i, 0)));
            std::vector<std::string> outs(t.node(i).output().begin(), t.node(i).output().end());
            t.emit(i, "Split", {operand(t, i, 0)}, outs, {NodeAttr::integer("axis", axis)});
            return Error::success();
          }};
}

// Softmax over any axis: dtc's runs over the last, so another axis is transposed there and back.
OpRule softmaxRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            const Value& x = *t.input(i, 0);
            int64_t axis = intAttribute(t.node(i), "axis", -1);
            if (!normalise(axis, rankOf(x))) return t.nodeError(i, "axis is out of range");
            t.define(out(t, i), kFloat, x.shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const Value& x = *t.input(i, 0);
            int64_t axis = intAttribute(t.node(i), "axis", -1);
            normalise(axis, rankOf(x));
            if (axis == rankOf(x) - 1) {
              t.emit(i, "Softmax", {x.name}, {out(t, i)});
              return Error::success();
            }
            std::vector<int64_t> perm;
            for (int64_t d = 0; d < rankOf(x); ++d) perm.push_back(d);
            std::swap(perm[axis], perm.back());
            const std::string moved = t.fresh(out(t, i) + "::moved"),
                              soft = t.fresh(out(t, i) + "::softmax");
            t.emit(i, "Transpose", {x.name}, {moved}, {NodeAttr::ints("perm", perm)});
            t.emit(i, "Softmax", {moved}, {soft});
            t.emit(i, "Transpose", {soft}, {out(t, i)}, {NodeAttr::ints("perm", perm)});
            return Error::success();
          }};
}

// ---- embeddings, normalisation, losses ----------------------------------------------------------

// Gather rows of a parameter: by token ids (an embedding), or by the constant positions 0..k−1
// (a position table read in full, or its first k rows as the first of equal pieces).
OpRule gatherRule() {
  return {[](Translator& t, int i) -> Error {
            const Value& table = *t.input(i, 0);
            const Value& ids = *t.input(i, 1);
            if (intAttribute(t.node(i), "axis", 0) != 0 || table.kind != ValueKind::kParam ||
                rankOf(table) != 2)
              return t.nodeError(i, "only rows of a 2-D parameter (an embedding) are gathered");
            if (ids.type != kInt64) return t.nodeError(i, "indices must be int64");
            if (const Constant* c = t.constant(i, 1)) {
              const uint64_t k = c->size();
              for (uint64_t r = 0; r < k; ++r)
                if (c->integer(r) != static_cast<int64_t>(r) || rankOf(ids) != 1)
                  return t.nodeError(i, "constant indices other than 0, 1, ... are not supported");
              if (k == 0 || table.shape[0] % static_cast<int64_t>(k) != 0)
                return t.nodeError(i, "the first " + std::to_string(k) + " rows of " +
                                          shapeText(table.shape) + " are not an equal piece of it");
            }
            Shape shape = ids.shape;
            shape.push_back(table.shape[1]);
            t.define(out(t, i), kFloat, shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const Value& table = *t.input(i, 0);
            const Constant* c = t.constant(i, 1);
            if (!c) {
              t.emit(i, "Embedding", {operand(t, i, 1), table.name}, {out(t, i)});
              return Error::success();
            }
            const int64_t parts = table.shape[0] / static_cast<int64_t>(c->size());
            if (parts == 1) {
              t.emit(i, "Reshape", {table.name}, {out(t, i)},
                     {NodeAttr::ints("shape", t.value(out(t, i))->shape)});
              return Error::success();
            }
            std::vector<std::string> pieces = {out(t, i)};
            for (int64_t p = 1; p < parts; ++p) pieces.push_back(t.fresh(out(t, i) + "::rest"));
            t.emit(i, "Split", {table.name}, pieces, {NodeAttr::integer("axis", 0)});
            return Error::success();
          }};
}

// LayerNormalization's optional outputs, Mean and InvStdDev = 1/√(variance + ε) over the
// normalised dimensions (kept as 1s), where the graph reads them.
Error layerNormStatistics(Translator& t, int i, int64_t axis, int64_t width, double epsilon) {
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

// Softmax cross-entropy over classes on dimension 1 (scores [N, C, d...], labels [N, d...]), mean
// or summed over every position: the classes moved last for dtc's op, which reads [..., C].
// An ignore_index that is a class would change which positions count: refused (one outside the
// classes is what PyTorch exports, -100; a label equal to it is an error when it runs).
Error checkIgnoreIndex(Translator& t, int i, int64_t classes) {
  if (const onnx::AttributeProto* a = findAttribute(t.node(i), "ignore_index");
      a && a->i() >= 0 && a->i() < classes)
    return t.nodeError(i, "ignore_index " + std::to_string(a->i()) + " is one of the " +
                              std::to_string(classes) +
                              " classes; positions with that label "
                              "would have to be left out, which dtc does not do yet");
  return Error::success();
}

OpRule crossEntropyRule() {
  return {
      [](Translator& t, int i) -> Error {
        const onnx::NodeProto& n = t.node(i);
        if (Error e = requireFloat(t, i, {0})) return e;
        const Value &scores = *t.input(i, 0), &labels = *t.input(i, 1);
        if (t.input(i, 2)) return t.nodeError(i, "class weights are not supported yet");
        const std::string reduction = stringAttribute(n, "reduction", "mean");
        if (reduction != "mean" && reduction != "sum")
          return t.nodeError(i, "reduction '" + reduction + "' is not supported yet");
        Shape positions = scores.shape;
        if (rankOf(scores) >= 2) positions.erase(positions.begin() + 1);
        if (rankOf(scores) < 2 || labels.type != kInt64 || labels.shape != positions)
          return t.nodeError(i, "needs scores [N, C, ...] and int64 labels [N, ...], got " +
                                    shapeText(scores.shape) + " and " + shapeText(labels.shape));
        if (Error e = checkIgnoreIndex(t, i, scores.shape[1])) return e;
        t.define(out(t, i), kFloat, {});
        return Error::success();
      },
      [](Translator& t, int i) -> Error {
        const Value& scores = *t.input(i, 0);
        std::string logits = scores.name;
        if (rankOf(scores) > 2) {
          std::vector<int64_t> perm = {0};
          for (int64_t d = 2; d < rankOf(scores); ++d) perm.push_back(d);
          perm.push_back(1);
          logits = t.fresh(out(t, i) + "::classes_last");
          t.emit(i, "Transpose", {scores.name}, {logits}, {NodeAttr::ints("perm", perm)});
        }
        const bool sum = stringAttribute(t.node(i), "reduction", "mean") == "sum";
        const std::string mean = sum ? t.fresh(out(t, i) + "::mean") : out(t, i);
        t.emit(i, "SoftmaxCrossEntropy", {logits, operand(t, i, 1)}, {mean});
        if (sum)
          t.emit(i, "Scale", {mean}, {out(t, i)},
                 {NodeAttr::real("factor", static_cast<double>(elementsOf(t.input(i, 1)->shape)))});
        return Error::success();
      }};
}

// ---- convolutional networks ---------------------------------------------------------------------

std::vector<int64_t> pairOf(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
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
OpRule takes(OpRule rule, int min, int max) {
  rule.minInputs = min;
  rule.maxInputs = max;
  return rule;
}

const std::map<std::string, OpRule>& rules() {
  static const std::map<std::string, OpRule> table = {
      {"Relu", unaryRule("Relu")},
      {"Tanh", unaryRule("Tanh")},
      {"Sigmoid", unaryRule("Sigmoid")},
      {"Exp", unaryRule("Exp")},
      {"Log", unaryRule("Log")},
      {"Sqrt", unaryRule("Sqrt")},
      {"Reciprocal", unaryRule("Reciprocal")},
      {"Erf", unaryRule("Erf")},
      {"Abs", unaryRule("Abs")},
      {"Neg", negRule()},
      {"Identity", passThrough()},
      {"Dropout", takes(dropoutRule(), 1, 3)},
      {"Cast", passThrough()},
      {"Add", takes(binaryRule("Add"), 2, 2)},
      {"Sub", takes(binaryRule("Sub"), 2, 2)},
      {"Mul", takes(binaryRule("Mul"), 2, 2)},
      {"Div", takes(divRule(), 2, 2)},
      {"Pow", takes(powRule(), 2, 2)},
      {"MatMul", takes(matmulRule(), 2, 2)},
      {"Gemm", takes(gemmRule(), 2, 3)},
      {"Reshape", takes(reshapeRule(), 2, 2)},
      {"Flatten", reshapeRule()},
      {"Unsqueeze", takes(reshapeRule(), 1, 2)},
      {"Squeeze", takes(reshapeRule(), 1, 2)},
      {"Transpose", transposeRule()},
      {"Split", takes(splitRule(), 1, 2)},
      {"Softmax", softmaxRule()},
      {"Gather", takes(gatherRule(), 2, 2)},
      {"LayerNormalization", takes(layerNormRule(), 2, 3)},
      {"SoftmaxCrossEntropyLoss", takes(crossEntropyRule(), 2, 3)},
      {"Conv", takes(convRule(), 2, 3)},
      {"BatchNormalization", takes(batchNormRule(), 5, 5)},
      {"MaxPool", maxPoolRule()},
      {"GlobalAveragePool", globalAveragePoolRule()},
      {"ReduceSum", takes(reduceRule(false), 1, 2)},
      {"ReduceMean", takes(reduceRule(true), 1, 2)},
      {"Where", takes(patternOnly(kFloat, false, "only as attention's causal mask"), 3, 3)},
      {"LogSoftmax", patternOnly(kFloat, false, "only before NegativeLogLikelihoodLoss")},
      {"NegativeLogLikelihoodLoss",
       takes(patternOnly(kFloat, true, "only after LogSoftmax"), 2, 3)},
  };
  return table;
}

}  // namespace

std::vector<std::string> translatedOps() {
  // Constant, Shape and Size are always known when compiling.
  std::vector<std::string> ops = {"Constant", "Shape", "Size"};
  for (const auto& [op, rule] : rules())
    if (!rule.insidePatternsOnly) ops.push_back(op);
  return ops;
}

const OpRule* findOpRule(const std::string& opType) {
  auto it = rules().find(opType);
  return it == rules().end() ? nullptr : &it->second;
}

bool differentiableInput(const std::string& op, int index) {
  static const std::set<std::string> none = {"Shape",
                                             "Size",
                                             "Equal",
                                             "Less",
                                             "Greater",
                                             "LessOrEqual",
                                             "GreaterOrEqual",
                                             "Not",
                                             "And",
                                             "Or",
                                             "Xor",
                                             "Range",
                                             "ConstantOfShape",
                                             "ArgMax",
                                             "ArgMin",
                                             "NonZero",
                                             "Sign",
                                             "Floor",
                                             "Ceil",
                                             "Round"};
  if (none.count(op)) return false;
  static const std::map<std::string, std::set<int>> notThese = {
      {"BatchNormalization", {3, 4}},
      {"Pow", {1}},
      {"Where", {0}},
      {"Dropout", {1, 2}},
      {"Clip", {1, 2}},
      {"Reshape", {1}},
      {"Expand", {1}},
      {"Slice", {1, 2, 3, 4}},
      {"Tile", {1}},
      {"Gather", {1}},
      {"Split", {1}},
      {"Unsqueeze", {1}},
      {"Squeeze", {1}},
      {"ReduceSum", {1}},
      {"ReduceMean", {1}},
      {"SoftmaxCrossEntropyLoss", {1, 2}},
      {"NegativeLogLikelihoodLoss", {1, 2}},
      {"Trilu", {1}},
      {"TopK", {1}},
      {"Pad", {1, 2, 3}}};
  auto it = notThese.find(op);
  return it == notThese.end() || !it->second.count(index);
}

}  // namespace dtc::onnx_import
