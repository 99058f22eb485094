// What a run records as it goes, on rank 0: each step's progress line, the JSON-lines log
// (--log) and the TensorBoard scalars (--tensorboard), and the periodic evaluations in both.
#pragma once

#include <cstdint>
#include <memory>

#include "train/progress.h"
#include "train/tensorboard.h"
#include "train/train_flags.h"
#include "train/training_log.h"

namespace dtc {

class RunLog {
 public:
  // Opens the outputs `o` names on the lead rank (the others record nothing) for a run whose
  // first step is `firstStep`; `logged`: whether the run has steps or evaluations to log.
  static StatusOr<RunLog> open(const TrainOptions& o, bool lead, int64_t firstStep, bool logged);

  // A training step: the progress line, the log's entry and the scalars.
  Status step(int64_t step, const StepNumbers& numbers, Progress& progress, int64_t skippedInARow,
              double seconds);
  // An evaluation after `step`.
  Status evaluation(int64_t step, double loss);

 private:
  bool lead_ = false;
  std::unique_ptr<TrainingLog> log_;
  std::unique_ptr<TensorBoardWriter> board_;
};

}  // namespace dtc
