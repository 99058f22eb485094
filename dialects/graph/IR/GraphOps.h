#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "common/OpInterfaces.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphTraits.h"

#include "graph/IR/GraphInterfaces.h.inc"

#define GET_OP_CLASSES
#include "graph/IR/GraphOps.h.inc"

namespace dtc::graph {

// Shape rules shared by type inference and by importers, which must reject bad shapes with a
// message before building an op (a failing inference inside a builder is fatal).
// Each returns std::nullopt when the shapes are valid, else the reason.
std::optional<std::string> checkBroadcast(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);
std::optional<std::string> checkMatmul(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                                       bool transposeLhs, bool transposeRhs);
std::optional<std::string> checkCrossEntropy(llvm::ArrayRef<int64_t> logits,
                                             llvm::ArrayRef<int64_t> labels);
std::optional<std::string> checkReduceAxes(llvm::ArrayRef<int64_t> shape,
                                           llvm::ArrayRef<int64_t> axes);
std::optional<std::string> checkBatchMatmul(llvm::ArrayRef<int64_t> lhs,
                                            llvm::ArrayRef<int64_t> rhs, bool transposeLhs,
                                            bool transposeRhs);
std::optional<std::string> checkPermutation(llvm::ArrayRef<int64_t> shape,
                                            llvm::ArrayRef<int64_t> perm);
// `parts` equal pieces, or pieces of `sizes` (non-empty: one per part, positive, adding up to the
// dimension).
std::optional<std::string> checkSplit(llvm::ArrayRef<int64_t> shape, int64_t axis, int64_t parts,
                                      llvm::ArrayRef<int64_t> sizes = {});
std::optional<std::string> checkEmbedding(llvm::ArrayRef<int64_t> table);
// A mixture of experts' routing settings: at least one expert, top-k in [1, E], a positive
// capacity factor.
std::optional<std::string> checkMoeRouting(int64_t experts, int64_t topK, double capacityFactor);
// Each expert's slots per group of `tokens`: ceil(factor · tokens · k / E), at most `tokens`.
int64_t moeCapacity(int64_t tokens, int64_t experts, int64_t topK, double capacityFactor);
// Conv2d/pooling output shape, or the reason there is none.
std::optional<std::string> checkConv2d(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> weight,
                                       llvm::ArrayRef<int64_t> stride,
                                       llvm::ArrayRef<int64_t> padding,
                                       llvm::SmallVectorImpl<int64_t>& out);
std::optional<std::string> checkMaxPool2d(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> kernel,
                                          llvm::ArrayRef<int64_t> stride,
                                          llvm::SmallVectorImpl<int64_t>& out);
std::optional<std::string> checkBatchNorm(llvm::ArrayRef<int64_t> x,
                                          llvm::ArrayRef<llvm::ArrayRef<int64_t>> perChannel);
std::optional<std::string> checkLinear(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> weight);
std::string shapeString(llvm::ArrayRef<int64_t> shape);

// What a mean loss op (softmax_cross_entropy, mse and their gradients) divides by: its `count`
// attribute, else its own rows (cross-entropy) or elements (mse); nullopt for other ops.
std::optional<int64_t> meanCount(mlir::Operation* op);

}  // namespace dtc::graph
