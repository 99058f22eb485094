#include "train/trainer.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "checkpoint/async_writer.h"
#include "checkpoint/directory.h"
#include "checkpoint/hf_folder.h"
#include "checkpoint/layout.h"
#include "checkpoint/parameters_file.h"
#include "checkpoint/reader.h"
#include "checkpoint/writer.h"
#include "comm/watchdog.h"
#include "comm/world.h"
#include "cpu/kernels/blas.h"
#include "exec/executor.h"
#include "io/crc32.h"
#include "io/files.h"
#include "io/mapped_file.h"
#include "plan/communication.h"
#include "plan/flops.h"
#include "plan/function_names.h"
#include "support/fault_points.h"
#include "support/printable.h"
#include "support/runtime_options.h"
#include "support/stop_signals.h"
#include "train/batch_source.h"
#include "train/evaluate.h"
#include "train/generate.h"
#include "train/lr_schedule.h"
#include "train/numerics.h"
#include "train/output_room.h"
#include "train/predict.h"
#include "train/profile_summary.h"
#include "train/progress.h"
#include "train/run_agreement.h"
#include "train/run_peak.h"
#include "train/save_parameters.h"
#include "train/tensorboard.h"
#include "train/trace.h"
#include "train/training_log.h"

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
SamplingOptions sampling(const TrainOptions& o, const RunState& run) {
  return {o.sampling.temperature, o.sampling.topK, o.data.seed.value_or(1337),
          run.tokenizer ? &*run.tokenizer : nullptr, o.sampling.tokenizer == "bytes"};
}

// A stop asked for while the run starts (reading a checkpoint, opening data): the run ends at
// the end of the phase, not after its first step.
Status unlessStopped(Status phase) {
  const int signal = stopSignalReceived();
  if (!phase.ok() || signal == 0) return phase;
  return Status::Stopped(
      std::string("stopped by ") + stopSignalName(signal) + " before the first step", signal);
}

// Everything that can fail before step 1: outputs, inputs, the starting state. In phases, each
// ending when every rank knows whether all succeeded, so that no rank waits in a collective
// for one that failed.
Status start(const Plan& plan, const TrainOptions& o, comm::DeviceMesh* mesh, RunState& run,
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
    if (o.sampling.tokens > 0) DTC_RETURN_IF_ERROR(checkCanGenerate(ex, sampling(o, run)));
    return Status::Ok();
  };
  return agree(world, unlessStopped(openData()), agreed);
}

// The scalars the trainer exchanges with this rank's step: the learning rate it sets (a plan
// without one has a fixed rate in its kernels) and the gradient norm it reads (if reported).
struct StepScalars {
  uint32_t lr = UINT32_MAX, gradNorm = UINT32_MAX;
  uint32_t rng = UINT32_MAX;  // dropout's (seed, step), where the step draws masks
  LrSchedule schedule;
};

// (Plan::verify checked the bindings: "lr" and "rng" are the only settings, and "lr" has a
// schedule.)
StepScalars stepScalars(const Plan& plan, const plan::Function& f) {
  StepScalars out;
  for (const plan::Binding* b : *f.arguments())
    if (b->role() == plan::Role::hyper) (b->name()->str() == "rng" ? out.rng : out.lr) = b->value();
  out.schedule = lrScheduleOf(plan);
  out.gradNorm = resultIndex(f, plan::Role::metric, "grad_norm");
  return out;
}

// Tokens per sample of a sequence model (an int64 [batch, T] data input), else 1.
int64_t tokensPerSample(const plan::Function& f) {
  for (const plan::Binding* b : *f.arguments()) {
    const plan::Value& v = *f.values()->Get(b->value());
    if (b->role() == plan::Role::data && v.dtype() == plan::DType::i64 && v.shape() &&
        v.shape()->size() == 2)
      return v.shape()->Get(1);
  }
  return 1;
}

// The progress line's model: every rank's contraction FLOPs, summed once; the peak follows from
// the first steps (train/run_peak.h).
StatusOr<Progress> progressFor(Executor& ex, comm::DeviceMesh& mesh, const TrainOptions& o,
                               const RunState& run) {
  const plan::Function& f = *ex.function(fn::kTrainStep);
  float flops = static_cast<float>(contractionFlops(f) / 1e9);
  if (mesh.world().size() > 1) DTC_RETURN_IF_ERROR(mesh.world().allReduceSum(&flops, 1));
  return Progress(o.data.steps, run.done + 1, run.samplesPerStep, tokensPerSample(f), flops * 1e9,
                  0);
}

// What a checkpoint of `step` records besides the state.
checkpoint::CheckpointRequest checkpointRequest(const RunState& run, const TrainOptions& o,
                                                int64_t step) {
  checkpoint::CheckpointRequest request;
  request.dir = o.checkpoint.dir;
  request.keep = o.checkpoint.keep;
  request.progress.step = step;
  request.progress.seed = run.seed;
  request.progress.samplesPerStep = run.samplesPerStep;
  // A run that trained no step (resumed at its end) still records its stream's position.
  request.progress.data = run.train ? run.train->position(step) : io::Json::object();
  return request;
}

// Rank 0's line for a published checkpoint.
void printWritten(const checkpoint::WrittenCheckpoint& w, bool background) {
  std::printf(
      "checkpoint: %s (%.3f GB in %d file%s, %s%.2f s: %.2f GB/s; slowest rank %.3f GB in %.2f "
      "s)\n",
      w.dir.c_str(), w.bytes / 1e9, w.files, w.files == 1 ? "" : "s",
      background ? "written in the background over " : "", w.seconds,
      w.bytes / 1e9 / std::max(w.seconds, 1e-9), w.slowestBytes / 1e9, w.slowestSeconds);
}

// A step's numbers as TensorBoard scalars, as the progress line reports them.
Status writeScalars(TensorBoardWriter& board, int64_t step, const StepNumbers& n,
                    const Progress& progress, double seconds) {
  DTC_RETURN_IF_ERROR(board.scalar("train/loss", step, n.loss));
  DTC_RETURN_IF_ERROR(board.scalar("train/lr", step, n.lr));
  if (n.hasGradNorm) DTC_RETURN_IF_ERROR(board.scalar("train/grad_norm", step, n.gradNorm));
  DTC_RETURN_IF_ERROR(board.scalar(std::string("train/") + progress.throughputName(), step,
                                   progress.throughput(seconds)));
  if (progress.utilisation(seconds) >= 0)
    DTC_RETURN_IF_ERROR(board.scalar("train/mfu", step, progress.utilisation(seconds)));
  return board.flush();
}

// Why the run stops at `step`, and what is kept.
Status divergence(int64_t step, const StepNumbers& n, const StepHealth& health,
                  const TrainOptions& o, int64_t lastCheckpoint, float scale) {
  char numbers[160];
  std::snprintf(numbers, sizeof numbers, "loss %g, lr %.4g", n.loss, n.lr);
  std::string what = numbers;
  if (n.hasGradNorm) what += ", gradient norm " + std::to_string(n.gradNorm);
  std::string kept = lastCheckpoint >= 0 && !o.checkpoint.dir.empty()
                         ? "; the last checkpoint, " +
                               checkpoint::stepDirectoryName(lastCheckpoint) + ", is intact"
                         : std::string();
  if (health.tooManySkips && !health.nonFinite) {
    char text[96];
    std::snprintf(text, sizeof text, " (loss scale now %g)", scale);
    return Status::NonFinite(
        "step " + std::to_string(step) + ": " + std::to_string(o.runtime.maxSkippedSteps) +
        " steps in a row skipped by the fp16 loss scale: the gradients overflow at every scale" +
        text + " (--max-skipped-steps; try bf16)" + kept);
  }
  return Status::NonFinite(
      "step " + std::to_string(step) + ": the loss or the gradient norm is not finite (" + what +
      "): training stops, nothing of this step is saved" + kept +
      " (a learning rate too high, or inf/NaN in the data? --check-numerics names the first op)");
}

// What the run held, at its end: the bytes allocated for the plan (state, arena, anything
// beyond it) and the process's peak resident set, rank 0's and the largest over the ranks.
Status reportMemory(const Executor& ex, comm::Communicator& world, bool lead,
                    uint64_t snapshotBytes) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const Executor::Memory memory = ex.memory();
  const float mib = 1024.f * 1024.f;
  const float mine[2] = {static_cast<float>(memory.total()) / mib,
                         static_cast<float>(usage.ru_maxrss) * 1024.f / mib};  // KiB on Linux
  float most[2] = {mine[0], mine[1]};
  if (world.size() > 1) DTC_RETURN_IF_ERROR(world.allReduceMax(most, 2));
  if (!lead) return Status::Ok();
  std::printf(
      "memory: %llu bytes allocated (state %llu + arena %llu + beyond the plan %llu), peak "
      "resident %.1f MiB",
      (unsigned long long)memory.total(), (unsigned long long)memory.state,
      (unsigned long long)memory.arena, (unsigned long long)memory.unplanned, mine[1]);
  if (snapshotBytes > 0)
    std::printf("; checkpoint snapshot %llu bytes of host memory",
                (unsigned long long)snapshotBytes);
  if (world.size() > 1)
    std::printf("; the largest rank: allocated %.1f MiB, peak resident %.1f MiB", most[0], most[1]);
  std::printf("\n");
  return Status::Ok();
}

Status trainOnMesh(const Plan& plan, const TrainOptions& o, comm::DeviceMesh* mesh,
                   AgreedFailure& agreed) {
  cpu::setBlasThreads(1);               // our pool parallelises the GEMMs (cpu/kernels/matmul.cc)
  const bool lead = mesh->rank() == 0;  // only rank 0 prints, logs and saves
  installStopSignalHandlers();
  RunState run;
  DTC_RETURN_IF_ERROR(start(plan, o, mesh, run, agreed));
  Executor& ex = *run.ex;
  ex.setTiming(!o.logging.trace.empty() || o.logging.profileSummary);
  ex.setCheckNumerics(o.runtime.checkNumerics);
  const plan::Plan& root = plan.root();
  // Memory is rank 0's (a pipeline's stages differ).
  const std::string pipeline = root.schedule() && root.schedule()->size()
                                   ? ", pipeline " + root.schedule()->str()
                                   : std::string();
  const std::string microBatches =
      root.micro_batches() > 1 ? " (" + std::to_string(root.micro_batches()) +
                                     " micro-batches of " + std::to_string(root.batch_size()) + ")"
                               : std::string();
  if (lead) {
    // Every byte the run holds for the plan: `dtc inspect`'s per-rank total on the device the
    // plan was compiled for, where every step's scratch is planned.
    const Executor::Memory memory = ex.memory();
    const std::string beyond =
        memory.unplanned ? " + " + std::to_string(memory.unplanned) + " beyond the plan" : "";
    std::printf(
        "plan %s: batch %lld%s, %s; memory: %llu bytes allocated (state %llu + arena %llu%s), "
        "%d threads%s\n",
        plan.name().c_str(), (long long)run.samplesPerStep, microBatches.c_str(),
        root.optimizer() ? root.optimizer()->c_str() : "", (unsigned long long)memory.total(),
        (unsigned long long)memory.state, (unsigned long long)memory.arena, beyond.c_str(),
        ex.pool().size(), pipeline.c_str());
  }
  if (!run.resumedFrom.empty()) {
    // Read throughput over the job: every rank's bytes, the slowest rank's time.
    float stats[2] = {static_cast<float>(run.loadedBytes / 1e6),
                      static_cast<float>(-run.loadSeconds)};
    comm::Communicator& world = mesh->world();
    if (world.size() > 1) {
      DTC_RETURN_IF_ERROR(world.allReduceSum(&stats[0], 1));
      DTC_RETURN_IF_ERROR(world.allReduceMax(&stats[1], 1));
    }
    if (lead)
      std::printf("resumed at step %lld from %s (%.3f GB read by %d rank%s in %.2f s: %.2f GB/s)\n",
                  (long long)run.done, run.resumedFrom.c_str(), stats[0] / 1e3, world.size(),
                  world.size() > 1 ? "s" : "", -stats[1],
                  stats[0] / 1e3 / std::max(-stats[1], 1e-9f));
  }

  int64_t lastCheckpoint = o.checkpoint.resume.empty() ? -1 : run.done;
  if (!o.checkpoint.dir.empty() && o.checkpoint.async) {
    StatusOr<std::unique_ptr<checkpoint::AsyncCheckpointWriter>> writer =
        checkpoint::AsyncCheckpointWriter::create(
            run.layout, ex, mesh->rank(),
            runtimeOptions().snapshotCopy == RuntimeOptions::SnapshotCopy::kBackground);
    DTC_RETURN_IF_ERROR(agree(mesh->world(), writer.status(), agreed));
    run.async = std::move(writer).value();
  }
  // Collective: the background write in flight (if any), published once every rank's file is
  // synced. `waiting`: training waits for it (the next checkpoint is due).
  auto finishWrite = [&](bool waiting) -> Status {
    if (!run.async || !run.async->inFlight()) return Status::Ok();
    const int64_t step = run.async->step();
    if (waiting && lead && !run.async->locallyDone())
      std::printf("checkpoint: waiting for the write of step %lld, still in flight\n",
                  (long long)step);
    comm::setPhase("publishing the checkpoint of step " + std::to_string(step));
    StatusOr<checkpoint::WrittenCheckpoint> written = run.async->finish(mesh->world());
    agreed.agreed = !written.ok();
    DTC_RETURN_IF_ERROR(written.status());
    lastCheckpoint = step;
    if (lead) printWritten(*written, true);
    return Status::Ok();
  };
  // `background`: with --checkpoint-async, snapshot and write while training goes on.
  auto checkpointAt = [&](int64_t step, bool background) -> Status {
    DTC_RETURN_IF_ERROR(finishWrite(true));
    if (o.checkpoint.dir.empty() || step == lastCheckpoint) return Status::Ok();
    comm::setPhase("checkpoint at step " + std::to_string(step));
    const std::string what = "checkpoint step-" + std::to_string(step);
    if (background && run.async) {
      // The snapshot checks what it copies: the state is read once.
      StatusOr<double> snapshot = run.async->takeSnapshot(what);
      DTC_RETURN_IF_ERROR(agree(mesh->world(), snapshot.status(), agreed));
      Status started = run.async->startWrite(mesh->world(), checkpointRequest(run, o, step));
      agreed.agreed = !started.ok();
      DTC_RETURN_IF_ERROR(started);
      if (lead)
        std::printf(
            "checkpoint: step %lld: training waited %.3f s for its snapshot, written in the "
            "background\n",
            (long long)step, *snapshot);
      return Status::Ok();
    }
    DTC_RETURN_IF_ERROR(checkFiniteState(ex, mesh->world(), what, agreed));
    StatusOr<checkpoint::WrittenCheckpoint> written =
        checkpoint::writeCheckpoint(ex, mesh->world(), run.layout, checkpointRequest(run, o, step));
    // Every rank has the writer's verdict: a failure ends the job in order.
    agreed.agreed = !written.ok();
    DTC_RETURN_IF_ERROR(written.status());
    lastCheckpoint = step;
    if (lead) printWritten(*written, false);
    return Status::Ok();
  };
  std::unique_ptr<TrainingLog> log;
  if (!o.logging.log.empty() && lead && (o.data.steps > run.done || run.eval)) {
    DTC_ASSIGN_OR_RETURN(log, TrainingLog::open(o.logging.log, run.done + 1));
  }
  std::unique_ptr<TensorBoardWriter> board;
  if (!o.logging.tensorboard.empty() && lead) {
    DTC_ASSIGN_OR_RETURN(board, TensorBoardWriter::open(o.logging.tensorboard));
  }
  int64_t lastEvaluated = -1;
  auto evaluateAt = [&](int64_t step, bool periodic) -> Status {
    if (!run.eval || step == lastEvaluated) return Status::Ok();
    std::string prefix = periodic ? "step " + std::to_string(step) + ": eval" : std::string("eval");
    comm::setPhase("evaluation after step " + std::to_string(step));
    DTC_ASSIGN_OR_RETURN(Evaluation e, evaluate(ex, *run.eval, lead, o.evaluation.batches, prefix));
    lastEvaluated = step;
    if (log) DTC_RETURN_IF_ERROR(log->evaluation(step, e.loss));
    if (board) {
      DTC_RETURN_IF_ERROR(board->scalar("eval/loss", step, e.loss));
      DTC_RETURN_IF_ERROR(board->flush());
    }
    return Status::Ok();
  };
  if (o.data.steps > run.done) {
    const plan::Function& f = *ex.function(fn::kTrainStep);  // openBatchSource found it
    DTC_ASSIGN_OR_RETURN(uint32_t lossIndex, lossOf(ex, f));
    const StepScalars scalars = stepScalars(plan, f);
    DTC_ASSIGN_OR_RETURN(Progress progress, progressFor(ex, *mesh, o, run));
    RunPeak peak(plan, f, o.runtime.device == "cpu", run.done + 1, o.data.steps);
    // fp16: a step whose update the loss scale skipped lowers the scale.
    const bool lossScaled = plan.stateTensor("loss_scale", ex.stage()) != nullptr;
    float scale = 0;
    if (lossScaled) {
      DTC_ASSIGN_OR_RETURN(scale, ex.readScalarState("loss_scale"));
    }
    int64_t skippedInARow = 0;
    for (int64_t step = run.done + 1; step <= o.data.steps; ++step) {
      comm::setPhase("step " + std::to_string(step));
      auto begin = std::chrono::steady_clock::now();
      DTC_RETURN_IF_ERROR(io::checkMappedFiles());  // the data files are what they were at step 1
      run.train->fillTraining(step - 1);
      StepNumbers numbers;
      numbers.lr = scalars.lr != UINT32_MAX ? learningRate(scalars.schedule, step - 1) : 0.0;
      if (scalars.lr != UINT32_MAX)
        *ex.view(fn::kTrainStep, scalars.lr).f32() = static_cast<float>(numbers.lr);
      if (scalars.rng != UINT32_MAX) {
        // Step s (from 0) draws its masks from (seed, s) on every layout: a resumed run draws
        // what the uninterrupted one would have.
        int64_t* rng = ex.view(fn::kTrainStep, scalars.rng).i64();
        rng[0] = static_cast<int64_t>(run.seed);
        rng[1] = step - 1;
      }
      peak.before(ex, step);
      if (Status ran = ex.run(fn::kTrainStep); !ran.ok())
        return ran.code() == StatusCode::kNonFinite
                   ? ran.withContext("step " + std::to_string(step))
                   : ran;
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      DTC_RETURN_IF_ERROR(peak.after(ex, mesh->world(), step, progress, lead));
      const bool holdsLoss = lossIndex != UINT32_MAX;
      numbers.loss = holdsLoss ? *ex.view(fn::kTrainStep, lossIndex).f32() : 0.0f;
      numbers.hasGradNorm = scalars.gradNorm != UINT32_MAX;
      if (numbers.hasGradNorm) numbers.gradNorm = *ex.view(fn::kTrainStep, scalars.gradNorm).f32();
      if (lossScaled) {
        DTC_ASSIGN_OR_RETURN(float next, ex.readScalarState("loss_scale"));
        numbers.skipped = next < scale;
        scale = next;
      }
      skippedInARow = numbers.skipped ? skippedInARow + 1 : 0;
      if (lead) {
        std::printf("%s\n", progress.line(step, numbers, skippedInARow, seconds).c_str());
        std::fflush(stdout);
      }
      if (log) DTC_RETURN_IF_ERROR(log->step(step, numbers, progress.samplesPerSecond(seconds)));
      if (board) DTC_RETURN_IF_ERROR(writeScalars(*board, step, numbers, progress, seconds));
      faultPoint("after-step", mesh->rank());
      // A skipped step's overflow is the loss scale's business; any other inf or NaN ends the run.
      const bool nonFinite =
          !numbers.skipped && ((holdsLoss && !std::isfinite(numbers.loss)) ||
                               (numbers.hasGradNorm && !std::isfinite(numbers.gradNorm)));
      const bool writing = run.async && run.async->inFlight() && !run.async->locallyDone();
      DTC_ASSIGN_OR_RETURN(StepHealth health,
                           agreeOnStep(mesh->world(), nonFinite,
                                       skippedInARow >= o.runtime.maxSkippedSteps, writing));
      // Every rank's file of the checkpoint in flight is synced: it is published now.
      if (!health.writing) DTC_RETURN_IF_ERROR(finishWrite(false));
      if (health.nonFinite || health.tooManySkips) {
        // The checkpoint in flight holds an earlier, finite state: it is kept.
        DTC_RETURN_IF_ERROR(finishWrite(true));
        agreed.agreed = true;  // every rank stops here
        return divergence(step, numbers, health, o, lastCheckpoint, scale);
      }
      const int signal = health.signal;
      if (o.evaluation.every > 0 && step % o.evaluation.every == 0)
        DTC_RETURN_IF_ERROR(evaluateAt(step, true));
      if ((o.checkpoint.every > 0 && step % o.checkpoint.every == 0) || step == o.data.steps ||
          signal)
        DTC_RETURN_IF_ERROR(checkpointAt(step, step != o.data.steps && !signal));
      if (signal) {
        std::fflush(stdout);
        std::string saved = o.checkpoint.dir.empty() ? " (no --checkpoint: the state is not saved)"
                                                     : "; checkpoint " + o.checkpoint.dir + "/" +
                                                           checkpoint::stepDirectoryName(step);
        return Status::Stopped(std::string("stopped by ") + stopSignalName(signal) +
                                   " after step " + std::to_string(step) + saved,
                               signal);
      }
    }
  } else if (lead && o.data.steps > 0) {
    std::printf("nothing to train: the run is at step %lld of %lld\n", (long long)run.done,
                (long long)o.data.steps);
  }
  comm::setPhase("after the last step");
  // A run that trained nothing still leaves the state it holds (the initial one: step-0).
  DTC_RETURN_IF_ERROR(checkpointAt(std::max(run.done, o.data.steps), false));
  DTC_RETURN_IF_ERROR(evaluateAt(std::max(run.done, o.data.steps), false));
  // What training made is saved first: what follows reads it.
  if (!o.save.dir.empty()) {
    comm::setPhase("saving the parameters");
    DTC_RETURN_IF_ERROR(checkFiniteState(ex, mesh->world(), "--save " + o.save.dir, agreed));
    DTC_RETURN_IF_ERROR(saveParameters(
        ex, o.save.dir, lead, {o.save.maxShardBytes, run.saveDtype, (o.save.format == "hf")}));
    if ((o.save.format == "hf") && lead) {
      const flatbuffers::String* config = ex.plan().root().hf_config();
      const flatbuffers::String* generation = ex.plan().root().hf_generation_config();
      DTC_RETURN_IF_ERROR(checkpoint::writeHfConfig(config ? config->str() : "",
                                                    generation ? generation->str() : "",
                                                    torchDtypeName(run.saveDtype), o.save.dir));
    }
  }
  if (o.sampling.tokens > 0 && lead) {
    DTC_ASSIGN_OR_RETURN(std::string text,
                         generate(ex, o.sampling.prompt, o.sampling.tokens, sampling(o, run)));
    std::printf("sample: %s\n", terminalText(text).c_str());
  }
  if (run.predict) {
    comm::setPhase("predicting");
    DTC_RETURN_IF_ERROR(predict(ex, *run.predict, o.evaluation.predictDir));
  }
  if (!o.logging.trace.empty()) DTC_RETURN_IF_ERROR(writeTrace(ex, *mesh, o.logging.trace));
  if (o.logging.profileSummary && lead) std::printf("%s", profileSummary(ex).c_str());
  return reportMemory(ex, mesh->world(), lead, run.async ? run.async->hostBytes() : 0);
}

StatusOr<std::unique_ptr<comm::DeviceMesh>> meshFor(const Plan& plan,
                                                    std::unique_ptr<comm::Communicator> world) {
  DTC_RETURN_IF_ERROR(checkWorldSize(plan, world->size(), "the launcher"));
  std::vector<std::string> names;
  if (const auto* mesh = plan.root().mesh())
    for (const plan::MeshAxis* axis : *mesh) names.push_back(axis->name()->str());
  return comm::DeviceMesh::create(std::move(world), names, meshSizes(plan));
}

}  // namespace

std::vector<RunField> runFields(const Plan& plan, const TrainOptions& o) {
  const std::string mesh = meshText(plan);
  char planText[96];
  std::snprintf(planText, sizeof planText, "%llu bytes, crc32 %08x",
                static_cast<unsigned long long>(plan.bytes().size()),
                io::crc32(0, plan.bytes().data(), plan.bytes().size()));
  std::vector<RunField> fields = {{"the plan", "batch " + std::to_string(plan.root().batch_size()) +
                                                   (mesh.empty() ? "" : ", mesh " + mesh) + ", " +
                                                   planText}};
  for (RunField& f : agreedFlags(o)) fields.push_back(std::move(f));
  return fields;
}

Status checkWorldSize(const Plan& plan, int processes, const std::string& launcher) {
  const std::string text = meshText(plan);
  const int64_t devices = meshDevices(plan);
  if (devices == processes) return Status::Ok();
  if (text.empty())
    return Status::InvalidInput(plan.name() + " runs on one process, but " + launcher +
                                " started " + std::to_string(processes) +
                                " (partition it with dtc compile --mesh)");
  std::string what = plan.name() + " is partitioned for " + std::to_string(devices) +
                     " devices (mesh " + text + ")";
  if (processes == 1)
    return Status::InvalidInput(what + "; launch one process per device (mpirun -np " +
                                std::to_string(devices) + " dtrun ...)");
  return Status::InvalidInput(what + ", but " + launcher + " started " + std::to_string(processes) +
                              " processes");
}

int reportFailure(const Status& status) {
  const char* kind = status.code() == StatusCode::kStopped ? "" : "error: ";
  std::fprintf(stderr, "dtrun: %s%s\n", kind, status.message().c_str());
  std::fflush(stderr);
  return status.exitCode();
}

int reportAgreedFailure(comm::Communicator& world, const Status& status) {
  if (world.rank() == 0) reportFailure(status);
  float done = 0;
  (void)world.allReduceSum(&done, 1);
  return status.exitCode();
}

Status train(const Plan& plan, const TrainOptions& options,
             std::unique_ptr<comm::Communicator> world) {
  // Every rank fails the same way here: the caller reports it once.
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<comm::DeviceMesh> mesh, meshFor(plan, std::move(world)));
  AgreedFailure agreed;
  Status status = trainOnMesh(plan, options, mesh.get(), agreed);
  if (status.ok() || mesh->numDevices() == 1) return status;
  if (status.code() == StatusCode::kStopped || agreed.agreed) {
    // Every rank stopped after the same step, or knows of the failure.
    reportAgreedFailure(mesh->world(), status);
    return status;
  }
  // Any other failure may leave ranks waiting in a collective for this one: say why, then end
  // the job.
  reportFailure(mesh->rank() == 0 ? status
                                  : status.withContext("rank " + std::to_string(mesh->rank())));
  mesh->world().abortJob(status.exitCode());
  return status;  // not reached
}

}  // namespace dtc
