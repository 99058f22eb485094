// The consolidated model (dtrun --save DIR): every parameter whole, under PyTorch's names and
// its tied weights' other names, in DIR/model.safetensors, so that
// `model.load_state_dict(load_file(...))` takes it as it is; or, above `maxShardBytes`, in
// shards and their index as save_pretrained writes them (model-00001-of-00003.safetensors...,
// model.safetensors.index.json).
#pragma once

#include <cstdint>
#include <string>

#include "exec/executor.h"

namespace dtc {

// Every rank calls it (each sends rank 0 the pieces it writes, a bounded block at a time); only
// `write` (rank 0) writes. The host state must be current (Executor::pullState).
Status saveParameters(Executor& ex, const std::string& dir, bool write, uint64_t maxShardBytes);

}  // namespace dtc
