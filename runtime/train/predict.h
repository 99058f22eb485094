// dtrun --predict DIR: the plan's eval function (the model in evaluation mode) over the data in
// order, every output (the loss too) written as DIR/<output>.npy (characters other than letters,
// digits, '.', '_' and '-' as '_') — a forward pass to inspect, or to compare with another
// framework's.
#pragma once

#include <string>

#include "exec/executor.h"
#include "train/batch_source.h"

namespace dtc {

// Each full batch of `data` in order. An output whose first dimension is the batch is
// concatenated along it ([batches · batch, ...]); any other is stacked ([batches, ...]).
// Single-device plans only (the trainer checks).
Status predict(Executor& ex, BatchSource& data, const std::string& dir);

}  // namespace dtc
