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

// What was written, as rank 0 saw it.
struct WrittenCheckpoint {
  std::string dir;     // the step directory
  uint64_t bytes = 0;  // every rank's file
  int files = 0;
  double seconds = 0;         // from the first byte to `latest` (rank 0's clock)
  double slowestSeconds = 0;  // the slowest rank's file, written and synced
  uint64_t slowestBytes = 0;
};

// Collective over `world` (every rank, after the same step, with the same request). The host
// copy of `ex`'s state must be current (Executor::pullState). A failure on any rank fails it on
// every rank, and rank 0's error says which and why.
StatusOr<WrittenCheckpoint> writeCheckpoint(Executor& ex, comm::Communicator& world,
                                            const CheckpointLayout& layout,
                                            const CheckpointRequest& request);

}  // namespace dtc::checkpoint
