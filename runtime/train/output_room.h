// Room for what a run writes, checked before its first step: a run that trains for hours and
// then cannot write its checkpoints or its --save has lost the work.
#pragma once

#include <cstdint>
#include <string>

#include "planfile/plan.h"
#include "support/dtype.h"
#include "support/status.h"

namespace dtc {

struct OutputRoom {
  std::string saveDir;  // "" when not saving
  DType saveDtype = DType::kF32;
  std::string checkpointDir;  // "" when not checkpointing
  int64_t checkpoints = 0;    // how many the run writes
  int keep = 0;               // --keep (0: all)
};

// The bytes --save writes of the plan's parameters in `dtype` (every name of a tied weight).
uint64_t savedBytes(const Plan& plan, DType dtype);
// The bytes one checkpoint of the plan's state takes.
uint64_t checkpointBytes(const Plan& plan);
// How many checkpoints a run from step `done` to `steps` writes, one every `every` (0: only the
// last) and the last: at least one.
int64_t checkpointsWritten(int64_t done, int64_t steps, int64_t every);

// Each file system the outputs go to must have room for them (those on one file system
// together): the save, and the checkpoints the directory holds at once (with --keep K, K and
// the one being written). The directories must exist. Otherwise one line naming the outputs,
// the bytes they need and the bytes free.
Status checkOutputRoom(const Plan& plan, const OutputRoom& room);

}  // namespace dtc
