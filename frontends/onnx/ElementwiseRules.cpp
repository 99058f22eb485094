// The ONNX op rules for element-wise ops and contractions (see RuleKit.h).
#include <algorithm>
#include <map>
#include <set>

#include "onnx/RuleKit.h"

namespace dtc::onnx_import::rules {

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

// Whether node `i` is a Cast of int64 data to float32 (an attention mask): dtc's Cast.
static bool castsMaskToFloat(Translator& t, int i) {
  const onnx::NodeProto& n = t.node(i);
  return n.op_type() == "Cast" && intAttribute(n, "to", 0) == kFloat &&
         t.input(i, 0)->type == kInt64;
}

// Passes its input through (Identity; a Cast to the type it has: float32 to float32, or int64
// labels to int64, as a causal LM's loss writes it), or casts an int64 mask to float32.
OpRule passThrough() {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            if (castsMaskToFloat(t, i)) {
              t.define(out(t, i), kFloat, t.input(i, 0)->shape);
              return Error::success();
            }
            if (n.op_type() == "Cast") {
              const int64_t to = intAttribute(n, "to", 0);
              if (to != t.input(i, 0)->type || (to != kFloat && to != kInt64))
                return t.nodeError(i, "a Cast computed on data from " +
                                          elementTypeName(t.input(i, 0)->type) + " to " +
                                          elementTypeName(static_cast<int32_t>(to)));
            }
            t.alias(out(t, i), n.input(0));
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            if (castsMaskToFloat(t, i)) t.emit(i, "Cast", {operand(t, i, 0)}, {out(t, i)});
            return Error::success();
          }};
}

// Dropout's ratio when it drops in training (training_mode true, ratio > 0); 0 when it is the
// identity (evaluation, as the default export writes it, or ratio 0).
static llvm::Expected<double> dropoutRatio(Translator& t, int i) {
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
            // Batch dimensions broadcast (multi-query attention's one key head for all).
            Shape shape(a.shape.begin(), a.shape.end() - 2);
            if (rankOf(b) != 2) {
              std::optional<Shape> batch =
                  broadcastShapes(shape, Shape(b.shape.begin(), b.shape.end() - 2));
              if (!batch)
                return t.nodeError(i, "batch dimensions " + shapeText(a.shape) + " and " +
                                          shapeText(b.shape) + " do not broadcast");
              shape = *batch;
            }
            shape.push_back(a.shape[a.shape.size() - 2]);
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
            // Each operand broadcast to the product's batch dimensions (Expand's gradient sums
            // the copies back).
            const Shape& shape = t.value(out(t, i))->shape;
            auto full = [&](const Value& v, int64_t rows, int64_t columns) {
              Shape target(shape.begin(), shape.end() - 2);
              target.push_back(rows);
              target.push_back(columns);
              if (v.shape == target) return v.name;
              const std::string expanded = t.fresh(out(t, i) + "::broadcast");
              t.emit(i, "Expand", {v.name}, {expanded}, {NodeAttr::ints("shape", target)});
              return expanded;
            };
            const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
            t.emit(i, "MatMul", {full(a, m, k), full(b, k, n)}, {out(t, i)});
            return Error::success();
          }};
}

// Max or Min of a value and a constant that clamps nothing a float holds: the lowest float (or
// −∞) under Max, the highest (or +∞) under Min, as transformers clamps attention scores to
// finfo.min. (Other maxima and minima of computed values are not translated yet.)
OpRule clampRule() {
  return {[](Translator& t, int i) -> Error {
            const onnx::NodeProto& n = t.node(i);
            const bool max = n.op_type() == "Max";
            if (n.input_size() != 2)
              return t.unsupported(i, "a Max or Min of other than two inputs");
            for (int k = 0; k < 2; ++k) {
              const Constant* c = t.constant(i, k);
              const Value* x = t.input(i, 1 - k);
              if (!c || t.constant(i, 1 - k) || !x || x->type != kFloat) continue;
              bool none = true;
              for (uint64_t e = 0; e < c->size() && none; ++e)
                none = max ? c->real(e) <= -3.4028234663852886e38
                           : c->real(e) >= 3.4028234663852886e38;
              std::optional<Shape> shape = broadcastShapes(x->shape, c->shape);
              if (none && shape && *shape == x->shape) {
                t.alias(out(t, i), n.input(1 - k));
                return Error::success();
              }
            }
            return t.unsupported(i, std::string("a ") + n.op_type() +
                                        " of computed values (only a clamp to the float's " +
                                        (max ? "lowest" : "highest") + " value is translated)");
          },
          [](Translator&, int) { return Error::success(); }, 2, 2};
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

}  // namespace dtc::onnx_import::rules
