#include "flatbuffers/ModelImporter.h"

#include <functional>
#include <limits>
#include <optional>

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include "graph/IR/GraphOps.h"

using namespace mlir;

namespace dtc {
namespace {

// The most elements a tensor may have: byte counts of any tensor then fit in 64 bits with room
// to add them up (the runtime's plan verifier holds plans to the same bound).
constexpr int64_t kMaxElements = int64_t(1) << 40;

// Elements of `shape`, or nullopt when a dimension is not positive or they exceed kMaxElements.
std::optional<int64_t> elementCount(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0 || d > kMaxElements / n) return std::nullopt;
    n *= d;
  }
  return n;
}

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

RankedTensorType toTensorType(OpBuilder& b, model::DType dtype, ArrayRef<int64_t> shape) {
  Type element = dtype == model::DType::i64   ? Type(b.getI64Type())
                 : dtype == model::DType::i32 ? Type(b.getI32Type())
                                              : Type(b.getF32Type());
  return RankedTensorType::get(shape, element);
}

class ModelImporter {
 public:
  using Handler = LogicalResult (ModelImporter::*)(const model::Node&, Location);
  struct OpType {
    Handler import;
    SmallVector<StringRef, 2> attributes;
  };
  // Each op type's importer and the attributes it reads.
  static const llvm::StringMap<OpType>& handlers();

  ModelImporter(MLIRContext& ctx, const ModelFile& file, const ImportOptions& options)
      : ctx_(ctx), file_(file), options_(options), builder_(&ctx) {}

  OwningOpRef<ModuleOp> run();

 private:
  LogicalResult importLinear(const model::Node& node, Location loc);
  LogicalResult importMatMul(const model::Node& node, Location loc);
  template <typename OpTy>
  LogicalResult importBinary(const model::Node& node, Location loc);
  template <typename OpTy>
  LogicalResult importUnary(const model::Node& node, Location loc);
  LogicalResult importGelu(const model::Node& node, Location loc);
  LogicalResult importReduceSum(const model::Node& node, Location loc);
  LogicalResult importReshape(const model::Node& node, Location loc);
  LogicalResult importCrossEntropy(const model::Node& node, Location loc);
  LogicalResult importLabelFraction(const model::Node& node, Location loc);
  IntegerAttr ignoreIndex(const model::Node& node);
  LogicalResult importMse(const model::Node& node, Location loc);
  LogicalResult importEmbedding(const model::Node& node, Location loc);
  LogicalResult importLayerNorm(const model::Node& node, Location loc);
  LogicalResult importTranspose(const model::Node& node, Location loc);
  LogicalResult importSplit(const model::Node& node, Location loc);
  LogicalResult importConcat(const model::Node& node, Location loc);
  LogicalResult importCausalSoftmax(const model::Node& node, Location loc);
  LogicalResult importSoftmax(const model::Node& node, Location loc);
  LogicalResult importScale(const model::Node& node, Location loc);
  LogicalResult importPow(const model::Node& node, Location loc);
  LogicalResult importDropout(const model::Node& node, Location loc);
  LogicalResult importConv(const model::Node& node, Location loc);
  LogicalResult importBatchNorm(const model::Node& node, Location loc);
  LogicalResult importMaxPool(const model::Node& node, Location loc);
  LogicalResult importFlatten(const model::Node& node, Location loc);
  SmallVector<int64_t> pairAttr(const model::Node& node, StringRef name, int64_t fallback);
  Value reshape(Value x, ArrayRef<int64_t> shape, Location loc);

  // Every attribute of `node` is one its op type reads.
  LogicalResult checkAttributes(const model::Node& node, const OpType& type, Location loc);

  LogicalResult addArgument(const model::TensorInfo& info, Location loc, bool isData,
                            bool trainable);
  // Most ops take float32 operands; the few that also take int64 ids or labels check their
  // operands' element types themselves.
  enum class Operands { F32, AnyElementType };
  FailureOr<SmallVector<Value>> inputs(const model::Node& node, Location loc, size_t min,
                                       size_t max, Operands operands = Operands::F32);
  LogicalResult define(const model::Node& node, Location loc, ArrayRef<Value> values);
  const model::Attribute* attribute(const model::Node& node, StringRef name);
  int64_t intAttr(const model::Node& node, StringRef name, int64_t fallback);
  double floatAttr(const model::Node& node, StringRef name, double fallback);
  Location nodeLoc(const model::Node& node, size_t index);

  MLIRContext& ctx_;
  const ModelFile& file_;
  ImportOptions options_;
  OpBuilder builder_;
  func::FuncOp func_;
  llvm::StringMap<Value> values_;
  // Initializer and input names: they become values only once the function exists.
  llvm::StringSet<> argNames_;
  // Buffers the forward pass updates (BatchNorm running statistics): new value, buffer name.
  SmallVector<std::pair<Value, std::string>> bufferUpdates_;
  SmallVector<Type> argTypes_;
  SmallVector<NamedAttrList> argAttrs_;
};

const llvm::StringMap<ModelImporter::OpType>& ModelImporter::handlers() {
  // Each op type's importer and the attributes it reads: any other is the user's typo.
  static const llvm::StringMap<OpType> table = {
      {"Linear", {&ModelImporter::importLinear, {}}},
      {"MatMul", {&ModelImporter::importMatMul, {"transpose_a", "transpose_b"}}},
      {"Add", {&ModelImporter::importBinary<graph::AddOp>, {}}},
      {"Sub", {&ModelImporter::importBinary<graph::SubOp>, {}}},
      {"Mul", {&ModelImporter::importBinary<graph::MulOp>, {}}},
      {"Div", {&ModelImporter::importBinary<graph::DivOp>, {}}},
      {"Relu", {&ModelImporter::importUnary<graph::ReluOp>, {}}},
      {"Tanh", {&ModelImporter::importUnary<graph::TanhOp>, {}}},
      {"Sigmoid", {&ModelImporter::importUnary<graph::SigmoidOp>, {}}},
      {"Silu", {&ModelImporter::importUnary<graph::SiluOp>, {}}},
      {"Exp", {&ModelImporter::importUnary<graph::ExpOp>, {}}},
      {"Log", {&ModelImporter::importUnary<graph::LogOp>, {}}},
      {"Sqrt", {&ModelImporter::importUnary<graph::SqrtOp>, {}}},
      {"Reciprocal", {&ModelImporter::importUnary<graph::ReciprocalOp>, {}}},
      {"Erf", {&ModelImporter::importUnary<graph::ErfOp>, {}}},
      {"Abs", {&ModelImporter::importUnary<graph::AbsOp>, {}}},
      {"Pow", {&ModelImporter::importPow, {"exponent"}}},
      {"Dropout", {&ModelImporter::importDropout, {"ratio"}}},
      {"Gelu", {&ModelImporter::importGelu, {"approximate"}}},
      {"ReduceSum", {&ModelImporter::importReduceSum, {"axes", "keepdims"}}},
      {"Reshape", {&ModelImporter::importReshape, {"shape"}}},
      {"SoftmaxCrossEntropy", {&ModelImporter::importCrossEntropy, {"ignore_index"}}},
      {"NLLLoss", {&ModelImporter::importCrossEntropy, {"ignore_index"}}},
      {"LabelFraction", {&ModelImporter::importLabelFraction, {"ignore_index"}}},
      {"MSELoss", {&ModelImporter::importMse, {}}},
      {"Embedding", {&ModelImporter::importEmbedding, {}}},
      {"LayerNorm", {&ModelImporter::importLayerNorm, {"eps"}}},
      {"Transpose", {&ModelImporter::importTranspose, {"perm"}}},
      {"Split", {&ModelImporter::importSplit, {"axis", "sizes"}}},
      {"Concat", {&ModelImporter::importConcat, {"axis"}}},
      {"CausalSoftmax", {&ModelImporter::importCausalSoftmax, {"scale"}}},
      {"Softmax", {&ModelImporter::importSoftmax, {"scale"}}},
      {"LogSoftmax", {&ModelImporter::importSoftmax, {"scale"}}},
      {"Scale", {&ModelImporter::importScale, {"factor"}}},
      {"Conv", {&ModelImporter::importConv, {"stride", "padding"}}},
      {"BatchNormalization", {&ModelImporter::importBatchNorm, {"eps", "momentum"}}},
      {"MaxPool", {&ModelImporter::importMaxPool, {"kernel", "stride"}}},
      {"Flatten", {&ModelImporter::importFlatten, {}}},
  };
  return table;
}

LogicalResult ModelImporter::checkAttributes(const model::Node& node, const OpType& type,
                                             Location loc) {
  if (!node.attributes()) return success();
  for (const model::Attribute* a : *node.attributes()) {
    StringRef name = a->name() ? StringRef(a->name()->c_str(), a->name()->size()) : StringRef();
    if (llvm::is_contained(type.attributes, name)) continue;
    InFlightDiagnostic error = emitError(loc) << node.op_type()->string_view()
                                              << " has no attribute '" << name << "' (";
    if (type.attributes.empty()) return error << "it takes none)";
    error << "it takes " << llvm::join(type.attributes, ", ") << ")";
    return error;
  }
  return success();
}

Location ModelImporter::nodeLoc(const model::Node& node, size_t index) {
  std::string name = node.name() && node.name()->size()
                         ? node.name()->str()
                         : node.op_type()->str() + "#" + std::to_string(index);
  return NameLoc::get(StringAttr::get(&ctx_, name), FileLineColLoc::get(&ctx_, file_.name(), 0, 0));
}

LogicalResult ModelImporter::addArgument(const model::TensorInfo& info, Location loc, bool isData,
                                         bool trainable) {
  std::string name = info.name()->str();
  if (!argNames_.insert(name).second)
    return emitError(loc) << "tensor '" << name << "' is defined twice";
  SmallVector<int64_t> shape;
  int64_t batchDim = -1;
  if (info.shape())
    for (int64_t d : *info.shape()) {
      if (d == -1 && isData) {
        if (batchDim < 0) batchDim = static_cast<int64_t>(shape.size());
        if (options_.batchSize <= 0)
          return emitError(loc) << "input '" << name
                                << "' has a batch dimension; give a batch size (--batch N)";
        d = options_.batchSize;
      }
      if (d <= 0) return emitError(loc) << "tensor '" << name << "' has invalid dimension " << d;
      shape.push_back(d);
    }
  if (!elementCount(shape))
    return emitError(loc) << "tensor '" << name << "' " << graph::shapeString(shape)
                          << " has more than 2^40 elements";
  if (info.dtype() != model::DType::f32 && !(isData && info.dtype() == model::DType::i64))
    return emitError(loc) << "tensor '" << name << "' has dtype "
                          << model::EnumNameDType(info.dtype())
                          << "; supported: f32 (inputs also i64 labels)";
  argTypes_.push_back(toTensorType(builder_, info.dtype(), shape));
  NamedAttrList attrs;
  attrs.set(isData ? attr::kData : attr::kParam, builder_.getStringAttr(name));
  if (trainable) attrs.set(attr::kTrainable, builder_.getUnitAttr());
  if (batchDim >= 0) attrs.set(attr::kBatchDim, builder_.getI64IntegerAttr(batchDim));
  argAttrs_.push_back(attrs);
  return success();
}

FailureOr<SmallVector<Value>> ModelImporter::inputs(const model::Node& node, Location loc,
                                                    size_t min, size_t max, Operands operands) {
  size_t n = node.inputs() ? node.inputs()->size() : 0;
  if (n < min || n > max)
    return emitError(loc) << node.op_type()->str() << " takes " << min
                          << (min == max ? "" : " to " + std::to_string(max)) << " inputs, got "
                          << n;
  SmallVector<Value> values;
  for (const auto* name : *node.inputs()) {
    auto it = values_.find(name->str());
    if (it == values_.end())
      return emitError(loc) << "input '" << name->str()
                            << "' is not a graph input, initializer or earlier node output";
    // Shape inference of contractions fails (fatally, inside the op builder) on mixed types.
    if (operands == Operands::F32 &&
        !cast<RankedTensorType>(it->second.getType()).getElementType().isF32())
      return emitError(loc) << node.op_type()->str() << " input '" << name->str()
                            << "' must be float32";
    values.push_back(it->second);
  }
  return values;
}

LogicalResult ModelImporter::define(const model::Node& node, Location loc, ArrayRef<Value> values) {
  size_t n = node.outputs() ? node.outputs()->size() : 0;
  if (n != values.size())
    return emitError(loc) << node.op_type()->str() << " has " << values.size()
                          << " outputs, the node names " << n;
  for (auto [name, value] : llvm::zip(*node.outputs(), values)) {
    if (values_.count(name->str()))
      return emitError(loc) << "tensor '" << name->str() << "' is defined twice";
    // Shapes derived from valid inputs can still be too large ([N, 1] + [1, N]).
    if (!elementCount(shapeOf(value)))
      return emitError(loc) << node.op_type()->str() << " output '" << name->str() << "' "
                            << graph::shapeString(shapeOf(value)) << " has more than 2^40 elements";
    values_[name->str()] = value;
  }
  return success();
}

const model::Attribute* ModelImporter::attribute(const model::Node& node, StringRef name) {
  if (!node.attributes()) return nullptr;
  for (const auto* a : *node.attributes())
    if (StringRef(a->name()->c_str(), a->name()->size()) == name) return a;
  return nullptr;
}

int64_t ModelImporter::intAttr(const model::Node& node, StringRef name, int64_t fallback) {
  const model::Attribute* a = attribute(node, name);
  return a ? a->i() : fallback;
}

double ModelImporter::floatAttr(const model::Node& node, StringRef name, double fallback) {
  const model::Attribute* a = attribute(node, name);
  return a ? a->f() : fallback;
}

Value ModelImporter::reshape(Value x, ArrayRef<int64_t> shape, Location loc) {
  auto type = cast<RankedTensorType>(x.getType());
  if (type.getShape() == shape) return x;
  return graph::ReshapeOp::create(builder_, loc,
                                  RankedTensorType::get(shape, type.getElementType()), x);
}

// nn.Linear on [..., in]: a matmul on [rows, in]; on higher ranks a linear op that keeps the
// leading dimensions (so a split sequence can pass through it).
LogicalResult ModelImporter::importLinear(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 2, 3);
  if (failed(in)) return failure();
  Value x = (*in)[0], weight = (*in)[1];
  if (auto error = graph::checkLinear(shapeOf(x), shapeOf(weight)))
    return emitError(loc) << "Linear: " << *error << " (weight is [out, in])";
  Value y = shapeOf(x).size() == 2
                ? Value(graph::MatmulOp::create(builder_, loc, x, weight, false, true))
                : Value(graph::LinearOp::create(builder_, loc, x, weight));
  if (in->size() == 3) {
    Value bias = (*in)[2];
    if (auto error = graph::checkBroadcast(shapeOf(y), shapeOf(bias)))
      return emitError(loc) << "Linear bias: " << *error;
    y = graph::AddOp::create(builder_, loc, y, bias);
  }
  return define(node, loc, {y});
}

LogicalResult ModelImporter::importMatMul(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 2, 2);
  if (failed(in)) return failure();
  bool tA = intAttr(node, "transpose_a", 0) != 0, tB = intAttr(node, "transpose_b", 0) != 0;
  Value a = (*in)[0], b = (*in)[1];
  if (shapeOf(a).size() >= 3) {
    if (auto error = graph::checkBatchMatmul(shapeOf(a), shapeOf(b), tA, tB))
      return emitError(loc) << *error;
    return define(node, loc, {graph::BatchMatmulOp::create(builder_, loc, a, b, tA, tB)});
  }
  if (auto error = graph::checkMatmul(shapeOf(a), shapeOf(b), tA, tB))
    return emitError(loc) << *error;
  return define(node, loc, {graph::MatmulOp::create(builder_, loc, a, b, tA, tB)});
}

template <typename OpTy>
LogicalResult ModelImporter::importBinary(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 2, 2);
  if (failed(in)) return failure();
  if (auto error = graph::checkBroadcast(shapeOf((*in)[0]), shapeOf((*in)[1])))
    return emitError(loc) << *error;
  return define(node, loc, {OpTy::create(builder_, loc, (*in)[0], (*in)[1])});
}

template <typename OpTy>
LogicalResult ModelImporter::importUnary(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  return define(node, loc, {OpTy::create(builder_, loc, (*in)[0])});
}

LogicalResult ModelImporter::importGelu(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  bool tanhForm = false;
  if (const model::Attribute* a = attribute(node, "approximate")) {
    std::string mode = a->s() ? a->s()->str() : "";
    if (mode != "tanh" && mode != "none")
      return emitError(loc) << "Gelu approximate must be 'none' or 'tanh', got '" << mode << "'";
    tanhForm = mode == "tanh";
  }
  return define(node, loc, {graph::GeluOp::create(builder_, loc, (*in)[0], tanhForm)});
}

LogicalResult ModelImporter::importReduceSum(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  SmallVector<int64_t> axes;
  if (const model::Attribute* a = attribute(node, "axes"); a && a->ints())
    for (int64_t axis : *a->ints())
      axes.push_back(axis < 0 ? axis + static_cast<int64_t>(shapeOf((*in)[0]).size()) : axis);
  llvm::sort(axes);
  if (auto error = graph::checkReduceAxes(shapeOf((*in)[0]), axes))
    return emitError(loc) << "ReduceSum: " << *error;
  bool keepdims = intAttr(node, "keepdims", 0) != 0;
  return define(node, loc, {graph::ReduceSumOp::create(builder_, loc, (*in)[0], axes, keepdims)});
}

LogicalResult ModelImporter::importReshape(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1, Operands::AnyElementType);
  if (failed(in)) return failure();
  const model::Attribute* a = attribute(node, "shape");
  if (!a || !a->ints()) return emitError(loc) << "Reshape needs an ints attribute 'shape'";
  auto inType = cast<RankedTensorType>((*in)[0].getType());
  SmallVector<int64_t> shape(a->ints()->begin(), a->ints()->end());
  int64_t known = 1, inferred = -1;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d == -1 && inferred < 0)
      inferred = i;
    else if (d <= 0)
      return emitError(loc) << "Reshape: invalid dimension " << d;
    // Beyond the input's elements, no dimension can match; stopping there avoids overflow.
    else if (d > inType.getNumElements() / known)
      known = inType.getNumElements() + 1;
    else
      known *= d;
  }
  if (inferred >= 0) shape[inferred] = inType.getNumElements() / known;
  std::optional<int64_t> total = elementCount(shape);
  if (total != inType.getNumElements())
    return emitError(loc) << "Reshape: cannot reshape " << graph::shapeString(inType.getShape())
                          << " to " << graph::shapeString(shape);
  auto type = RankedTensorType::get(shape, inType.getElementType());
  return define(node, loc, {graph::ReshapeOp::create(builder_, loc, type, (*in)[0])});
}

IntegerAttr ModelImporter::ignoreIndex(const model::Node& node) {
  const model::Attribute* a = attribute(node, "ignore_index");
  return a ? builder_.getI64IntegerAttr(a->i()) : IntegerAttr();
}

LogicalResult ModelImporter::importLabelFraction(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1, Operands::AnyElementType);
  if (failed(in)) return failure();
  Value labels = (*in)[0];
  if (!cast<RankedTensorType>(labels.getType()).getElementType().isInteger(64))
    return emitError(loc) << "LabelFraction labels must be int64 class indices";
  if (!attribute(node, "ignore_index"))
    return emitError(loc) << "LabelFraction needs the ignore_index its labels leave out";
  return define(
      node, loc,
      {graph::LabelFractionOp::create(builder_, loc, labels, ignoreIndex(node), IntegerAttr())});
}

// SoftmaxCrossEntropy, or NLLLoss (its input already log-probabilities).
LogicalResult ModelImporter::importCrossEntropy(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 2, 2, Operands::AnyElementType);
  if (failed(in)) return failure();
  Value logits = (*in)[0], labels = (*in)[1];
  const std::string op = node.op_type()->str();
  if (!cast<RankedTensorType>(logits.getType()).getElementType().isF32())
    return emitError(loc) << op << " scores must be float32";
  // Sequence models: logits [B, T, V] and labels [B, T] are scored as B·T rows.
  if (shapeOf(logits).size() > 2 && shapeOf(labels) == shapeOf(logits).drop_back()) {
    int64_t rows = 1;
    for (int64_t d : shapeOf(labels)) rows *= d;
    logits = reshape(logits, {rows, shapeOf(logits).back()}, loc);
    labels = reshape(labels, {rows}, loc);
  }
  if (auto error = graph::checkCrossEntropy(shapeOf(logits), shapeOf(labels)))
    return emitError(loc) << *error;
  if (!cast<RankedTensorType>(labels.getType()).getElementType().isInteger(64))
    return emitError(loc) << op << " labels must be int64 class indices";
  if (op == "NLLLoss")
    return define(node, loc,
                  {graph::NllLossOp::create(builder_, loc, logits, labels, IntegerAttr(),
                                            ignoreIndex(node))});
  return define(node, loc,
                {graph::SoftmaxCrossEntropyOp::create(builder_, loc, logits, labels, IntegerAttr(),
                                                      ignoreIndex(node))});
}

LogicalResult ModelImporter::importMse(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 2, 2);
  if (failed(in)) return failure();
  if ((*in)[0].getType() != (*in)[1].getType())
    return emitError(loc) << "MSELoss: input " << graph::shapeString(shapeOf((*in)[0]))
                          << " and target " << graph::shapeString(shapeOf((*in)[1]))
                          << " must have one shape and dtype";
  return define(node, loc,
                {graph::MseOp::create(builder_, loc, (*in)[0], (*in)[1], IntegerAttr())});
}

// F.embedding(ids, weight): inputs are the int64 ids, then the [vocab, dim] table.
LogicalResult ModelImporter::importEmbedding(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 2, 2, Operands::AnyElementType);
  if (failed(in)) return failure();
  Value ids = (*in)[0], table = (*in)[1];
  if (!cast<RankedTensorType>(ids.getType()).getElementType().isInteger(64))
    return emitError(loc) << "Embedding ids must be int64";
  if (!cast<RankedTensorType>(table.getType()).getElementType().isF32())
    return emitError(loc) << "Embedding table must be float32";
  if (auto error = graph::checkEmbedding(shapeOf(table))) return emitError(loc) << *error;
  return define(node, loc, {graph::EmbeddingOp::create(builder_, loc, table, ids)});
}

LogicalResult ModelImporter::importLayerNorm(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 3, 3);
  if (failed(in)) return failure();
  if (auto error = graph::checkLayerNorm(shapeOf((*in)[0]), shapeOf((*in)[1]), shapeOf((*in)[2])))
    return emitError(loc) << *error;
  auto eps = builder_.getF32FloatAttr(static_cast<float>(floatAttr(node, "eps", 1e-5)));
  auto op = graph::LayerNormOp::create(builder_, loc, (*in)[0], (*in)[1], (*in)[2], eps);
  return define(node, loc, {op.getY()});
}

LogicalResult ModelImporter::importTranspose(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  const model::Attribute* a = attribute(node, "perm");
  if (!a || !a->ints()) return emitError(loc) << "Transpose needs an ints attribute 'perm'";
  SmallVector<int64_t> perm(a->ints()->begin(), a->ints()->end());
  if (auto error = graph::checkPermutation(shapeOf((*in)[0]), perm))
    return emitError(loc) << *error;
  return define(node, loc, {graph::TransposeOp::create(builder_, loc, (*in)[0], perm)});
}

// One piece per output name: equal ones, or `sizes` long.
LogicalResult ModelImporter::importSplit(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  int64_t parts = node.outputs() ? node.outputs()->size() : 0;
  int64_t axis = intAttr(node, "axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(shapeOf((*in)[0]).size());
  SmallVector<int64_t> sizes;
  if (const model::Attribute* a = attribute(node, "sizes"); a && a->ints())
    sizes.assign(a->ints()->begin(), a->ints()->end());
  if (auto error = graph::checkSplit(shapeOf((*in)[0]), axis, parts, sizes))
    return emitError(loc) << *error;
  // Equal sizes are the plain split, which shards along the axis too.
  if (llvm::all_equal(sizes)) sizes.clear();
  auto op = graph::SplitOp::create(
      builder_, loc, (*in)[0], axis, parts,
      sizes.empty() ? DenseI64ArrayAttr() : builder_.getDenseI64ArrayAttr(sizes));
  return define(node, loc, SmallVector<Value>(op.getPieces()));
}

// Pieces equal in every dimension but `axis`, joined along it.
LogicalResult ModelImporter::importConcat(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, std::numeric_limits<size_t>::max());
  if (failed(in)) return failure();
  ArrayRef<int64_t> first = shapeOf((*in)[0]);
  const int64_t rank = static_cast<int64_t>(first.size());
  int64_t axis = intAttr(node, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    return emitError(loc) << "Concat axis " << intAttr(node, "axis", 0) << " is out of range for "
                          << graph::shapeString(first);
  for (Value piece : *in) {
    ArrayRef<int64_t> shape = shapeOf(piece);
    bool fits = shape.size() == first.size();
    for (int64_t d = 0; fits && d < rank; ++d) fits = d == axis || shape[d] == first[d];
    if (!fits)
      return emitError(loc) << "Concat pieces " << graph::shapeString(first) << " and "
                            << graph::shapeString(shape) << " differ beyond axis " << axis;
  }
  return define(node, loc, {graph::ConcatOp::create(builder_, loc, *in, axis)});
}

LogicalResult ModelImporter::importCausalSoftmax(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  ArrayRef<int64_t> x = shapeOf((*in)[0]);
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2])
    return emitError(loc) << "CausalSoftmax needs [..., T, T] scores, got "
                          << graph::shapeString(x);
  auto scale = builder_.getF32FloatAttr(static_cast<float>(floatAttr(node, "scale", 1.0)));
  return define(node, loc, {graph::CausalSoftmaxOp::create(builder_, loc, (*in)[0], scale)});
}

LogicalResult ModelImporter::importSoftmax(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  ArrayRef<int64_t> x = shapeOf((*in)[0]);
  const std::string op = node.op_type()->str();
  if (x.empty() || x.back() == 0)
    return emitError(loc) << op << " needs [..., N] with N > 0, got " << graph::shapeString(x);
  auto scale = builder_.getF32FloatAttr(static_cast<float>(floatAttr(node, "scale", 1.0)));
  auto log = builder_.getBoolAttr(op == "LogSoftmax");
  return define(node, loc, {graph::SoftmaxOp::create(builder_, loc, (*in)[0], scale, log)});
}

LogicalResult ModelImporter::importScale(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  auto factor = builder_.getF32FloatAttr(static_cast<float>(floatAttr(node, "factor", 1.0)));
  return define(node, loc, {graph::ScaleOp::create(builder_, loc, (*in)[0], factor)});
}

LogicalResult ModelImporter::importPow(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  auto exponent = builder_.getF32FloatAttr(static_cast<float>(floatAttr(node, "exponent", 1.0)));
  return define(node, loc, {graph::PowOp::create(builder_, loc, (*in)[0], exponent)});
}

// Each dropout draws its own mask: its key is a hash (64-bit FNV-1a, kept non-negative) of its
// output's name, which is unique in the model and stable across compilations.
LogicalResult ModelImporter::importDropout(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  const double ratio = floatAttr(node, "ratio", 0.5);
  if (!(ratio >= 0.0 && ratio < 1.0))
    return emitError(loc) << "Dropout ratio must lie in [0, 1), got " << ratio;
  if (!node.outputs() || node.outputs()->size() != 1)
    return emitError(loc) << "Dropout has one output";
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : node.outputs()->Get(0)->str())
    hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  auto key = builder_.getI64IntegerAttr(static_cast<int64_t>(hash >> 1));
  if (ratio == 0.0) return define(node, loc, {(*in)[0]});
  return define(
      node, loc,
      {graph::DropoutOp::create(builder_, loc, (*in)[0],
                                builder_.getF32FloatAttr(static_cast<float>(ratio)), key)});
}

// An ints attribute of two values ("kernel": [2, 2]); one value or none stands for both.
SmallVector<int64_t> ModelImporter::pairAttr(const model::Node& node, StringRef name,
                                             int64_t fallback) {
  const model::Attribute* a = attribute(node, name);
  if (!a || !a->ints() || a->ints()->size() == 0) return {fallback, fallback};
  if (a->ints()->size() == 1) return {a->ints()->Get(0), a->ints()->Get(0)};
  return SmallVector<int64_t>(a->ints()->begin(), a->ints()->end());
}

// nn.Conv2d: inputs x, weight [O, C, kh, kw], optional bias [O]; attributes stride, padding.
LogicalResult ModelImporter::importConv(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 2, 3);
  if (failed(in)) return failure();
  SmallVector<int64_t> stride = pairAttr(node, "stride", 1), padding = pairAttr(node, "padding", 0);
  SmallVector<int64_t> out;
  if (auto error = graph::checkConv2d(shapeOf((*in)[0]), shapeOf((*in)[1]), stride, padding, out))
    return emitError(loc) << *error;
  Value y = graph::Conv2dOp::create(builder_, loc, (*in)[0], (*in)[1], stride, padding);
  if (in->size() == 3) {
    Value bias = (*in)[2];
    if (shapeOf(bias) != ArrayRef<int64_t>{out[1]})
      return emitError(loc) << "Conv bias must be [" << out[1] << "], got "
                            << graph::shapeString(shapeOf(bias));
    y = graph::AddOp::create(builder_, loc, y, reshape(bias, {out[1], 1, 1}, loc));
  }
  return define(node, loc, {y});
}

// nn.BatchNorm2d in training mode: inputs x, weight, bias, running_mean, running_var (the last
// two non-trainable initializers, updated by every training step); attributes eps, momentum.
LogicalResult ModelImporter::importBatchNorm(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 5, 5);
  if (failed(in)) return failure();
  if (auto error = graph::checkBatchNorm(shapeOf((*in)[0]), {shapeOf((*in)[1]), shapeOf((*in)[2]),
                                                             shapeOf((*in)[3]), shapeOf((*in)[4])}))
    return emitError(loc) << *error;
  for (int k : {3, 4}) {
    auto arg = dyn_cast<BlockArgument>((*in)[k]);
    if (!arg || !func_.getArgAttr(arg.getArgNumber(), attr::kParam) ||
        func_.getArgAttr(arg.getArgNumber(), attr::kTrainable))
      return emitError(loc) << "BatchNormalization running statistics must be non-trainable "
                               "initializers";
  }
  auto eps = builder_.getF32FloatAttr(static_cast<float>(floatAttr(node, "eps", 1e-5)));
  auto momentum = builder_.getF32FloatAttr(static_cast<float>(floatAttr(node, "momentum", 0.1)));
  auto op = graph::BatchNormTrainOp::create(builder_, loc, (*in)[0], (*in)[1], (*in)[2], (*in)[3],
                                            (*in)[4], eps, momentum);
  bufferUpdates_.push_back({op.getNewRunningMean(), node.inputs()->Get(3)->str()});
  bufferUpdates_.push_back({op.getNewRunningVar(), node.inputs()->Get(4)->str()});
  return define(node, loc, {op.getY()});
}

LogicalResult ModelImporter::importMaxPool(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  SmallVector<int64_t> kernel = pairAttr(node, "kernel", 2);
  SmallVector<int64_t> stride = pairAttr(node, "stride", kernel[0]);
  SmallVector<int64_t> out;
  if (auto error = graph::checkMaxPool2d(shapeOf((*in)[0]), kernel, stride, out))
    return emitError(loc) << *error;
  return define(node, loc, {graph::MaxPool2dOp::create(builder_, loc, (*in)[0], kernel, stride)});
}

// nn.Flatten: [N, ...] -> [N, prod(...)].
LogicalResult ModelImporter::importFlatten(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1, Operands::AnyElementType);
  if (failed(in)) return failure();
  ArrayRef<int64_t> x = shapeOf((*in)[0]);
  if (x.empty()) return emitError(loc) << "Flatten needs a batch dimension";
  int64_t rest = 1;
  for (int64_t d : x.drop_front()) rest *= d;
  return define(node, loc, {reshape((*in)[0], {x[0], rest}, loc)});
}

OwningOpRef<ModuleOp> ModelImporter::run() {
  const model::Graph& graph = *file_.model().graph();
  Location fileLoc = FileLineColLoc::get(&ctx_, file_.name(), 0, 0);
  auto fail = [&](const Twine& message) {
    emitError(fileLoc) << message;
    return OwningOpRef<ModuleOp>();
  };
  if (!graph.loss() || graph.loss()->size() == 0)
    return fail("the model names no loss tensor (graph.loss)");

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  if (graph.initializers())
    for (const auto* init : *graph.initializers())
      if (failed(addArgument(*init->info(), fileLoc, /*isData=*/false, init->trainable())))
        return nullptr;
  if (graph.inputs())
    for (const auto* input : *graph.inputs())
      if (failed(addArgument(*input, fileLoc, /*isData=*/true, false))) return nullptr;

  builder_.setInsertionPointToEnd(module->getBody());
  func_ =
      func::FuncOp::create(builder_, fileLoc, "forward", builder_.getFunctionType(argTypes_, {}));
  Block* body = func_.addEntryBlock();
  // All at once: setting them one by one rebuilds the whole list each time (quadratic in depth).
  SmallVector<DictionaryAttr> dictionaries;
  for (const NamedAttrList& attrs : argAttrs_) dictionaries.push_back(attrs.getDictionary(&ctx_));
  func_.setAllArgAttrs(dictionaries);
  for (auto [i, attrs] : llvm::enumerate(argAttrs_)) {
    StringRef name =
        cast<StringAttr>(attrs.get(attrs.get(attr::kParam) ? attr::kParam : attr::kData))
            .getValue();
    values_[name] = body->getArgument(i);
  }
  builder_.setInsertionPointToEnd(body);

  if (graph.nodes())
    for (auto [i, node] : llvm::enumerate(*graph.nodes())) {
      Location loc = nodeLoc(*node, i);
      auto it = handlers().find(node->op_type()->string_view());
      if (it == handlers().end())
        return emitError(loc) << "unsupported op type '" << node->op_type()->str() << "'", nullptr;
      if (failed(checkAttributes(*node, it->second, loc))) return nullptr;
      if (failed((this->*(it->second.import))(*node, loc))) return nullptr;
    }

  // Results: the loss first, then the other outputs in the model's order.
  SmallVector<std::string> outputs{graph.loss()->str()};
  if (graph.outputs())
    for (const auto* name : *graph.outputs())
      if (name->str() != outputs.front()) outputs.push_back(name->str());
  SmallVector<Value> results;
  for (const std::string& name : outputs) {
    auto it = values_.find(name);
    if (it == values_.end()) return fail("output '" + name + "' is not produced by the graph");
    results.push_back(it->second);
  }
  auto lossType = cast<RankedTensorType>(results.front().getType());
  if (lossType.getRank() != 0 || !lossType.getElementType().isF32())
    return fail("the loss '" + outputs.front() + "' must be a float32 scalar");
  for (auto& [value, name] : bufferUpdates_) results.push_back(value);
  func::ReturnOp::create(builder_, fileLoc, results);
  SmallVector<Type> resultTypes;
  for (Value v : results) resultTypes.push_back(v.getType());
  func_.setType(builder_.getFunctionType(argTypes_, resultTypes));
  for (auto [i, name] : llvm::enumerate(outputs))
    func_.setResultAttr(i, attr::kOutput, builder_.getStringAttr(name));
  for (auto [i, update] : llvm::enumerate(bufferUpdates_))
    func_.setResultAttr(outputs.size() + i, attr::kUpdates, builder_.getStringAttr(update.second));

  (*module)->setAttr(attr::kLoss, builder_.getStringAttr(outputs.front()));
  auto optionalName = [&](const flatbuffers::String* s, const char* key) -> LogicalResult {
    if (!s || s->size() == 0) return success();
    if (!values_.count(s->str()))
      return emitError(fileLoc) << key << " names unknown tensor '" << s->str() << "'";
    (*module)->setAttr(key, builder_.getStringAttr(s->str()));
    return success();
  };
  if (failed(optionalName(graph.predictions(), attr::kPredictions)) ||
      failed(optionalName(graph.targets(), attr::kTargets)))
    return nullptr;
  if (options_.batchSize > 0)
    (*module)->setAttr(attr::kBatchSize, builder_.getI64IntegerAttr(options_.batchSize));
  if (failed(verify(*module))) return nullptr;
  return module;
}

}  // namespace

std::vector<ImportableOp> importableOps() {
  std::vector<ImportableOp> ops;
  for (const auto& entry : ModelImporter::handlers()) {
    ImportableOp op{entry.getKey().str(), {}};
    for (StringRef attribute : entry.getValue().attributes)
      op.attributes.push_back(attribute.str());
    ops.push_back(std::move(op));
  }
  llvm::sort(ops, [](const ImportableOp& a, const ImportableOp& b) { return a.type < b.type; });
  return ops;
}

OwningOpRef<ModuleOp> importModel(MLIRContext& ctx, const ModelFile& file,
                                  const ImportOptions& options) {
  ctx.loadDialect<func::FuncDialect, graph::GraphDialect>();
  return ModelImporter(ctx, file, options).run();
}

}  // namespace dtc
