#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace dtc {

LrSchedule lrScheduleOf(const Plan& plan) {
  LrSchedule out;
  const plan::LrSchedule* s = plan.root().lr_schedule();
  if (!s) return out;
  out.kind = s->kind() ? s->kind()->str() : "constant";
  out.lr = s->lr();
  out.minLr = s->min_lr();
  out.warmupSteps = s->warmup_steps();
  out.decaySteps = s->decay_steps();
  return out;
}

double learningRate(const LrSchedule& k, int64_t s) {
  const double step = static_cast<double>(s), w = static_cast<double>(k.warmupSteps),
               d = static_cast<double>(k.decaySteps);
  if (k.kind == "cosine") {
    if (s < k.warmupSteps) return k.lr * (step + 1) / w;
    if (s > k.decaySteps) return k.minLr;
    const double ratio = (step - w) / (d - w);
    const double pi = 3.14159265358979323846;
    return k.minLr + 0.5 * (1.0 + std::cos(pi * ratio)) * (k.lr - k.minLr);
  }
  if (k.kind == "linear") {
    if (s < k.warmupSteps) return k.lr * (step / w);  // LambdaLR: base_lr * factor
    return k.lr * std::max(0.0, (d - step) / (d - w));
  }
  return k.lr;
}

}  // namespace dtc
