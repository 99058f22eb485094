#include "train/run_start.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "checkpoint/directory.h"
#include "checkpoint/parameters_file.h"
#include "checkpoint/reader.h"
#include "comm/watchdog.h"
#include "comm/world.h"
#include "io/files.h"
#include "planfile/function_names.h"
#include "support/stop_signals.h"
#include "train/output_room.h"
#include "train/save_parameters.h"

namespace dtc {
namespace {

// This process's place on its node, from the launcher's environment (comm/world.h): its local
// rank picks the GPU, its local size shares the cores. A launcher dtrun cannot read was
// reported before training starts; here it counts as one process.
comm::World launcherWorld() {
  StatusOr<comm::World> world = comm::detectWorld();
  return world.ok() ? *world : comm::World{};
}

// Threads when --threads is not given: the node's cores shared by the job's processes on it (as
// torchrun sets OMP_NUM_THREADS when it starts several per node), every core when the launcher
// does not say how many share the node. Oversubscribed cores would make each kernel's threads
// wait for one another.
int threadsFor(const TrainOptions& o, const comm::World& world) {
  if (o.runtime.threads > 0) return static_cast<int>(o.runtime.threads);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, world.localSize));
}

// The outputs rank 0 writes, and the checkpoint directory, checked before anything runs;
// leftovers of interrupted checkpoint writes are removed.
Status prepareOutputs(const TrainOptions& o, int rank) {
  if (rank != 0) return Status::Ok();
  if (!o.checkpoint.dir.empty() && o.checkpoint.resume.empty())
    DTC_RETURN_IF_ERROR(checkpoint::checkNoEarlierRun(o.checkpoint.dir));
  if (!o.logging.log.empty()) DTC_RETURN_IF_ERROR(io::checkOutputFile(o.logging.log, "--log"));
  if (!o.logging.trace.empty())
    DTC_RETURN_IF_ERROR(io::checkOutputFile(o.logging.trace, "--trace"));
  if (!o.save.dir.empty()) DTC_RETURN_IF_ERROR(io::prepareOutputDirectory(o.save.dir, "--save"));
  if (!o.logging.tensorboard.empty())
    DTC_RETURN_IF_ERROR(io::prepareOutputDirectory(o.logging.tensorboard, "--tensorboard"));
  if (!o.evaluation.predictDir.empty())
    DTC_RETURN_IF_ERROR(io::prepareOutputDirectory(o.evaluation.predictDir, "--predict"));
  if (!o.checkpoint.dir.empty()) {
    DTC_RETURN_IF_ERROR(io::prepareOutputDirectory(o.checkpoint.dir, "--checkpoint"));
    DTC_RETURN_IF_ERROR(checkpoint::removeLeftovers(o.checkpoint.dir));
  }
  return Status::Ok();
}

// Evaluation runs whole batches: data shorter than one would evaluate nothing (a loss of 0).
Status checkWholeBatch(const BatchSource& data, const std::string& what, const Plan& plan) {
  if (data.evalBatches() > 0) return Status::Ok();
  return Status::InvalidInput(what + " holds " + std::to_string(data.samples()) +
                              " samples, fewer than one batch of " +
                              std::to_string(plan.root().batch_size()) + ": nothing to evaluate");
}

// Every rank writes its pieces of a checkpoint into the directory rank 0 made.
Status checkCheckpointDirectory(const TrainOptions& o, int rank) {
  if (o.checkpoint.dir.empty() || rank == 0) return Status::Ok();
  if (!io::isDirectory(o.checkpoint.dir))
    return Status::InvalidInput("--checkpoint " + o.checkpoint.dir +
                                " is not visible from this rank " +
                                "(checkpoints need a file system every rank shares)");
  return io::prepareOutputDirectory(o.checkpoint.dir, "--checkpoint");
}

// The data stream must be where the checkpoint left it: same data, batch and order.
Status checkDataPosition(const io::Json& saved, const io::Json& ours, const std::string& checkpoint,
                         const std::string& data) {
  if (saved == ours) return Status::Ok();
  std::string differences;
  for (const auto& [key, value] : ours.members()) {
    const io::Json* old = saved.find(key);
    if (!old || *old != value)
      differences += (differences.empty() ? "" : ", ") + key + " " + (old ? old->dump() : "none") +
                     " there, " + value.dump() + " here";
  }
  return Status::InvalidInput("checkpoint " + checkpoint + " was trained on other data than " +
                              data + " (" + differences +
                              "): its continuation would not see the same samples");
}

// A stop asked for while the run starts (reading a checkpoint, opening data): the run ends at
// the end of the phase, not after its first step.
Status unlessStopped(Status phase) {
  const int signal = stopSignalReceived();
  if (!phase.ok() || signal == 0) return phase;
  return Status::Stopped(
      std::string("stopped by ") + stopSignalName(signal) + " before the first step", signal);
}

}  // namespace

SamplingOptions samplingOptions(const TrainOptions& o, const RunState& run) {
  return {o.sampling.temperature, o.sampling.topK, o.data.seed.value_or(1337),
          run.tokenizer ? &*run.tokenizer : nullptr, o.sampling.tokenizer == "bytes"};
}

// Everything that can fail before step 1: outputs, inputs, the starting state. In phases, each
// ending when every rank knows whether all succeeded, so that no rank waits in a collective
// for one that failed.
Status startRun(const Plan& plan, const TrainOptions& o, comm::DeviceMesh* mesh, RunState& run,
                AgreedFailure& agreed) {
  comm::Communicator& world = mesh->world();
  const int rank = mesh->rank();
  comm::setPhase("startup");
  std::string stepDir;
  checkpoint::CheckpointIndex index;
  auto checkArguments = [&]() -> Status {
    if (o.sampling.tokens > 0 && mesh->numDevices() > 1)
      return Status::InvalidInput("--sample needs a single-device plan (compile without --mesh)");
    if (!o.evaluation.predictDir.empty() && mesh->numDevices() > 1)
      return Status::InvalidInput("--predict needs a single-device plan (compile without --mesh)");
    DTC_RETURN_IF_ERROR(prepareOutputs(o, rank));
    // Inputs before any memory is reserved.
    if (!o.checkpoint.resume.empty()) {
      DTC_ASSIGN_OR_RETURN(stepDir, checkpoint::resolveCheckpoint(o.checkpoint.resume));
      DTC_ASSIGN_OR_RETURN(index, checkpoint::readIndex(stepDir));
    }
    if (!o.checkpoint.init.empty())
      DTC_RETURN_IF_ERROR(checkpoint::checkParametersFile(plan, o.checkpoint.init));
    if ((o.save.format == "hf") && !plan.root().hf_config())
      return Status::InvalidInput(
          "--format hf: the plan's model carries no Hugging Face config (dtc compile HF_DIR, "
          "dtc zoo llama and dtc zoo gpt --layout hf write one); save it with --format dtc");
    if (!o.save.dir.empty()) {
      DTC_ASSIGN_OR_RETURN(run.saveDtype,
                           saveDtypeFor(plan, o.save.dtype, (o.save.format == "hf")));
    }
    if (rank == 0) {
      const int64_t done = stepDir.empty() ? 0 : index.progress.step;
      DTC_RETURN_IF_ERROR(checkOutputRoom(
          plan, {o.save.dir, run.saveDtype, o.checkpoint.dir,
                 checkpointsWritten(done, std::max(o.data.steps, done), o.checkpoint.every),
                 static_cast<int>(o.checkpoint.keep)}));
    }
    if (!o.data.dir.empty()) DTC_RETURN_IF_ERROR(checkDataPath(o.data.dir));
    if (!o.evaluation.dir.empty()) DTC_RETURN_IF_ERROR(checkDataPath(o.evaluation.dir));
    if (!o.sampling.tokenizer.empty() && o.sampling.tokenizer != "bytes" && rank == 0) {
      DTC_ASSIGN_OR_RETURN(text::Tokenizer tokenizer, text::Tokenizer::load(o.sampling.tokenizer));
      run.tokenizer = std::move(tokenizer);
    }
    return Status::Ok();
  };
  DTC_RETURN_IF_ERROR(agree(world, unlessStopped(checkArguments()), agreed));
  DTC_RETURN_IF_ERROR(agree(world, unlessStopped(checkCheckpointDirectory(o, rank)), agreed));

  const comm::World launched = launcherWorld();
  StatusOr<std::unique_ptr<Backend>> backend = createBackend(o.runtime.device, launched.localRank);
  DTC_RETURN_IF_ERROR(agree(world, unlessStopped(backend.status()), agreed));
  // Creating a pipeline's groups is collective: a failure there ends the job (train()).
  DTC_ASSIGN_OR_RETURN(
      run.ex, Executor::create(plan, threadsFor(o, launched), mesh, std::move(backend).value(),
                               {fn::kTrainStep, "eval"}));
  Executor& ex = *run.ex;
  run.samplesPerStep = plan.root().batch_size() * std::max(1, plan.root().micro_batches());
  run.seed = o.data.seed.value_or(0);
  auto loadState = [&]() -> Status {
    if (stepDir.empty()) {
      DTC_RETURN_IF_ERROR(ex.initializeState());
      if (!o.checkpoint.init.empty())
        DTC_RETURN_IF_ERROR(checkpoint::loadParametersFile(ex, o.checkpoint.init));
      return Status::Ok();
    }
    const checkpoint::Progress& p = index.progress;
    if (o.data.seed.has_value() && p.seed != o.data.seed.value_or(0))
      return Status::InvalidInput("checkpoint " + stepDir + " was trained with --seed " +
                                  std::to_string(static_cast<int64_t>(p.seed)) + ", not " +
                                  std::to_string(static_cast<int64_t>(o.data.seed.value_or(0))) +
                                  " (leave --seed out to continue its order)");
    if (p.samplesPerStep != run.samplesPerStep)
      return Status::InvalidInput(
          "checkpoint " + stepDir + " took " + std::to_string(p.samplesPerStep) +
          " samples per step, " + plan.name() + " takes " + std::to_string(run.samplesPerStep) +
          " (a resumed run keeps the global batch; --init starts a new run)");
    run.seed = p.seed;
    run.done = p.step;
    run.resumedFrom = stepDir;
    const auto begin = std::chrono::steady_clock::now();
    DTC_ASSIGN_OR_RETURN(run.loadedBytes, checkpoint::loadCheckpoint(ex, stepDir, index));
    run.loadSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    return Status::Ok();
  };
  DTC_RETURN_IF_ERROR(agree(world, unlessStopped(loadState()), agreed));
  auto openData = [&]() -> Status {
    if (o.data.steps > run.done) {
      if (o.data.dir.empty()) return Status::InvalidInput("--steps needs --data DIR");
      DTC_ASSIGN_OR_RETURN(run.train, openBatchSource(ex, fn::kTrainStep, o.data.dir, run.seed));
      // A step-0 checkpoint (written before any training) has no stream position yet.
      if (!stepDir.empty() && !(run.done == 0 && index.progress.data.size() == 0))
        DTC_RETURN_IF_ERROR(checkDataPosition(index.progress.data, run.train->position(run.done),
                                              stepDir, o.data.dir));
    }
    if (!o.evaluation.dir.empty()) {
      DTC_ASSIGN_OR_RETURN(run.eval, openBatchSource(ex, "eval", o.evaluation.dir, 0));
      DTC_RETURN_IF_ERROR(checkWholeBatch(*run.eval, "--eval " + o.evaluation.dir, plan));
    }
    if (!o.evaluation.predictDir.empty()) {
      const std::string& path = o.evaluation.dir.empty() ? o.data.dir : o.evaluation.dir;
      DTC_ASSIGN_OR_RETURN(run.predict, openBatchSource(ex, "eval", path, 0));
      DTC_RETURN_IF_ERROR(checkWholeBatch(*run.predict, "--predict's data " + path, plan));
    }
    if (!o.checkpoint.dir.empty()) {
      DTC_ASSIGN_OR_RETURN(run.layout, checkpoint::planCheckpointLayout(plan));
    }
    if (o.sampling.tokens > 0) DTC_RETURN_IF_ERROR(checkCanGenerate(ex, samplingOptions(o, run)));
    return Status::Ok();
  };
  return agree(world, unlessStopped(openData()), agreed);
}

}  // namespace dtc
