#pragma once

#include <memory>

#include "mlir/Pass/Pass.h"

namespace dtc {

#define GEN_PASS_DECL
#include "Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Passes.h.inc"

// Attribute names the passes attach and the plan writer reads.
namespace attr {
inline constexpr const char kGradOf[] = "graph.grad_of";      // @grad result: parameter name
inline constexpr const char kState[] = "graph.state";         // @train_step arg: state name
inline constexpr const char kOptimizer[] = "graph.optimizer"; // module: human summary
inline constexpr const char kOffsets[] = "plan.offsets";      // op: result offsets
inline constexpr const char kRegions[] = "plan.regions";      // op: result regions
inline constexpr const char kArgOffsets[] = "plan.arg_offsets";
inline constexpr const char kArgRegions[] = "plan.arg_regions";
inline constexpr const char kArenaBytes[] = "plan.arena_bytes";
inline constexpr const char kStateLayout[] = "plan.state_layout";  // module: name -> offset
inline constexpr const char kStateBytes[] = "plan.state_bytes";
inline constexpr const char kDevice[] = "plan.device";  // module: the backend compiled for
inline constexpr const char kLossSeed[] = "graph.loss_seed";  // op: autodiff's d(loss)/d(loss)
inline constexpr const char kInitial[] = "graph.initial";     // state arg: its value at step 0
// @train_step arg: a scalar the runtime sets before each step (the learning rate, "lr")
inline constexpr const char kHyper[] = "graph.hyper";
// @train_step result: a scalar the step reports (the gradient norm, "grad_norm")
inline constexpr const char kMetric[] = "graph.metric";
// @train_step param arg: the weight decay its update applies
inline constexpr const char kWeightDecay[] = "graph.weight_decay";
// module: the learning-rate schedule the runtime follows (kind, lr, warmup_steps, decay_steps,
// min_lr)
inline constexpr const char kLrSchedule[] = "graph.lr_schedule";
// module: the step reports the global gradient norm and clips to this bound (0: no clipping)
inline constexpr const char kClipGradNorm[] = "graph.clip_grad_norm";
}  // namespace attr

}  // namespace dtc
