// The consolidated model file (dtrun --save DIR): DIR/model.safetensors with every parameter
// whole, under PyTorch's names and its tied weights' other names, so that
// `model.load_state_dict(load_file(...))` takes it as it is.
#pragma once

#include <string>

#include "exec/executor.h"

namespace dtc {

// Every rank calls it (each sends rank 0 the pieces it writes, a bounded block at a time); only
// `write` (rank 0) writes. The host state must be current (Executor::pullState).
Status saveParameters(Executor& ex, const std::string& dir, bool write);

}  // namespace dtc
