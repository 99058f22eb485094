// Helpers shared by the sharding passes: per-op factor shardings (`dist.factors`), projecting
// them onto operands and results, and conversions to the reshard planner's plain layouts.
#pragma once

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "dist/IR/DistOps.h"
#include "sharding/ReshardPlanner.h"
#include "sharding/ShardingRules.h"

namespace dtc::sharding {

// Propagation writes each op's factor shardings (dist::kFactorsAttr, dist::kFactorBlocksAttr)
// and the partitioner reads them.
struct FactorShardings {
  mlir::ArrayAttr axes;               // per factor: ArrayAttr of axis names
  llvm::SmallVector<int64_t> blocks;  // per factor: chunks (1: plain)
};
mlir::FailureOr<FactorShardings> readFactors(mlir::Operation* op);
void writeFactors(mlir::Operation* op, const FactorShardings& factors);

// The sharding of an operand or result whose dimensions belong to `dims` (factor or -1, with
// multiplicities `mult`), under the factor shardings; partial over `partial`.
dist::ShardingAttr project(mlir::MLIRContext* ctx, llvm::ArrayRef<int> dims,
                           llvm::ArrayRef<int64_t> mult, const FactorShardings& factors,
                           mlir::ArrayAttr partial = {}, mlir::ArrayAttr partialMax = {});

// Axes of the sharded factors that result `result` sums over: it is partial over them.
mlir::ArrayAttr partialAxes(mlir::MLIRContext* ctx, const OpShardingRule& rule, unsigned result,
                            const FactorShardings& factors);
// Axes of the sharded factors that result `result` is the maximum over.
mlir::ArrayAttr maxAxes(mlir::MLIRContext* ctx, const OpShardingRule& rule, unsigned result,
                        const FactorShardings& factors);

Mesh toMesh(dist::MeshAttr mesh);
Layout toLayout(dist::MeshAttr mesh, dist::ShardingAttr sharding);

// "tensor 'fc0.weight'", "result 0 of matmul at 'fc0'", … for errors about a value.
std::string describe(mlir::Value value);

}  // namespace dtc::sharding
