#include "train/trainer.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "checkpoint/directory.h"
#include "checkpoint/hf_folder.h"
#include "comm/watchdog.h"
#include "cpu/kernels/blas.h"
#include "exec/executor.h"
#include "io/crc32.h"
#include "io/files.h"
#include "io/mapped_file.h"
#include "planfile/communication.h"
#include "planfile/flops.h"
#include "planfile/function_names.h"
#include "support/fault_points.h"
#include "support/printable.h"
#include "support/stop_signals.h"
#include "train/batch_source.h"
#include "train/checkpoint_manager.h"
#include "train/evaluate.h"
#include "train/generate.h"
#include "train/lr_schedule.h"
#include "train/numerics.h"
#include "train/predict.h"
#include "train/profile_summary.h"
#include "train/progress.h"
#include "train/run_agreement.h"
#include "train/run_log.h"
#include "train/run_peak.h"
#include "train/run_start.h"
#include "train/save_parameters.h"
#include "train/trace.h"

namespace dtc {
namespace {

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

// One run on this rank: started, announced, its steps, then what follows training. Only rank 0
// prints, logs and saves.
class Trainer {
 public:
  Trainer(const Plan& plan, const TrainOptions& o, comm::DeviceMesh* mesh, AgreedFailure& agreed)
      : plan_(plan), o_(o), mesh_(*mesh), agreed_(agreed), lead_(mesh->rank() == 0) {}

  Status run() {
    cpu::setBlasThreads(1);  // our pool parallelises the GEMMs (cpu/kernels/matmul.cc)
    installStopSignalHandlers();
    DTC_RETURN_IF_ERROR(startRun(plan_, o_, &mesh_, run_, agreed_));
    Executor& ex = *run_.ex;
    ex.setTiming(!o_.logging.trace.empty() || o_.logging.profileSummary);
    ex.setCheckNumerics(o_.runtime.checkNumerics);
    DTC_RETURN_IF_ERROR(announce());
    checkpoints_.emplace(o_, run_, mesh_, agreed_, o_.checkpoint.resume.empty() ? -1 : run_.done);
    DTC_RETURN_IF_ERROR(checkpoints_->open());
    DTC_ASSIGN_OR_RETURN(
        RunLog log, RunLog::open(o_, lead_, run_.done + 1, o_.data.steps > run_.done || run_.eval));
    log_.emplace(std::move(log));
    evaluator_.emplace(ex, run_.eval.get(), *log_, lead_, o_.evaluation.batches);
    if (o_.data.steps > run_.done) {
      DTC_RETURN_IF_ERROR(trainSteps());
    } else if (lead_ && o_.data.steps > 0) {
      std::printf("nothing to train: the run is at step %lld of %lld\n", (long long)run_.done,
                  (long long)o_.data.steps);
    }
    return finish();
  }

 private:
  // The plan's line, and where a resumed run starts.
  Status announce() {
    Executor& ex = *run_.ex;
    const plan::Plan& root = plan_.root();
    // Memory is rank 0's (a pipeline's stages differ).
    const std::string pipeline = root.schedule() && root.schedule()->size()
                                     ? ", pipeline " + root.schedule()->str()
                                     : std::string();
    const std::string microBatches = root.micro_batches() > 1
                                         ? " (" + std::to_string(root.micro_batches()) +
                                               " micro-batches of " +
                                               std::to_string(root.batch_size()) + ")"
                                         : std::string();
    if (lead_) {
      // Every byte the run holds for the plan: `dtc inspect`'s per-rank total on the device the
      // plan was compiled for, where every step's scratch is planned.
      const Executor::Memory memory = ex.memory();
      const std::string beyond =
          memory.unplanned ? " + " + std::to_string(memory.unplanned) + " beyond the plan" : "";
      std::printf(
          "plan %s: batch %lld%s, %s; memory: %llu bytes allocated (state %llu + arena %llu%s), "
          "%d threads%s\n",
          plan_.name().c_str(), (long long)run_.samplesPerStep, microBatches.c_str(),
          root.optimizer() ? root.optimizer()->c_str() : "", (unsigned long long)memory.total(),
          (unsigned long long)memory.state, (unsigned long long)memory.arena, beyond.c_str(),
          ex.pool().size(), pipeline.c_str());
    }
    if (run_.resumedFrom.empty()) return Status::Ok();
    // Read throughput over the job: every rank's bytes, the slowest rank's time.
    float stats[2] = {static_cast<float>(run_.loadedBytes / 1e6),
                      static_cast<float>(-run_.loadSeconds)};
    comm::Communicator& world = mesh_.world();
    if (world.size() > 1) {
      DTC_RETURN_IF_ERROR(world.allReduceSum(&stats[0], 1));
      DTC_RETURN_IF_ERROR(world.allReduceMax(&stats[1], 1));
    }
    if (lead_)
      std::printf("resumed at step %lld from %s (%.3f GB read by %d rank%s in %.2f s: %.2f GB/s)\n",
                  (long long)run_.done, run_.resumedFrom.c_str(), stats[0] / 1e3, world.size(),
                  world.size() > 1 ? "s" : "", -stats[1],
                  stats[0] / 1e3 / std::max(-stats[1], 1e-9f));
    return Status::Ok();
  }

  // The steps from the one after the run's start to --steps, with evaluations and checkpoints
  // where they are due; a signal or a non-finite step ends them (every rank after the same one).
  Status trainSteps() {
    Executor& ex = *run_.ex;
    const plan::Function& f = *ex.function(fn::kTrainStep);  // openBatchSource found it
    DTC_ASSIGN_OR_RETURN(uint32_t lossIndex, lossOf(ex, f));
    const StepScalars scalars = stepScalars(plan_, f);
    DTC_ASSIGN_OR_RETURN(Progress progress, progressFor(ex, mesh_, o_, run_));
    RunPeak peak(plan_, f, !ex.backend().kind().gpu, run_.done + 1, o_.data.steps);
    // fp16: a step whose update the loss scale skipped lowers the scale.
    const bool lossScaled = plan_.stateTensor("loss_scale", ex.stage()) != nullptr;
    float scale = 0;
    if (lossScaled) {
      DTC_ASSIGN_OR_RETURN(scale, ex.readScalarState("loss_scale"));
    }
    int64_t skippedInARow = 0;
    for (int64_t step = run_.done + 1; step <= o_.data.steps; ++step) {
      comm::setPhase("step " + std::to_string(step));
      auto begin = std::chrono::steady_clock::now();
      DTC_RETURN_IF_ERROR(io::checkMappedFiles());  // the data files are what they were at step 1
      run_.train->fillTraining(step - 1);
      StepNumbers numbers;
      numbers.lr = scalars.lr != UINT32_MAX ? learningRate(scalars.schedule, step - 1) : 0.0;
      if (scalars.lr != UINT32_MAX)
        *ex.view(fn::kTrainStep, scalars.lr).f32() = static_cast<float>(numbers.lr);
      if (scalars.rng != UINT32_MAX) {
        // Step s (from 0) draws its masks from (seed, s) on every layout: a resumed run draws
        // what the uninterrupted one would have.
        int64_t* rng = ex.view(fn::kTrainStep, scalars.rng).i64();
        rng[0] = static_cast<int64_t>(run_.seed);
        rng[1] = step - 1;
      }
      peak.before(ex, step);
      if (Status ran = ex.run(fn::kTrainStep); !ran.ok())
        return ran.code() == StatusCode::kNonFinite
                   ? ran.withContext("step " + std::to_string(step))
                   : ran;
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      DTC_RETURN_IF_ERROR(peak.after(ex, mesh_.world(), step, progress, lead_));
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
      DTC_RETURN_IF_ERROR(log_->step(step, numbers, progress, skippedInARow, seconds));
      faultPoint("after-step", mesh_.rank());
      // A skipped step's overflow is the loss scale's business; any other inf or NaN ends the run.
      const bool nonFinite =
          !numbers.skipped && ((holdsLoss && !std::isfinite(numbers.loss)) ||
                               (numbers.hasGradNorm && !std::isfinite(numbers.gradNorm)));
      DTC_ASSIGN_OR_RETURN(
          StepHealth health,
          agreeOnStep(mesh_.world(), nonFinite, skippedInARow >= o_.runtime.maxSkippedSteps,
                      checkpoints_->writing()));
      // Every rank's file of the checkpoint in flight is synced: it is published now.
      if (!health.writing) DTC_RETURN_IF_ERROR(checkpoints_->finishWrite(false));
      if (health.nonFinite || health.tooManySkips) {
        // The checkpoint in flight holds an earlier, finite state: it is kept.
        DTC_RETURN_IF_ERROR(checkpoints_->finishWrite(true));
        agreed_.agreed = true;  // every rank stops here
        return divergence(step, numbers, health, o_, checkpoints_->last(), scale);
      }
      const int signal = health.signal;
      if (o_.evaluation.every > 0 && step % o_.evaluation.every == 0)
        DTC_RETURN_IF_ERROR(evaluator_->at(step, true));
      if ((o_.checkpoint.every > 0 && step % o_.checkpoint.every == 0) || step == o_.data.steps ||
          signal)
        DTC_RETURN_IF_ERROR(checkpoints_->writeAt(step, step != o_.data.steps && !signal));
      if (signal) {
        std::fflush(stdout);
        std::string saved = o_.checkpoint.dir.empty() ? " (no --checkpoint: the state is not saved)"
                                                      : "; checkpoint " + o_.checkpoint.dir + "/" +
                                                            checkpoint::stepDirectoryName(step);
        return Status::Stopped(std::string("stopped by ") + stopSignalName(signal) +
                                   " after step " + std::to_string(step) + saved,
                               signal);
      }
    }
    return Status::Ok();
  }

  // After the last step: the final checkpoint and evaluation, then what training made (saved
  // first: what follows reads it), a sample, predictions, the trace and the summaries.
  Status finish() {
    Executor& ex = *run_.ex;
    comm::setPhase("after the last step");
    // A run that trained nothing still leaves the state it holds (the initial one: step-0).
    const int64_t last = std::max(run_.done, o_.data.steps);
    DTC_RETURN_IF_ERROR(checkpoints_->writeAt(last, false));
    DTC_RETURN_IF_ERROR(evaluator_->at(last, false));
    if (!o_.save.dir.empty()) {
      comm::setPhase("saving the parameters");
      DTC_RETURN_IF_ERROR(checkFiniteState(ex, mesh_.world(), "--save " + o_.save.dir, agreed_));
      const bool hf = o_.save.format == "hf";
      DTC_RETURN_IF_ERROR(
          saveParameters(ex, o_.save.dir, lead_, {o_.save.maxShardBytes, run_.saveDtype, hf}));
      if (hf && lead_) {
        const flatbuffers::String* config = ex.plan().root().hf_config();
        const flatbuffers::String* generation = ex.plan().root().hf_generation_config();
        DTC_RETURN_IF_ERROR(checkpoint::writeHfConfig(config ? config->str() : "",
                                                      generation ? generation->str() : "",
                                                      torchDtypeName(run_.saveDtype), o_.save.dir));
      }
    }
    if (o_.sampling.tokens > 0 && lead_) {
      DTC_ASSIGN_OR_RETURN(std::string text, generate(ex, o_.sampling.prompt, o_.sampling.tokens,
                                                      samplingOptions(o_, run_)));
      std::printf("sample: %s\n", terminalText(text).c_str());
    }
    if (run_.predict) {
      comm::setPhase("predicting");
      DTC_RETURN_IF_ERROR(predict(ex, *run_.predict, o_.evaluation.predictDir));
    }
    if (!o_.logging.trace.empty()) DTC_RETURN_IF_ERROR(writeTrace(ex, mesh_, o_.logging.trace));
    if (o_.logging.profileSummary && lead_) std::printf("%s", profileSummary(ex).c_str());
    return reportMemory(ex, mesh_.world(), lead_, checkpoints_->hostBytes());
  }

  const Plan& plan_;
  const TrainOptions& o_;
  comm::DeviceMesh& mesh_;
  AgreedFailure& agreed_;
  const bool lead_;
  // Declared before its parts, which refer to it, so that it is destroyed after them (and its
  // background writer first of what it holds).
  RunState run_;
  std::optional<CheckpointManager> checkpoints_;
  std::optional<RunLog> log_;
  std::optional<Evaluator> evaluator_;
};

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
  Status status = Trainer(plan, options, mesh.get(), agreed).run();
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
