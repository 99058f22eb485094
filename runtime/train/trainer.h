// The training loop behind `dtrun`: data in, steps run, progress out, checkpoints and
// parameters saved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "plan/plan.h"
#include "train/run_agreement.h"

namespace dtc {

struct TrainOptions {
  std::string dataDir;      // DIR/<input>.npy for each data input of train_step, or an llm.c .bin
  std::string evalDir;      // optional held-out set for the eval function (same forms)
  int64_t evalEvery = 0;    // > 0: evaluate on evalDir every N steps (and at the end)
  int64_t evalBatches = 0;  // > 0: evaluate on the first K batches only (nanoGPT's eval_iters)
  std::string logPath;      // optional JSON lines, one object per step
  std::string tensorboardDir;  // optional: TensorBoard scalars (train/tensorboard.h)
  std::string saveDir;         // optional: DIR/model.safetensors with the final parameters
  bool saveHf = false;         // --format hf: DIR/config.json beside it (a Hugging Face folder)
  // --max-shard-size: above it, --save writes shards and their index (save_pretrained's 5GB).
  uint64_t maxShardBytes = 5'000'000'000;
  // --save-dtype: f32, bf16 or f16 ("": float32, or under --format hf the torch_dtype of the
  // model's config, as transformers saved it).
  std::string saveDtype;
  std::string predictDir;    // optional: DIR/<output>.npy, the eval function over the data
  int64_t steps = 0;         // the run's total: a resumed run continues up to it
  uint64_t seed = 0;         // sample order: epoch e is permuted from (seed, e)
  bool seedGiven = false;    // --seed was given (a resumed run otherwise takes the checkpoint's)
  int threads = 0;           // 0: all hardware threads
  int64_t sampleTokens = 0;  // after training: a continuation of `prompt`
  std::string prompt;
  std::string tokenizer;     // --tokenizer: a tokenizer.json or its folder, or "bytes"
  double temperature = 0.8;  // sampling as nanoGPT's sample.py (0: greedy)
  int64_t topK = 200;
  uint64_t sampleSeed = 1337;
  std::string tracePath;        // optional: Chrome trace JSON of every kernel call, all ranks
  bool profileSummary = false;  // print where rank 0's step time went (train/profile_summary.h)
  std::string device = "cpu";   // the backend: cpu, cuda (one GPU per process), cpu-staged
  // Checkpoints: DIR/step-<N>/ every `checkpointEvery` steps (0: only at the end and when
  // stopped by a signal), the newest `keep` kept (0: all).
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  int keep = 0;
  // Write each periodic checkpoint in the background (checkpoint/async_writer.h); the last one,
  // and one a signal asks for, are written at once.
  bool checkpointAsync = false;
  std::string resumePath;  // a step-<N> directory, or a checkpoint directory (its latest)
  std::string initPath;    // parameters under PyTorch names (safetensors, or an HF folder)
  // Numerics: a non-finite loss or gradient norm ends the run (exit 4); fp16 runs may skip
  // this many steps in a row before that is an error too; checkNumerics names the first op
  // whose output is not finite (slow: every output is scanned).
  int64_t maxSkippedSteps = kDefaultMaxSkippedSteps;
  bool checkNumerics = false;
  double collectiveTimeout = 0;  // seconds; 0: comm/watchdog.h's default
  static constexpr int64_t kDefaultMaxSkippedSteps = 20;
};

// What every rank of a job must have alike (train/run_agreement.h): the plan, and every flag
// that shapes the run.
std::vector<RunField> runFields(const Plan& plan, const TrainOptions& options);

// The job must have one process per device of the plan's mesh (one for a plan without a mesh).
Status checkWorldSize(const Plan& plan, int processes, const std::string& launcher);

// Prints `status` as dtrun reports it ("dtrun: error: ..."; a stop by a signal without "error")
// on stderr and returns its exit code.
int reportFailure(const Status& status);
// A failure every rank of `world` knows of: rank 0 reports it, the others wait until it has (a
// launcher tears the job down as soon as one process exits with an error, and rank 0 would be
// killed before it printed). Collective; returns the exit code.
int reportAgreedFailure(comm::Communicator& world, const Status& status);

// Runs on every process of the job (`world`: one per device of the plan's mesh; a plan without
// a mesh needs a job of one). Only rank 0 prints, logs and saves; every rank writes its own
// pieces of a checkpoint. SIGTERM or SIGINT on any rank stops every rank after the same step,
// with a checkpoint when one was asked for (Status::Stopped). On several processes a failure
// is reported here, once, before this returns (the caller only exits with its code).
Status train(const Plan& plan, const TrainOptions& options,
             std::unique_ptr<comm::Communicator> world);

}  // namespace dtc
