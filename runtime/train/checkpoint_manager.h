// A run's checkpoints (--checkpoint DIR): written at the steps the flags ask for, at the end and
// when a signal stops the run, at once or (--checkpoint-async) in the background while training
// goes on. Every call is collective: every rank learns the writer's verdict, so that a failure
// ends the job in order.
#pragma once

#include <cstdint>

#include "comm/device_mesh.h"
#include "train/run_agreement.h"
#include "train/run_start.h"
#include "train/train_flags.h"

namespace dtc {

class CheckpointManager {
 public:
  // `run` and `agreed` outlive the manager; `lastWritten` is the step the run starts from when it
  // resumed one (-1: none).
  CheckpointManager(const TrainOptions& o, RunState& run, comm::DeviceMesh& mesh,
                    AgreedFailure& agreed, int64_t lastWritten);

  // Makes the background writer where --checkpoint-async asks for one.
  Status open();
  // Publishes the background write in flight (if any) once every rank's file is synced.
  // `waiting`: training waits for it (the next checkpoint is due).
  Status finishWrite(bool waiting);
  // The state after `step`; `background`: with --checkpoint-async, snapshot and write while
  // training goes on. A step already written is not written again.
  Status writeAt(int64_t step, bool background);

  // The step of the newest checkpoint written (-1: none).
  int64_t last() const { return last_; }
  // Whether this rank's part of a background write is still being written.
  bool writing() const;
  // The host memory the background writer holds for its snapshot.
  uint64_t hostBytes() const;

 private:
  const TrainOptions& o_;
  RunState& run_;
  comm::DeviceMesh& mesh_;
  AgreedFailure& agreed_;
  int64_t last_;
  bool lead_;
};

}  // namespace dtc
