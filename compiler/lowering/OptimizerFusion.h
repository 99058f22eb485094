// Multi-tensor optimizer updates, fused as the program is lowered onto kernels: the
// `adamw_update` calls of one parameter group (the same betas, eps, weight decay, step counter
// and learning rate) become one `multi_tensor_adamw` call, as PyTorch's fused AdamW updates every
// parameter in a few launches instead of one per tensor. The call takes the place of the group's
// last update; where an update's result is read before that (a loss-scaling select, a ZeRO
// all-gather), the group is cut there, and a group of one stays `adamw_update`. Every element is
// computed as before, bit for bit.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dtc {

void fuseOptimizerUpdates(mlir::func::FuncOp function);

}  // namespace dtc
