// A plan's predicted step time on a device profile: every rank's training step simulated
// kernel by kernel (perf/step_simulation.h, with the prices below). Compute kernels take the
// roofline of their FLOPs (GEMMs, attention, convolutions, at the profile's throughput for their
// size) and their bytes (memory bandwidth), plus the profile's fixed cost per kernel; collectives
// take the alpha-beta time of the ring algorithm on the link their group spans (inside a node or
// between nodes); pipeline stages wait for the transfers they receive. On CUDA collectives run on
// their own stream and overlap the compute that does not need them; on the CPU they block.
#pragma once

#include <string>
#include <vector>

#include "perf/device_profile.h"
#include "planfile/plan.h"

namespace dtc::perf {

struct StagePrediction {
  int stage = -1;                          // -1: a plan without a pipeline (every rank alike)
  double stepSeconds = 0;                  // when the stage's step ends
  double computeSeconds = 0;               // its kernels' time
  double communicationSeconds = 0;         // its collectives' time, overlapped or not
  double exposedCommunicationSeconds = 0;  // time compute waited for collectives
  double bubbleSeconds = 0;                // time waiting for another stage (pipeline receives)
  double flops = 0;  // its contraction FLOPs as MFU counts them (planfile/flops.h; recomputed too)
  // Its compute time by kernel, most first.
  std::vector<std::pair<std::string, double>> kernels;
};

struct StepPrediction {
  double stepSeconds = 0;
  // The breakdown of the slowest stage (step = compute + exposed communication + bubble).
  double computeSeconds = 0, exposedCommunicationSeconds = 0, bubbleSeconds = 0;
  std::vector<StagePrediction> stages;
  int64_t devices = 1;
  double flopsPerStep = 0;     // over every rank
  int64_t samplesPerStep = 0;  // batch × micro-batches (the global batch)
  int64_t tokensPerStep = 0;   // samples × the length of a sequence input (samples otherwise)
  double tokensPerSecond() const { return stepSeconds > 0 ? tokensPerStep / stepSeconds : 0; }
  // FLOPs per second over the devices' peak for the plan's GEMM type (hardware FLOPs:
  // recomputed forward passes count).
  double utilisation = 0;
};

// `clock` (plans without a pipeline): after each step of the train step, when its compute stream
// is free (`ends`); each step's kernel time, contraction FLOPs and collective seconds (0 where
// they do not apply), to price parts of a program.
// `deferAxis` >= 0: gradient reductions (all-reduce, reduce-scatter) over that mesh axis take no
// time where they stand; `deferred` holds each one's seconds (0 for other steps), for a caller
// that prices them where a pipeline runs them, after its last micro-batch.
struct StepClock {
  int deferAxis = -1;
  std::vector<double> ends, kernel, deferred, flops, communication;
};
StatusOr<StepPrediction> predictStep(const Plan& plan, const DeviceProfile& profile,
                                     StepClock* clock = nullptr);

// Text lines and a JSON object (the `prediction` of `dtc inspect --json`).
std::string predictionText(const StepPrediction& p, const DeviceProfile& profile);
std::string predictionJson(const StepPrediction& p, const DeviceProfile& profile);

}  // namespace dtc::perf
