// The multiply-add FLOPs (2 per multiply-add) of a plan's contractions — linear layers, matmuls,
// convolutions, attention, forward and backward — as model FLOPs utilisation counts them
// (causal attention's full T², as its decomposed form computes it). dtrun's progress line and
// the step-time prediction both count with these.
#pragma once

#include "planfile/plan.h"

namespace dtc {

// One step's (0 for kernels that contract nothing).
double contractionFlops(const plan::Function& f, const plan::Step& step);
// A function's, as a rank runs it.
double contractionFlops(const plan::Function& f);

}  // namespace dtc
