#include "train/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dtc {
namespace {

std::string duration(double seconds) {
  char text[32];
  const long long s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s / 60 % 60);
  else if (s >= 60)
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%llds", s);
  return text;
}

}  // namespace

Progress::Progress(int64_t totalSteps, int64_t firstStep, int64_t samplesPerStep,
                   int64_t tokensPerSample, double flopsPerStep, double peakFlops)
    : total_(totalSteps),
      first_(firstStep),
      samplesPerStep_(samplesPerStep),
      tokensPerSample_(tokensPerSample),
      flopsPerStep_(flopsPerStep),
      peakFlops_(peakFlops) {}

double Progress::samplesPerSecond(double seconds) const {
  return samplesPerStep_ / std::max(seconds, 1e-9);
}

double Progress::throughput(double seconds) const {
  return samplesPerSecond(seconds) * static_cast<double>(std::max<int64_t>(tokensPerSample_, 1));
}

double Progress::utilisation(double seconds) const {
  if (!(peakFlops_ > 0 && flopsPerStep_ > 0)) return -1;
  return flopsPerStep_ / std::max(seconds, 1e-9) / peakFlops_;
}

std::string Progress::line(int64_t step, const StepNumbers& s, int64_t skippedInARow,
                           double seconds) {
  elapsed_ += seconds;
  char text[400];
  int n = std::snprintf(text, sizeof text, "step %5lld/%lld | loss %.6f | lr %.3e", (long long)step,
                        (long long)total_, s.loss, s.lr);
  if (s.hasGradNorm) n += std::snprintf(text + n, sizeof text - n, " | norm %.4f", s.gradNorm);
  if (s.skipped)
    n += std::snprintf(text + n, sizeof text - n, " | skipped (fp16 overflow, %lld in a row)",
                       (long long)skippedInARow);
  const double rate = samplesPerSecond(seconds);
  if (tokensPerSample_ > 1)
    n += std::snprintf(text + n, sizeof text - n, " | %.0f tokens/s", rate * tokensPerSample_);
  else
    n += std::snprintf(text + n, sizeof text - n, " | %.0f samples/s", rate);
  if (utilisation(seconds) >= 0)
    n += std::snprintf(text + n, sizeof text - n, " | MFU %.1f%%", 100.0 * utilisation(seconds));
  const int64_t done = step - first_ + 1, left = total_ - step;
  std::snprintf(text + n, sizeof text - n, " | %s left",
                duration(elapsed_ / std::max<int64_t>(done, 1) * left).c_str());
  return text;
}

}  // namespace dtc
