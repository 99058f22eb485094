// The learning rate of each step, as the plan's schedule (plan.fbs LrSchedule) defines it: the
// runtime computes it in double, as nanoGPT and Hugging Face's schedulers do, and passes it to
// the step, so that one plan serves a whole run and a resumed run continues its schedule.
#pragma once

#include <cstdint>
#include <string>

#include "planfile/plan.h"

namespace dtc {

struct LrSchedule {
  std::string kind = "constant";  // constant, cosine or linear
  double lr = 0, minLr = 0;
  int64_t warmupSteps = 0, decaySteps = 0;
};

// The plan's schedule (Plan::verify checked it: a plan whose step takes a learning rate has one).
LrSchedule lrScheduleOf(const Plan& plan);

// The learning rate of update `s` (0-based).
double learningRate(const LrSchedule& schedule, int64_t s);

}  // namespace dtc
