#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dist/IR/DistDialect.h"

#define GET_ATTRDEF_CLASSES
#include "dist/IR/DistAttrs.h.inc"

#define GET_OP_CLASSES
#include "dist/IR/DistOps.h.inc"

namespace dtc::dist {

// Attribute names on modules, functions and ops.
inline constexpr const char kMeshAttr[] = "dist.mesh";            // module: MeshAttr
inline constexpr const char kShardingAttr[] = "dist.sharding";    // func arg/result: ShardingAttr
inline constexpr const char kShardingsAttr[] = "dist.shardings";  // op: one per result
// Present on an annotation that a user (or a strategy on a user's behalf) wrote: it wins over
// propagated shardings.
inline constexpr const char kUserAttr[] = "dist.user";

// Pipeline parallelism. On ops and parameter arguments: the pipeline (virtual) stage computing
// or holding it; on stage functions: the device stage running it.
inline constexpr const char kStageAttr[] = "dist.stage";
// On ops that a gradient rule built (the backward pass).
inline constexpr const char kBackwardAttr[] = "dist.backward";
// On ops of an unrolled step: the micro-batch they compute.
inline constexpr const char kMicroBatchAttr[] = "dist.micro_batch";
// On stage functions: the function they are a stage of ("train_step", "eval").
inline constexpr const char kFunctionAttr[] = "dist.function";
// On the module: the pipeline's configuration (PipelineConfig below) and, after the schedule
// pass, what it predicts per stage.
inline constexpr const char kPipelineAttr[] = "dist.pipeline";
inline constexpr const char kPipelineStagesAttr[] = "dist.pipeline_stages";
inline constexpr const char kPipelineBubbleAttr[] = "dist.pipeline_bubble";  // {fraction, ratio}

// The module's mesh, or null.
MeshAttr getMesh(mlir::Operation* op);

}  // namespace dtc::dist
