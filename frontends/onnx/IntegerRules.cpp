// Integer arithmetic on the data, as exports compute position ids and masks from token ids
// (RoBERTa's cumsum(ids != pad) · (ids != pad) + pad): held in float32, where integers up to
// 2^24 are exact, by float ops that give the integer results exactly — a comparison is
// relu(1 − |a − b|), a running sum a product by a triangle of ones — and looked up in a table by
// one-hot rows, relu(1 − |id − j|), times the table. dtc's kernels compute on float32; these
// values never leave the step's own arithmetic (nothing here is differentiable but the table).
#include "onnx/RuleKit.h"

namespace dtc::onnx_import::rules {
namespace {

bool isIntegerType(int32_t type) {
  return type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32 ||
         type == onnx::TensorProto::BOOL || type == onnx::TensorProto::INT8 ||
         type == onnx::TensorProto::UINT8 || type == onnx::TensorProto::INT16;
}

// An integer the step computes, or reads from the data: what these rules take.
bool computedInteger(const Value* v) {
  return v && v->kind != ValueKind::kConst && (v->emulated || isIntegerType(v->type));
}

// Input `k` as a float32 value of the graph: an emulated integer as it is, integer data cast
// (dtc's Cast of int64 ids), a constant frozen.
std::string floatOperand(Translator& t, int i, int k) {
  const Value* v = t.input(i, k);
  if (const Constant* c = t.constant(i, k)) {
    const std::string name = t.frozenConstant(i, *c);
    t.define(name, kFloat, c->shape);
    return name;
  }
  if (v->emulated || v->type == kFloat) return v->name;
  const std::string cast = t.fresh(out(t, i) + "::as_float");
  t.emit(i, "Cast", {v->name}, {cast});
  t.define(cast, kFloat, v->shape);
  return cast;
}

std::string scalarConstant(Translator& t, int i, double value) {
  const std::string name = t.frozenConstant(i, Constant::ofReals(kFloat, {}, {value}));
  t.define(name, kFloat, {});
  return name;
}

// relu(1 − |x|): 1 where the integer x is 0, else 0.
std::string isZero(Translator& t, int i, const std::string& x, const std::string& as) {
  const std::string magnitude = t.fresh(out(t, i) + "::abs");
  const std::string flipped = t.fresh(out(t, i) + "::neg");
  const std::string shifted = t.fresh(out(t, i) + "::one_minus");
  t.emit(i, "Abs", {x}, {magnitude});
  t.emit(i, "Scale", {magnitude}, {flipped}, {NodeAttr::real("factor", -1.0)});
  t.emit(i, "Add", {flipped, scalarConstant(t, i, 1.0)}, {shifted});
  t.emit(i, "Relu", {shifted}, {as});
  return as;
}

// Defines output 0 as an emulated integer of `type` and `shape`.
void defineInteger(Translator& t, int i, int32_t type, const Shape& shape) {
  t.define(out(t, i), type, shape);
  t.markEmulated(out(t, i));
}

}  // namespace

bool integerOnData(Translator& t, int i) {
  for (int k = 0; k < t.node(i).input_size(); ++k)
    if (computedInteger(t.input(i, k))) return true;
  return false;
}

OpRule orOnIntegers(OpRule rule, bool emulatedOnly) {
  OpRule integers = integerRule();
  auto integral = [emulatedOnly](Translator& t, int i) {
    for (int k = 0; k < t.node(i).input_size(); ++k) {
      const Value* v = t.input(i, k);
      if (v && v->kind != ValueKind::kConst &&
          (v->emulated || (!emulatedOnly && v->type != kFloat)))
        return true;
    }
    return false;
  };
  return {[rule, integers, integral](Translator& t, int i) {
            return integral(t, i) ? integers.infer(t, i) : rule.infer(t, i);
          },
          [rule, integers, integral](Translator& t, int i) {
            return integral(t, i) ? integers.emit(t, i) : rule.emit(t, i);
          },
          rule.minInputs, rule.maxInputs};
}

// Equal, Not, Add, Sub, Mul, Cast and CumSum of integers the step computes.
OpRule integerRule() {
  return {
      [](Translator& t, int i) -> Error {
        const onnx::NodeProto& n = t.node(i);
        const std::string& op = n.op_type();
        Shape shape;
        for (int k = 0; k < n.input_size(); ++k) {
          const Value* v = t.input(i, k);
          if (!v || (op == "CumSum" && k == 1)) continue;
          std::optional<Shape> s = broadcastShapes(shape, v->shape);
          if (!s) return t.nodeError(i, "its inputs' shapes do not broadcast");
          shape = *s;
        }
        if (op == "Cast") {
          const int32_t to = static_cast<int32_t>(intAttribute(n, "to", 0));
          // To float: the integers as a float tensor (a mask); to an integer type, the same
          // values (a bool: x != 0).
          if (to == kFloat) {
            t.alias(out(t, i), n.input(0));
            t.defineAs(out(t, i), kFloat);
          } else if (to == onnx::TensorProto::BOOL) {
            defineInteger(t, i, to, shape);
          } else if (isIntegerType(to)) {
            t.alias(out(t, i), n.input(0));
            t.defineAs(out(t, i), to);
          } else {
            return t.unsupported(i, "a Cast of integer data to " + elementTypeName(to));
          }
          return Error::success();
        }
        if (op == "CumSum") {
          if (Error e = requireConstant(t, i, 1, "CumSum's axis")) return e;
          int64_t axis = t.constant(i, 1) ? t.constant(i, 1)->integer(0) : 0;
          if (!normalise(axis, static_cast<int64_t>(shape.size())))
            return t.nodeError(i, "axis is out of range");
          // Of float activations: the running sum, differentiable (its gradient the sum the
          // other way), computed as the integers' is.
          if (const Value* x = t.input(i, 0); x->type == kFloat && !x->emulated) {
            t.define(out(t, i), kFloat, shape);
            return Error::success();
          }
        }
        // Comparisons are exact for integers only: float activations are not compared.
        for (int k = 0; k < n.input_size(); ++k)
          if (const Value* v = t.input(i, k);
              v && v->kind != ValueKind::kConst && v->type == kFloat && !v->emulated)
            return t.unsupported(i, "a " + op + " of float values the step computes");
        defineInteger(t, i,
                      op == "Equal" || op == "Not" ? onnx::TensorProto::BOOL : t.input(i, 0)->type,
                      shape);
        return Error::success();
      },
      [](Translator& t, int i) -> Error {
        const onnx::NodeProto& n = t.node(i);
        const std::string& op = n.op_type();
        const Shape& shape = t.value(out(t, i))->shape;
        if (op == "Cast") {
          if (intAttribute(n, "to", 0) != onnx::TensorProto::BOOL) return Error::success();
          const std::string zero =
              isZero(t, i, floatOperand(t, i, 0), t.fresh(out(t, i) + "::zero"));
          const std::string flipped = t.fresh(out(t, i) + "::nonzero");
          t.emit(i, "Scale", {zero}, {flipped}, {NodeAttr::real("factor", -1.0)});
          t.emit(i, "Add", {flipped, scalarConstant(t, i, 1.0)}, {out(t, i)});
          return Error::success();
        }
        if (op == "Equal") {
          const std::string difference = t.fresh(out(t, i) + "::difference");
          t.emit(i, "Sub", {floatOperand(t, i, 0), floatOperand(t, i, 1)}, {difference});
          isZero(t, i, difference, out(t, i));
          return Error::success();
        }
        if (op == "Not") {
          const std::string flipped = t.fresh(out(t, i) + "::flipped");
          t.emit(i, "Scale", {floatOperand(t, i, 0)}, {flipped}, {NodeAttr::real("factor", -1.0)});
          t.emit(i, "Add", {flipped, scalarConstant(t, i, 1.0)}, {out(t, i)});
          return Error::success();
        }
        if (op == "Add" || op == "Sub" || op == "Mul") {
          t.emit(i, op, {floatOperand(t, i, 0), floatOperand(t, i, 1)}, {out(t, i)});
          return Error::success();
        }
        // CumSum: the running sum along the axis, a product by a triangle of ones moved to
        // the last dimension and back.
        int64_t axis = t.constant(i, 1)->integer(0);
        const int64_t rank = static_cast<int64_t>(shape.size());
        normalise(axis, rank);
        const bool exclusive = intAttribute(n, "exclusive", 0) != 0;
        const bool reverse = intAttribute(n, "reverse", 0) != 0;
        const int64_t length = shape[axis];
        std::vector<double> triangle(static_cast<size_t>(length * length), 0.0);
        for (int64_t j = 0; j < length; ++j)    // the summed position
          for (int64_t k = 0; k < length; ++k)  // the result's
            triangle[j * length + k] =
                reverse ? (exclusive ? j > k : j >= k) : (exclusive ? j < k : j <= k);
        std::vector<int64_t> perm;
        for (int64_t d = 0; d < rank; ++d)
          if (d != axis) perm.push_back(d);
        perm.push_back(axis);
        std::string x = floatOperand(t, i, 0);
        Shape moved;
        for (int64_t d : perm) moved.push_back(shape[d]);
        if (axis != rank - 1) {
          const std::string last = t.fresh(out(t, i) + "::axis_last");
          t.emit(i, "Transpose", {x}, {last}, {NodeAttr::ints("perm", perm)});
          x = last;
        }
        const int64_t rows = static_cast<int64_t>(elementsOf(shape)) / length;
        const std::string flat = t.fresh(out(t, i) + "::rows");
        const std::string sums = t.fresh(out(t, i) + "::sums");
        t.emit(i, "Reshape", {x}, {flat}, {NodeAttr::ints("shape", {rows, length})});
        const std::string ones =
            t.frozenConstant(i, Constant::ofReals(kFloat, {length, length}, std::move(triangle)));
        t.emit(i, "MatMul", {flat, ones}, {sums});
        if (axis == rank - 1) {
          t.emit(i, "Reshape", {sums}, {out(t, i)}, {NodeAttr::ints("shape", shape)});
          return Error::success();
        }
        const std::string back = t.fresh(out(t, i) + "::moved");
        t.emit(i, "Reshape", {sums}, {back}, {NodeAttr::ints("shape", moved)});
        std::vector<int64_t> inverse(static_cast<size_t>(rank));
        for (int64_t d = 0; d < rank; ++d) inverse[perm[d]] = d;
        t.emit(i, "Transpose", {back}, {out(t, i)}, {NodeAttr::ints("perm", inverse)});
        return Error::success();
      },
      1, 2};
}

// Gather(table, ids) of ids the step computes as integers: one-hot rows times the table.
Error gatherByComputedIds(Translator& t, int i, const std::string& table) {
  const Value& ids = *t.input(i, 1);
  const Value& tableValue = *t.input(i, 0);
  const int64_t rows = tableValue.shape[0];
  const int64_t width = static_cast<int64_t>(elementsOf(tableValue.shape)) / rows;
  const int64_t count = static_cast<int64_t>(elementsOf(ids.shape));
  std::vector<double> positions(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) positions[r] = static_cast<double>(r);
  const std::string column = t.fresh(out(t, i) + "::ids");
  const std::string difference = t.fresh(out(t, i) + "::offsets");
  const std::string hot = t.fresh(out(t, i) + "::one_hot");
  const std::string flatTable = t.fresh(out(t, i) + "::table");
  const std::string picked = t.fresh(out(t, i) + "::rows");
  t.emit(i, "Reshape", {ids.name}, {column}, {NodeAttr::ints("shape", {count, 1})});
  const std::string range =
      t.frozenConstant(i, Constant::ofReals(kFloat, {1, rows}, std::move(positions)));
  t.emit(i, "Sub", {column, range}, {difference});
  isZero(t, i, difference, hot);
  // nn.Embedding's padding row: never picked, so never trained (its values are zeros).
  std::string picks = hot;
  if (const int64_t padding = t.paddingIdx(t.node(i).input(0)); padding >= 0 && padding < rows) {
    std::vector<double> keep(static_cast<size_t>(rows), 1.0);
    keep[padding] = 0.0;
    picks = t.fresh(out(t, i) + "::unpadded");
    t.emit(i, "Mul", {hot, t.frozenConstant(i, Constant::ofReals(kFloat, {1, rows}, keep))},
           {picks});
  }
  t.emit(i, "Reshape", {table}, {flatTable}, {NodeAttr::ints("shape", {rows, width})});
  t.emit(i, "MatMul", {picks, flatTable}, {picked});
  t.emit(i, "Reshape", {picked}, {out(t, i)}, {NodeAttr::ints("shape", t.value(out(t, i))->shape)});
  return Error::success();
}

}  // namespace dtc::onnx_import::rules
