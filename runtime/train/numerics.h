// Training stops at the first step whose loss or gradient norm is not finite, and no weights
// that are not finite are ever written: a diverged run ends with exit code 4 and its last
// checkpoint intact, instead of training on `nan` and saving it.
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "exec/executor.h"
#include "train/run_agreement.h"

namespace dtc {

// What every rank learns after a step, in one all-reduce.
struct StepHealth {
  int signal = 0;          // a stop signal some rank received (0: none)
  bool nonFinite = false;  // some rank's loss or gradient norm is not finite
  bool tooManySkips = false;
  bool writing = false;  // some rank's background checkpoint write is not done yet
};
StatusOr<StepHealth> agreeOnStep(comm::Communicator& world, bool nonFinite, bool tooManySkips,
                                 bool writing = false);

// Collective: brings the state to the host (Executor::pullState) and checks that every state
// tensor of every rank is finite, or a NonFinite error (agreed: rank 0 names the first tensor)
// saying that `what` is not written. The writer that follows uses that host copy.
Status checkFiniteState(Executor& ex, comm::Communicator& world, const std::string& what,
                        AgreedFailure& agreed);

}  // namespace dtc
