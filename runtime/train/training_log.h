// The JSON-lines log of a run (dtrun --log): one object per step, flushed as the step ends, so a
// crash loses no finished step. A resumed run keeps the entries up to the step it resumes from
// (a crashed run may have logged steps past its last checkpoint) and continues the file.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "support/status.h"

namespace dtc {

// What a training step reports.
struct StepNumbers {
  float loss = 0;
  double lr = 0;
  bool hasGradNorm = false;  // the plan computes the gradient norm
  double gradNorm = 0;
  bool skipped = false;  // fp16: the loss scale skipped this step's update (overflow)
};

class TrainingLog {
 public:
  // Opens `path` for a run whose first step is `firstStep` (1 for a fresh run, which starts the
  // file anew).
  static StatusOr<std::unique_ptr<TrainingLog>> open(const std::string& path, int64_t firstStep);
  // One training step and its rate. Non-finite numbers are written as null (the file stays
  // JSON); a skipped step has "skipped": true.
  Status step(int64_t step, const StepNumbers& numbers, double samplesPerSecond);
  // A periodic evaluation after `step`.
  Status evaluation(int64_t step, double valLoss);

 private:
  Status write(const std::string& line);
  std::string path_;
  std::ofstream out_;
};

}  // namespace dtc
