// The residual stream's adds joined to the LayerNorms beside them, as patterns of the lowering
// onto kernels. Forward, a pre-norm block adds a sublayer's output to the stream and normalises
// the sum: add(x, r) → layer_norm becomes one `add_layer_norm`(x, r, w, b) → (sum, y, mean, rstd).
// Backward, the stream's gradient is the LayerNorm's input gradient plus the gradient that came
// down the stream: layer_norm_grad → add(dres, dx) becomes one `layer_norm_grad_add`(dy, x, w,
// mean, rstd, dres) → (sum, dw, db), which under mixed precision also writes the sum rounded to
// 16 bits where only a cast to that type reads it (the next GEMMs' dy). Every value is the
// unfused steps' bit for bit (a float sum is the same in either order; the kernel rounds as the
// cast did).
//
// RMSNorm's are the same kernels' kin: add(x, r) → rms_norm becomes `add_rms_norm`(x, r, w) →
// (sum, y, rstd), and rms_norm_grad → add(dres, dx) becomes `rms_norm_grad_add`(dy₁, …, dyₚ, x,
// w, rstd, dres) → (sum, dw[, rounded]). Under mixed precision each operand a cast widened from
// 16 bits for the add alone is read as stored (the sublayer's output r; the q, k and v
// projections' input gradients, whose chain of adds into dy the kernel sums as it reads them, in
// the chain's order).
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dtc {

void fuseResidualNorms(mlir::func::FuncOp function, bool absorbCasts);

}  // namespace dtc
