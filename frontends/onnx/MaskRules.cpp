// The ONNX op rules for broadcasts and masks on computed values: Expand, Where with a condition
// known when compiling, Trilu (see RuleKit.h). A mask is a constant the value is multiplied by,
// so its gradient is the same mask; a selected constant branch (masked_fill's −inf) is added as
// a constant, exact. A computed branch that holds ±inf or NaN where it is not selected would
// make the product NaN where PyTorch picks the other branch; exports keep such fills constant.
#include "onnx/RuleKit.h"

namespace dtc::onnx_import::rules {
namespace {

// `node` evaluated at compile time on `inputs` (stand-ins for its computed ones).
Expected<Constant> evaluateWith(Translator& t, int i, const std::vector<const Constant*>& inputs) {
  std::string problem;
  std::optional<std::vector<Constant>> r = evaluate(t.node(i), inputs, problem);
  if (!r) return t.nodeError(i, problem.empty() ? "cannot evaluate its mask" : problem);
  return std::move((*r)[0]);
}

bool allEqual(const Constant& c, double v) {
  for (uint64_t k = 0; k < c.size(); ++k)
    if (c.real(k) != v) return false;
  return true;
}

// A constant operand, its shape known to the rules that follow.
std::string constantTerm(Translator& t, int i, const Constant& c) {
  const std::string name = t.frozenConstant(i, c);
  t.define(name, kFloat, c.shape);
  return name;
}

// `x` broadcast to the node's output shape under the output's name. (Always a node: patterns
// found before emitting have taken the output's name, so it cannot become another's now.)
void finish(Translator& t, int i, const std::string& x) {
  const Shape& shape = t.value(out(t, i))->shape;
  if (shape.empty())  // a scalar: no shape attribute to give
    t.emit(i, "Scale", {x}, {out(t, i)}, {NodeAttr::real("factor", 1.0)});
  else
    t.emit(i, t.value(x) && t.value(x)->shape == shape ? "Reshape" : "Expand", {x}, {out(t, i)},
           {NodeAttr::ints("shape", shape)});
}

}  // namespace

// Expand(x, shape): x broadcast with a shape known when compiling.
OpRule expandRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            if (Error e = requireConstant(t, i, 1, "the shape")) return e;
            std::optional<Shape> shape =
                broadcastShapes(t.input(i, 0)->shape, intsOf(*t.constant(i, 1)));
            if (!shape)
              return t.nodeError(i, shapeText(t.input(i, 0)->shape) + " does not broadcast with " +
                                        shapeText(intsOf(*t.constant(i, 1))));
            std::string problem;
            if (tooLarge(*shape, problem)) return t.nodeError(i, problem);
            t.define(out(t, i), kFloat, *shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            finish(t, i, operand(t, i, 0));
            return Error::success();
          }};
}

// Where(condition, x, y) = x·keep + y·(1 − keep) + the selected constants.
OpRule whereRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {1, 2})) return e;
            return defineBroadcast(t, i, 0, kFloat);
          },
          [](Translator& t, int i) -> Error {
            const Constant* condition = t.constant(i, 0);
            if (!condition) return t.unsupported(i, "a condition that depends on the data");
            const Constant zero = Constant::ofReals(kFloat, {}, {0.0});
            const Constant one = Constant::ofReals(kFloat, {}, {1.0});
            const Constant* branch[2] = {t.constant(i, 1), t.constant(i, 2)};
            std::vector<std::string> terms;
            if (branch[0] || branch[1]) {
              Expected<Constant> fill = evaluateWith(
                  t, i, {condition, branch[0] ? branch[0] : &zero, branch[1] ? branch[1] : &zero});
              if (!fill) return fill.takeError();
              if (!allEqual(*fill, 0.0)) terms.push_back(constantTerm(t, i, *fill));
            }
            for (int k = 0; k < 2; ++k) {
              if (branch[k]) continue;
              Expected<Constant> keep =
                  evaluateWith(t, i, {condition, k == 0 ? &one : &zero, k == 0 ? &zero : &one});
              if (!keep) return keep.takeError();
              if (allEqual(*keep, 0.0)) continue;
              std::string term = operand(t, i, k + 1);
              if (!allEqual(*keep, 1.0)) {
                const std::string masked = t.fresh(out(t, i) + (k == 0 ? "::then" : "::else"));
                t.emit(i, "Mul", {term, t.frozenConstant(i, *keep)}, {masked});
                t.define(masked, kFloat, *broadcastShapes(t.value(term)->shape, keep->shape));
                term = masked;
              }
              terms.push_back(term);
            }
            if (terms.empty()) terms.push_back(constantTerm(t, i, zero));
            std::string sum = terms[0];
            for (size_t k = 1; k < terms.size(); ++k) {
              const std::string next = t.fresh(out(t, i) + "::sum");
              t.emit(i, "Add", {sum, terms[k]}, {next});
              t.define(next, kFloat,
                       *broadcastShapes(t.value(sum)->shape, t.value(terms[k])->shape));
              sum = next;
            }
            finish(t, i, sum);
            return Error::success();
          }};
}

// Trilu(x, k): x times the triangle of ones its attributes keep, over the last two dimensions.
OpRule triluRule() {
  return {[](Translator& t, int i) -> Error {
            if (Error e = requireFloat(t, i, {0})) return e;
            if (Error e = requireConstant(t, i, 1, "the diagonal offset k")) return e;
            if (rankOf(*t.input(i, 0)) < 2)
              return t.nodeError(
                  i, "needs at least 2 dimensions, got " + shapeText(t.input(i, 0)->shape));
            t.define(out(t, i), kFloat, t.input(i, 0)->shape);
            return Error::success();
          },
          [](Translator& t, int i) -> Error {
            const Shape& x = t.input(i, 0)->shape;
            const Shape square = {x[x.size() - 2], x.back()};
            const Constant ones =
                Constant::ofReals(kFloat, square, std::vector<double>(elementsOf(square), 1.0));
            Expected<Constant> mask = evaluateWith(t, i, {&ones, t.constant(i, 1)});
            if (!mask) return mask.takeError();
            t.emit(i, "Mul", {operand(t, i, 0), t.frozenConstant(i, *mask)}, {out(t, i)});
            return Error::success();
          }};
}

}  // namespace dtc::onnx_import::rules
