// Where a plan function's data inputs come from, batch by batch: a directory of .npy files
// (one per input, rows = samples) or an llm.c token file (windows of T+1 tokens).
#pragma once

#include <memory>
#include <string>

#include "exec/executor.h"
#include "io/json.h"

namespace dtc {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Training: fills the inputs with the batch of 0-based `step` (shuffled from the seed). A
  // step's batch depends on the step alone, so a resumed run continues the same stream.
  virtual void fillTraining(int64_t step) = 0;
  // Where the training stream stands after `steps` steps, as a checkpoint records it: a resumed
  // run's source must describe the same position (same data, batch and order), or the
  // continuation would silently see other samples.
  virtual io::Json position(int64_t steps) const = 0;
  // Evaluation: the data once, in order, as evalBatches() full batches.
  virtual int64_t evalBatches() const = 0;
  virtual void fillEval(int64_t batch) = 0;
  // Samples (rows or windows) in one pass over the data, and how many evaluation skips.
  virtual int64_t samples() const = 0;
  // The arena view of input `name` after a fill, or nullptr.
  virtual const TensorView* input(const std::string& name) const = 0;
};

// The error openBatchSource gives for a path that is not there, without an executor (checked
// before a run reserves memory).
Status checkDataPath(const std::string& path);

// Opens `path` for the data inputs of `function`: a directory is read as DIR/<input>.npy, a
// file as llm.c tokens (the function must then take two int64 [B, T] inputs, the model's
// targets and the tokens). Checks dtypes, shapes and token ids against the plan.
StatusOr<std::unique_ptr<BatchSource>> openBatchSource(Executor& ex, const std::string& function,
                                                       const std::string& path, uint64_t seed);

}  // namespace dtc
