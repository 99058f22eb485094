// A training run's start: everything that can fail before step 1 (outputs, inputs, the starting
// state), and what the run holds from then on.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/async_writer.h"
#include "checkpoint/layout.h"
#include "comm/device_mesh.h"
#include "exec/executor.h"
#include "planfile/plan.h"
#include "text/tokenizer.h"
#include "train/batch_source.h"
#include "train/generate.h"
#include "train/run_agreement.h"
#include "train/train_flags.h"

namespace dtc {

// What a run holds once it has started.
struct RunState {
  std::unique_ptr<Executor> ex;
  std::unique_ptr<BatchSource> train, eval, predict;  // predict: --eval's data, else --data's
  checkpoint::CheckpointLayout layout;
  int64_t done = 0;          // steps completed before this run (a resumed checkpoint's)
  std::string resumedFrom;   // the step directory
  uint64_t loadedBytes = 0;  // by this rank
  double loadSeconds = 0;
  uint64_t seed = 0;
  int64_t samplesPerStep = 0;
  DType saveDtype = DType::kF32;             // --save's floats
  std::optional<text::Tokenizer> tokenizer;  // --sample's
  // --checkpoint-async's writer; destroyed first, so that a write in flight stops before the
  // layout it reads goes.
  std::unique_ptr<checkpoint::AsyncCheckpointWriter> async;
};

// --sample's options: the sampler's flags and the tokenizer read before training.
SamplingOptions samplingOptions(const TrainOptions& o, const RunState& run);

// Everything that can fail before step 1, in phases, each ending when every rank knows whether
// all succeeded (`agreed`), so that no rank waits in a collective for one that failed.
Status startRun(const Plan& plan, const TrainOptions& o, comm::DeviceMesh* mesh, RunState& run,
                AgreedFailure& agreed);

}  // namespace dtc
