// Outputs a kernel may write over one of its inputs: the memory planner gives such an output the
// input's bytes where that input is read by nothing after the step (and holds the same bytes),
// so the step needs no second buffer of that size. Kernels not listed never read and write one
// buffer (the planner's rule), except the optimizer updates, which write state in place.
#pragma once

#include <cstddef>

#include "ops/kernel_registry.h"

namespace dtc {

// The input output `output` of `kernel` may be written over, or -1.
inline int overwritableInput(Kernel kernel, size_t output) {
  // The gradient of the loss over the logits: each row is read whole before it is written
  // (GPT-2's logits are [8192, 50304]: 824 MB in bf16).
  if (kernel == Kernel::softmax_cross_entropy_with_grad && output == 1) return 0;
  return -1;
}

}  // namespace dtc
