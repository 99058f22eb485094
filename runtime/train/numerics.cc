#include "train/numerics.h"

#include <cmath>
#include <cstring>

#include "support/printable.h"
#include "support/stop_signals.h"

namespace dtc {
namespace {

bool finite(const TensorView& t) {
  const int64_t n = t.numElements();
  if (t.dtype == DType::kF32) {
    const float* v = t.f32();
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(v[i])) return false;
    return true;
  }
  if (t.dtype != DType::kF16 && t.dtype != DType::kBF16) return true;
  const uint16_t exponent = t.dtype == DType::kF16 ? 0x7C00 : 0x7F80;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, t.data + 2 * i, 2);
    if ((v & exponent) == exponent) return false;
  }
  return true;
}

}  // namespace

StatusOr<StepHealth> agreeOnStep(comm::Communicator& world, bool nonFinite, bool tooManySkips) {
  float flags[3] = {static_cast<float>(stopSignalReceived()), nonFinite ? 1.0f : 0.0f, tooManySkips ? 1.0f : 0.0f};
  if (world.size() > 1) DTC_RETURN_IF_ERROR(world.allReduceMax(flags, 3));
  return StepHealth{static_cast<int>(flags[0]), flags[1] > 0, flags[2] > 0};
}

Status checkFiniteState(Executor& ex, comm::Communicator& world, const std::string& what, AgreedFailure& agreed) {
  Status local = ex.pullState();
  if (local.ok())
    for (const plan::StateTensor* s : *ex.plan().root().state()) {
      if (!Plan::onStage(s->stage(), ex.stage())) continue;
      const TensorView t = ex.state(s->name()->str());
      if (t.data && !finite(t)) {
        local = Status::NonFinite("'" + printable(s->name()->str()) + "' holds inf or NaN: " + what +
                                  " is not written (the last one written holds finite values)");
        break;
      }
    }
  return agree(world, local, agreed);
}

}  // namespace dtc
