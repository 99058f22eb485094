// The model importer's class, shared by its two halves: the walk over a model file and its
// arguments (ModelImporter.cpp) and the importer of each op type (ModelImporterOps.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "model/ModelFile.h"
#include "model/ModelImporter.h"

namespace dtc::detail {

using namespace mlir;

// The most elements a tensor may have: byte counts of any tensor then fit in 64 bits with room
// to add them up (the runtime's plan verifier holds plans to the same bound). Inputs and
// parameters are held to it as the model gives them.
inline constexpr int64_t kMaxElements = int64_t(1) << 40;
// A value the graph derives is the whole batch's, which no rank need hold: partitioning and
// attention's fusion cut it down (the unfused attention scores of 2,048 sequences of 8,192
// tokens and 128 heads are 2^44 elements). It is bounded so that byte counts still fit in 64
// bits; each rank's tensors are held to kMaxElements where the program is lowered onto kernels.
inline constexpr int64_t kMaxDerivedElements = int64_t(1) << 52;

// Elements of `shape`, or nullopt when a dimension is not positive or they exceed `limit`.
inline std::optional<int64_t> elementCount(ArrayRef<int64_t> shape, int64_t limit = kMaxElements) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0 || d > limit / n) return std::nullopt;
    n *= d;
  }
  return n;
}

inline ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

inline RankedTensorType toTensorType(OpBuilder& b, model::DType dtype, ArrayRef<int64_t> shape) {
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
  LogicalResult importExpand(const model::Node& node, Location loc);
  LogicalResult importCrossEntropy(const model::Node& node, Location loc);
  LogicalResult importLabelFraction(const model::Node& node, Location loc);
  IntegerAttr ignoreIndex(const model::Node& node);
  FailureOr<Value> classWeights(const model::Node& node, ArrayRef<Value> in, size_t index,
                                Location loc);
  LogicalResult importMse(const model::Node& node, Location loc);
  LogicalResult importEmbedding(const model::Node& node, Location loc);
  LogicalResult importLayerNorm(const model::Node& node, Location loc);
  LogicalResult importRmsNorm(const model::Node& node, Location loc);
  LogicalResult importSwiglu(const model::Node& node, Location loc);
  LogicalResult importMixtureOfExperts(const model::Node& node, Location loc);
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
  LogicalResult importCast(const model::Node& node, Location loc);
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

}  // namespace dtc::detail
