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
}  // namespace attr

}  // namespace dtc
