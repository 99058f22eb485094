// What dtrun prints after each step: loss, learning rate, gradient norm, throughput (tokens/s
// for sequence models, samples/s otherwise), model FLOPs utilisation and the time left.
#pragma once

#include <cstdint>
#include <string>

#include "train/training_log.h"

namespace dtc {

class Progress {
 public:
  // `flopsPerStep` (all ranks') and `peakFlops` (all ranks'; 0: unknown) give the MFU;
  // `tokensPerSample` > 1 reports tokens/s.
  Progress(int64_t totalSteps, int64_t firstStep, int64_t samplesPerStep, int64_t tokensPerSample,
           double flopsPerStep, double peakFlops);
  // The line for `step`, which took `seconds`; `skippedInARow` counts fp16 steps skipped in a
  // row up to this one.
  std::string line(int64_t step, const StepNumbers& numbers, int64_t skippedInARow, double seconds);
  double samplesPerSecond(double seconds) const;
  // tokens/s for sequence models, samples/s otherwise (what the line reports), and its name.
  double throughput(double seconds) const;
  const char* throughputName() const {
    return tokensPerSample_ > 1 ? "tokens_per_s" : "samples_per_s";
  }
  // The step's FLOP/s over the peak, or a negative number where the peak is unknown.
  double utilisation(double seconds) const;
  // All ranks' peak FLOP/s, once measured (train/run_peak.h); 0: unknown.
  void setPeak(double peakFlops) { peakFlops_ = peakFlops; }

 private:
  int64_t total_, first_, samplesPerStep_, tokensPerSample_;
  double flopsPerStep_, peakFlops_;
  double elapsed_ = 0;  // seconds over the steps of this run so far
};

}  // namespace dtc
