#include "train/numerics.h"

#include "support/finite_copy.h"
#include "support/printable.h"
#include "support/stop_signals.h"

namespace dtc {

StatusOr<StepHealth> agreeOnStep(comm::Communicator& world, bool nonFinite, bool tooManySkips,
                                 bool writing) {
  float flags[4] = {static_cast<float>(stopSignalReceived()), nonFinite ? 1.0f : 0.0f,
                    tooManySkips ? 1.0f : 0.0f, writing ? 1.0f : 0.0f};
  if (world.size() > 1) DTC_RETURN_IF_ERROR(world.allReduceMax(flags, 4));
  return StepHealth{static_cast<int>(flags[0]), flags[1] > 0, flags[2] > 0, flags[3] > 0};
}

Status checkFiniteState(Executor& ex, comm::Communicator& world, const std::string& what,
                        AgreedFailure& agreed) {
  Status local = ex.pullState();
  if (local.ok())
    for (const plan::StateTensor* s : *ex.plan().root().state()) {
      if (!Plan::onStage(s->stage(), ex.stage())) continue;
      const TensorView t = ex.state(s->name()->str());
      if (t.data && !copyCheckingFinite(ex.pool(), nullptr, static_cast<uint8_t*>(t.data),
                                        t.numElements(), t.dtype)) {
        local =
            Status::NonFinite("'" + printable(s->name()->str()) + "' holds inf or NaN: " + what +
                              " is not written (the last one written holds finite values)");
        break;
      }
    }
  return agree(world, local, agreed);
}

}  // namespace dtc
