// The importer of each model op type: its operands and attributes checked, the graph ops built.
#include <functional>
#include <limits>
#include <optional>

#include "llvm/ADT/StringExtras.h"
#include "mlir/Dialect/Traits.h"

#include "graph/IR/GraphOps.h"
#include "model/ModelImporterImpl.h"

namespace dtc::detail {

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
      {"Softplus", {&ModelImporter::importUnary<graph::SoftplusOp>, {}}},
      {"Pow", {&ModelImporter::importPow, {"exponent"}}},
      {"Dropout", {&ModelImporter::importDropout, {"ratio"}}},
      {"Gelu", {&ModelImporter::importGelu, {"approximate"}}},
      {"ReduceSum", {&ModelImporter::importReduceSum, {"axes", "keepdims"}}},
      {"Reshape", {&ModelImporter::importReshape, {"shape"}}},
      {"Expand", {&ModelImporter::importExpand, {"shape"}}},
      {"SoftmaxCrossEntropy", {&ModelImporter::importCrossEntropy, {"ignore_index"}}},
      {"NLLLoss", {&ModelImporter::importCrossEntropy, {"ignore_index", "reduction"}}},
      {"LabelFraction", {&ModelImporter::importLabelFraction, {"ignore_index"}}},
      {"MSELoss", {&ModelImporter::importMse, {}}},
      {"Embedding", {&ModelImporter::importEmbedding, {"padding_idx"}}},
      {"LayerNorm", {&ModelImporter::importLayerNorm, {"eps"}}},
      {"RMSNorm", {&ModelImporter::importRmsNorm, {"eps"}}},
      {"SwiGLU", {&ModelImporter::importSwiglu, {}}},
      {"MixtureOfExperts",
       {&ModelImporter::importMixtureOfExperts,
        {"top_k", "capacity_factor", "normalize", "score", "activation"}}},
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
      {"Cast", {&ModelImporter::importCast, {}}},
  };
  return table;
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
  std::optional<int64_t> total = elementCount(shape, kMaxDerivedElements);
  if (total != inType.getNumElements())
    return emitError(loc) << "Reshape: cannot reshape " << graph::shapeString(inType.getShape())
                          << " to " << graph::shapeString(shape);
  auto type = RankedTensorType::get(shape, inType.getElementType());
  return define(node, loc, {graph::ReshapeOp::create(builder_, loc, type, (*in)[0])});
}

// torch.expand / ONNX Expand: x broadcast with `shape` by NumPy's rules (so the result may have
// more dimensions, and `shape` may hold 1s where x is wider).
LogicalResult ModelImporter::importExpand(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1);
  if (failed(in)) return failure();
  const model::Attribute* a = attribute(node, "shape");
  if (!a || !a->ints()) return emitError(loc) << "Expand needs an ints attribute 'shape'";
  SmallVector<int64_t> target(a->ints()->begin(), a->ints()->end()), shape;
  if (!elementCount(target, kMaxDerivedElements))
    return emitError(loc) << "Expand: invalid shape " << graph::shapeString(target);
  if (!OpTrait::util::getBroadcastedShape(shapeOf((*in)[0]), target, shape) ||
      !elementCount(shape, kMaxDerivedElements))
    return emitError(loc) << "Expand: " << graph::shapeString(shapeOf((*in)[0]))
                          << " does not broadcast with " << graph::shapeString(target);
  if (ArrayRef<int64_t>(shape) == shapeOf((*in)[0])) return define(node, loc, {(*in)[0]});
  auto type = RankedTensorType::get(shape, builder_.getF32Type());
  return define(node, loc, {graph::BroadcastOp::create(builder_, loc, type, (*in)[0])});
}

IntegerAttr ModelImporter::ignoreIndex(const model::Node& node) {
  const model::Attribute* a = attribute(node, "ignore_index");
  return a ? builder_.getI64IntegerAttr(a->i()) : IntegerAttr();
}

// Class weights [C] (an optional input `index`) of an NLL loss or label fraction: float32.
FailureOr<Value> ModelImporter::classWeights(const model::Node& node, ArrayRef<Value> in,
                                             size_t index, Location loc) {
  if (in.size() <= index) return Value();
  Value w = in[index];
  auto type = cast<RankedTensorType>(w.getType());
  if (!type.getElementType().isF32() || type.getRank() != 1)
    return emitError(loc) << node.op_type()->str() << " class weights must be float32 [C], got "
                          << graph::shapeString(type.getShape());
  return w;
}

LogicalResult ModelImporter::importLabelFraction(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 2, Operands::AnyElementType);
  if (failed(in)) return failure();
  Value labels = (*in)[0];
  if (!cast<RankedTensorType>(labels.getType()).getElementType().isInteger(64))
    return emitError(loc) << "LabelFraction labels must be int64 class indices";
  FailureOr<Value> weight = classWeights(node, *in, 1, loc);
  if (failed(weight)) return failure();
  if (!attribute(node, "ignore_index") && !*weight)
    return emitError(loc) << "LabelFraction needs the ignore_index its labels leave out, or "
                             "class weights";
  return define(node, loc,
                {graph::LabelFractionOp::create(builder_, loc, labels, *weight, ignoreIndex(node),
                                                IntegerAttr())});
}

// SoftmaxCrossEntropy, or NLLLoss (its input already log-probabilities; class weights as a third
// input, and reduction "none" for one loss per position).
LogicalResult ModelImporter::importCrossEntropy(const model::Node& node, Location loc) {
  const std::string op = node.op_type()->str();
  auto in = inputs(node, loc, 2, op == "NLLLoss" ? 3 : 2, Operands::AnyElementType);
  if (failed(in)) return failure();
  Value logits = (*in)[0], labels = (*in)[1];
  SmallVector<int64_t> positions(shapeOf(labels));
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
  if (op == "NLLLoss") {
    FailureOr<Value> weight = classWeights(node, *in, 2, loc);
    if (failed(weight)) return failure();
    const model::Attribute* r = attribute(node, "reduction");
    const std::string reduction = r && r->s() ? r->s()->str() : "mean";
    if (reduction != "mean" && reduction != "none")
      return emitError(loc) << "NLLLoss reduction must be mean or none, got '" << reduction << "'";
    if (*weight && shapeOf(*weight) != ArrayRef<int64_t>{shapeOf(logits)[1]})
      return emitError(loc) << "NLLLoss class weights " << graph::shapeString(shapeOf(*weight))
                            << " do not match " << shapeOf(logits)[1] << " classes";
    Value loss = graph::NllLossOp::create(builder_, loc, logits, labels, *weight, IntegerAttr(),
                                          ignoreIndex(node), reduction == "none");
    return define(node, loc, {reduction == "none" ? reshape(loss, positions, loc) : loss});
  }
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
  // nn.Embedding's padding_idx: its row never trains.
  IntegerAttr paddingIdx;
  if (const model::Attribute* padding = attribute(node, "padding_idx")) {
    const int64_t rows = shapeOf(table)[0];
    if (padding->i() < 0 || padding->i() >= rows)
      return emitError(loc) << "Embedding padding_idx " << padding->i() << " is outside the "
                            << rows << " rows of its table";
    paddingIdx = builder_.getI64IntegerAttr(padding->i());
  }
  Value rows = graph::EmbeddingOp::create(builder_, loc, table, ids, paddingIdx);
  return define(node, loc, {rows});
}

LogicalResult ModelImporter::importLayerNorm(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 3, 3);
  if (failed(in)) return failure();
  if (auto error =
          graph::LayerNormOp::checkShapes(shapeOf((*in)[0]), shapeOf((*in)[1]), shapeOf((*in)[2])))
    return emitError(loc) << *error;
  auto eps = builder_.getF32FloatAttr(static_cast<float>(floatAttr(node, "eps", 1e-5)));
  auto op = graph::LayerNormOp::create(builder_, loc, (*in)[0], (*in)[1], (*in)[2], eps);
  return define(node, loc, {op.getY()});
}

// LlamaRMSNorm: (x, weight) with eps.
LogicalResult ModelImporter::importRmsNorm(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 2, 2);
  if (failed(in)) return failure();
  if (auto error = graph::RmsNormOp::checkShapes(shapeOf((*in)[0]), shapeOf((*in)[1])))
    return emitError(loc) << *error;
  const double eps = floatAttr(node, "eps", 1e-6);
  if (!(eps > 0)) return emitError(loc) << "RMSNorm: eps must be > 0, got " << eps;
  auto op = graph::RmsNormOp::create(builder_, loc, (*in)[0], (*in)[1],
                                     builder_.getF32FloatAttr(static_cast<float>(eps)));
  return define(node, loc, {op.getY()});
}

// SwiGLU's product silu(gate) · up, of two tensors of one shape.
LogicalResult ModelImporter::importSwiglu(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 2, 2);
  if (failed(in)) return failure();
  if ((*in)[0].getType() != (*in)[1].getType())
    return emitError(loc) << "SwiGLU: gate and up must have one shape, got " << (*in)[0].getType()
                          << " and " << (*in)[1].getType();
  return define(node, loc,
                {graph::SwigluOp::create(builder_, loc, (*in)[0].getType(), (*in)[0], (*in)[1])});
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
  // Floats, or int64 labels (a slice of them: a causal LM's shift).
  auto in = inputs(node, loc, 1, 1, Operands::AnyElementType);
  if (failed(in)) return failure();
  if (Type e = cast<RankedTensorType>((*in)[0].getType()).getElementType();
      !e.isF32() && !e.isInteger(64))
    return emitError(loc) << "Split input must be float32 or int64";
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

// An int64 tensor the data holds (an attention mask) as float32, to compute on.
LogicalResult ModelImporter::importCast(const model::Node& node, Location loc) {
  auto in = inputs(node, loc, 1, 1, Operands::AnyElementType);
  if (failed(in)) return failure();
  auto type = cast<RankedTensorType>((*in)[0].getType());
  if (!type.getElementType().isInteger(64))
    return emitError(loc) << "Cast takes int64 data to float32; its input is " << type;
  auto f32 = RankedTensorType::get(type.getShape(), builder_.getF32Type());
  return define(node, loc, {graph::CastOp::create(builder_, loc, f32, (*in)[0])});
}

}  // namespace dtc::detail
