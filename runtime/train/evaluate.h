// Evaluation on a held-out set (dtrun --eval): the plan's eval function over every full batch,
// mean loss and, for classifiers, accuracy summed over the devices.
#pragma once

#include <cstdint>
#include <string>

#include "exec/executor.h"
#include "train/batch_source.h"
#include "train/run_log.h"

namespace dtc {

struct Evaluation {
  double loss = 0;  // mean over the batches (rank 0's: the stage holding the loss)
  int64_t batches = 0;
};

// Every rank calls it (accuracy is summed over the devices); rank 0 prints when `print`, with
// `prefix` ("eval", "step 200: eval"). `maxBatches` > 0 evaluates only the first ones.
StatusOr<Evaluation> evaluate(Executor& ex, BatchSource& data, bool print, int64_t maxBatches = 0,
                              const std::string& prefix = "eval");

// A run's evaluations (--eval): after the steps --eval-every names and after training, each
// step's once. Collective, as evaluate().
class Evaluator {
 public:
  // `data`: --eval's (null: nothing to evaluate); `batches` > 0: only the first ones.
  Evaluator(Executor& ex, BatchSource* data, RunLog& log, bool lead, int64_t batches)
      : ex_(ex), data_(data), log_(log), lead_(lead), batches_(batches) {}
  // After `step`; `periodic`: one of --eval-every's (its line names the step).
  Status at(int64_t step, bool periodic);

 private:
  Executor& ex_;
  BatchSource* data_;
  RunLog& log_;
  bool lead_;
  int64_t batches_;
  int64_t last_ = -1;
};

// The index of `f`'s result of `role` (and `name`, when given), or UINT32_MAX.
uint32_t resultIndex(const plan::Function& f, plan::Role role, const std::string& name = "");

// The loss of `f`, which this rank runs. A pipeline returns it from its first stage (the
// compiler sends it there); the other stages' functions return none (UINT32_MAX).
StatusOr<uint32_t> lossOf(const Executor& ex, const plan::Function& f);

}  // namespace dtc
