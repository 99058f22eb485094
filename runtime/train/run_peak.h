// The peak a CPU run's MFU divides by: the fastest FLOP rate (planfile/flops.h's count) any of the
// run's own contraction steps has reached so far, this step's included, timed by the executor
// as they ran (on the run's threads and shapes, beside the other ranks). Each step spends at
// least its FLOPs over that rate, so no step can report more than 100%; a GEMM timed apart at
// start-up (one large square product) is outrun by the small, cache-resident GEMMs of a small
// model, and a peak taken from the first steps alone by the warmer steps after them. Every
// rank's peak is summed, as the FLOPs of every rank are.
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "exec/executor.h"
#include "planfile/plan.h"
#include "train/progress.h"

namespace dtc {

class RunPeak {
 public:
  // Watches this rank's `f` in every step of the run from `firstStep`, and says what the peak
  // is after the first kSteps (up to `lastStep`); `measured` false (a device, whose peak is not
  // known here) watches nothing.
  RunPeak(const Plan& plan, const plan::Function& f, bool measured, int64_t firstStep,
          int64_t lastStep);
  static constexpr int64_t kSteps = 2;

  // Before step `step`: the executor times its steps while the peak is watched.
  void before(Executor& ex, int64_t step);
  // After it: the fastest rate so far, summed over `world`'s ranks (a collective each rank calls
  // after every step), becomes `progress`'s peak; `lead` prints what it is after the first
  // kSteps.
  Status after(Executor& ex, comm::Communicator& world, int64_t step, Progress& progress,
               bool lead);

 private:
  bool watching(int64_t step) const { return measured_ && step >= first_; }

  const plan::Function& f_;
  uint32_t function_ = UINT32_MAX;  // f's index in the plan
  bool measured_;
  int64_t first_, last_;    // the steps after which the peak is said
  bool wasTiming_ = false;  // the executor's timing as the trace or profile asked for it
  size_t seen_ = 0;         // the executor's timings already read
  double best_ = 0;         // this rank's fastest contraction (FLOP/s)
  std::string fastest_;     // which step reached it
};

}  // namespace dtc
