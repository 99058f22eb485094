// Writing a checkpoint: each rank writes the pieces the layout gives it to its own safetensors
// file (no gathering), fsyncs it and reports its checksums to rank 0, which writes the index
// last, renames the step into place and only then moves `latest`. A crash at any moment leaves
// the previous checkpoint whole and `latest` naming it.
#pragma once

#include <string>

#include "checkpoint/index.h"
#include "checkpoint/layout.h"
#include "comm/communicator.h"
#include "exec/executor.h"

namespace dtc::checkpoint {

struct CheckpointRequest {
  std::string dir;  // the checkpoint directory (exists: the trainer prepared it)
  int keep = 0;     // the newest steps to keep (0: all)
  Progress progress;
};

// Collective over `world` (every rank, after the same step, with the same request). The host
// copy of `ex`'s state must be current (Executor::pullState). Returns the step directory; a
// failure on any rank fails it on every rank, and rank 0's error says which and why.
StatusOr<std::string> writeCheckpoint(Executor& ex, comm::Communicator& world,
                                      const CheckpointLayout& layout, const CheckpointRequest& request);

}  // namespace dtc::checkpoint
