// Loading a checkpoint into a plan compiled for any mesh: each rank reads, from whichever files
// hold them, only the saved pieces that overlap its own, checks each piece's CRC-32 and copies
// the overlap into place. The plan's state and the checkpoint's tensors must match by name,
// dtype and whole shape.
#pragma once

#include <string>

#include "checkpoint/index.h"
#include "exec/executor.h"

namespace dtc::checkpoint {

// Fills every state tensor of this rank from checkpoint `stepDir` (its validated `index`), then
// sends the state to the device. A missing, unexpected or mis-shaped tensor is one error that
// lists them all; a piece whose bytes do not match its checksum names its file.
// Returns the bytes this rank read.
StatusOr<uint64_t> loadCheckpoint(Executor& ex, const std::string& stepDir,
                                  const CheckpointIndex& index);

}  // namespace dtc::checkpoint
