// Roles an op plays that passes ask by trait rather than by listing the ops (GraphDialect.td
// attaches them): a new op of the role is found by every pass that asks.
#pragma once

#include "mlir/IR/OpDefinition.h"

namespace dtc::graph::trait {

// Normalises each row over the last dimension (LayerNorm, RMSNorm), its input x operand 0:
// sequence parallelism splits such an op's rows.
template <typename ConcreteType>
class NormalizesFeatures : public mlir::OpTrait::TraitBase<ConcreteType, NormalizesFeatures> {};

// Updates one parameter and its optimizer state from its gradient (SGD, AdamW): ZeRO shards it,
// gradient clipping scales its gradient, loss scaling may skip it.
template <typename ConcreteType>
class OptimizerUpdate : public mlir::OpTrait::TraitBase<ConcreteType, OptimizerUpdate> {};

}  // namespace dtc::graph::trait

namespace dtc::graph {

inline bool normalizesFeatures(mlir::Operation* op) {
  return op->hasTrait<trait::NormalizesFeatures>();
}
inline bool isOptimizerUpdate(mlir::Operation* op) {
  return op->hasTrait<trait::OptimizerUpdate>();
}

}  // namespace dtc::graph
