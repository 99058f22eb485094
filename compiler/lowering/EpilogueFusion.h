// GEMM epilogues, fused as the program is lowered onto kernels: `linear` (or, under mixed
// precision, the widening cast of its 16-bit result) → `add` of a bias [N] becomes one
// `linear_bias` call, and with a tanh `gelu` after it `linear_bias_gelu` (which also gives the
// pre-activation the backward pass keeps); `linear_grad_input` (or its widening cast) → tanh
// `gelu_grad` becomes `linear_grad_input_gelu`. Intermediate values must have no other use. The
// calls are what cuBLASLt's BIAS, GELU_AUX_BIAS and DGELU epilogues compute: the f32 product is
// not rounded to 16 bits before the bias or GELU; in f32 the result is the unfused ops' bit for
// bit on the CPU.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dtc {

// `absorbCasts`: write a fused y in its operands' 16-bit type when only a cast to it reads y.
void fuseEpilogues(mlir::func::FuncOp function, bool absorbCasts);

}  // namespace dtc
