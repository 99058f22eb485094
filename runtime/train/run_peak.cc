#include "train/run_peak.h"

#include <algorithm>
#include <cstdio>

#include "ops/kernel_registry.h"
#include "planfile/flops.h"

namespace dtc {
namespace {

// The step's kernel and its operands' shapes ("linear [32,64,128] [512,128] -> [32,64,512]").
std::string describe(const plan::Function& f, const plan::Step& s) {
  std::string text = kernelName(s.kernel());
  if (s.inputs())
    for (uint32_t i : *s.inputs()) text += " " + shapeString(f.values()->Get(i)->shape());
  text += " ->";
  if (s.outputs())
    for (uint32_t i : *s.outputs()) text += " " + shapeString(f.values()->Get(i)->shape());
  return text;
}

}  // namespace

RunPeak::RunPeak(const Plan& plan, const plan::Function& f, bool measured, int64_t firstStep,
                 int64_t lastStep)
    : f_(f),
      measured_(measured),
      first_(firstStep),
      last_(std::min(lastStep, firstStep + kSteps - 1)) {
  const auto* functions = plan.root().functions();
  for (uint32_t i = 0; functions && i < functions->size(); ++i)
    if (functions->Get(i) == &f) function_ = i;
  if (function_ == UINT32_MAX) measured_ = false;
}

void RunPeak::before(Executor& ex, int64_t step) {
  if (!watching(step)) return;
  if (step == first_) {
    wasTiming_ = ex.timing();
    seen_ = ex.timings().size();
  }
  ex.setTiming(true);
}

Status RunPeak::after(Executor& ex, comm::Communicator& world, int64_t step, Progress& progress,
                      bool lead) {
  if (!watching(step)) return Status::Ok();
  const std::vector<StepTiming>& timings = ex.timings();
  for (; seen_ < timings.size(); ++seen_) {
    const StepTiming& t = timings[seen_];
    if (t.function != function_ || t.step >= f_.steps()->size()) continue;
    const plan::Step& s = *f_.steps()->Get(t.step);
    const double flops = contractionFlops(f_, s);
    // A step timed as 0 µs (below the clock's resolution) says nothing of its rate.
    if (!(flops > 0) || !(t.endUs > t.startUs)) continue;
    const double rate = flops / ((t.endUs - t.startUs) * 1e-6);
    if (rate > best_) {
      best_ = rate;
      fastest_ = describe(f_, s);
    }
  }
  // Timings nothing else asked for are read once: a long run does not keep them.
  if (!wasTiming_) {
    ex.clearTimings();
    seen_ = 0;
  }
  const bool last = step == last_;
  float peak = static_cast<float>(best_ / 1e9);
  if (world.size() > 1) DTC_RETURN_IF_ERROR(world.allReduceSum(&peak, 1));
  progress.setPeak(peak * 1e9);
  if (last && lead && peak > 0) {
    const int threads = ex.pool().size();
    const std::string steps = last_ == first_
                                  ? "step " + std::to_string(first_)
                                  : "steps " + std::to_string(first_) + "-" + std::to_string(last_);
    std::printf(
        "MFU: model FLOPs over %.1f GFLOP/s, %s fastest contraction in %s as it ran on %d "
        "thread%s (rank 0's: %s); raised as later steps run faster\n",
        peak, world.size() > 1 ? "the sum of every rank's" : "the run's", steps.c_str(), threads,
        threads == 1 ? "" : "s", fastest_.c_str());
  }
  return Status::Ok();
}

}  // namespace dtc
