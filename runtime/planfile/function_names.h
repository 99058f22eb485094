// The functions a training module holds as the compiler builds it, and a plan's, by name: the
// compiler creates and looks them up, the runtime runs them, by these names only.
#pragma once

namespace dtc::fn {

inline constexpr const char* kForward = "forward";       // the model, as imported (compiler)
inline constexpr const char* kGrad = "grad";             // forward and backward (compiler)
inline constexpr const char* kTrainStep = "train_step";  // grad, then the update: plan and compiler
inline constexpr const char* kEval = "eval";             // the model in evaluation mode: plan

}  // namespace dtc::fn
