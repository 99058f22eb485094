// Multi-tensor kernels, fused as the program is lowered onto kernels: per-tensor calls of one
// kind become one call over many tensors, as PyTorch's fused AdamW and its multi_tensor_apply
// do. Every element is computed as before, bit for bit.
//
// - The `adamw_update` calls of one parameter group (the same betas, eps, weight decay, step
//   counter, learning rate and marks) become one `multi_tensor_adamw`, in the place of the
//   group's last update. Where an update's result is read before that (a loss-scaling select, a
//   ZeRO all-gather of the updated shard), the group is cut there.
// - The casts of the function's parameters to one type (mixed precision's 16-bit weight copies,
//   one per parameter and step) become one `multi_tensor_cast`, in the place of the first: its
//   operands are arguments, ready from the start.
//
// A group of one stays the per-tensor call.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dtc {

void fuseOptimizerUpdates(mlir::func::FuncOp function);
void fuseParameterCasts(mlir::func::FuncOp function);

}  // namespace dtc
