#include "exec/trainer.h"

#include "comm/world.h"

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>

#include "comm/world.h"
#include "cpu/blas.h"
#include "exec/batch_source.h"
#include "exec/executor.h"
#include "exec/generate.h"
#include "exec/shard_layout.h"
#include "exec/trace.h"
#include "plan/communication.h"
#include "io/safetensors.h"

namespace dtc {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

uint32_t resultIndex(const plan::Function& f, plan::Role role, const std::string& name = "") {
  for (const plan::Binding* b : *f.results())
    if (b->role() == role && (name.empty() || b->name()->str() == name)) return b->value();
  return kNone;
}

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// The mesh axes that split data input `name`'s samples in the functions called `function`
// (whichever pipeline stage reads it; empty: not split).
std::vector<int> batchAxes(const Plan& plan, const std::string& function, const std::string& name) {
  for (const plan::Function* f : *plan.root().functions()) {
    if (f->name()->str() != function) continue;
    for (const plan::Binding* b : *f->arguments())
      if (b->role() == plan::Role::data && b->name()->str() == name && b->sharding() &&
          b->sharding()->size() && b->sharding()->Get(0)->axes())
        return {b->sharding()->Get(0)->axes()->begin(), b->sharding()->Get(0)->axes()->end()};
  }
  return {};
}

// The loss of `f`, which this rank runs. A pipeline returns it from its first stage (the
// compiler sends it there); the other stages' functions return none.
StatusOr<uint32_t> lossOf(const Executor& ex, const plan::Function& f) {
  uint32_t index = resultIndex(f, plan::Role::loss);
  if (index == kNone && ex.stage() <= 0)
    return Status::InvalidInput(ex.plan().name() + ": " + f.name()->str() + " returns no loss");
  return index;
}

Status evaluate(Executor& ex, const std::string& path, bool print) {
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> data, openBatchSource(ex, "eval", path, 0));
  const plan::Function& f = *ex.function("eval");  // openBatchSource found it
  int64_t batch = ex.plan().root().batch_size();
  DTC_ASSIGN_OR_RETURN(uint32_t lossIndex, lossOf(ex, f));
  std::string predictions = str(ex.plan().root().predictions());
  uint32_t logitsIndex = predictions.empty() ? kNone : resultIndex(f, plan::Role::output, predictions);
  const TensorView* labels = data->input(str(ex.plan().root().targets()));

  // Accuracy needs [batch, classes] logits and int64 labels; other models report loss only.
  bool accuracy = false;
  if (logitsIndex != kNone && labels && labels->dtype == DType::kI64) {
    TensorView logits = ex.view("eval", logitsIndex);
    accuracy = logits.dtype == DType::kF32 && logits.shape.size() == 2 &&
               logits.shape[0] == labels->shape[0];
  }
  int64_t batches = data->evalBatches(), correct = 0;
  double lossSum = 0;
  for (int64_t b = 0; b < batches; ++b) {
    data->fillEval(b);
    DTC_RETURN_IF_ERROR(ex.run("eval"));
    if (lossIndex != kNone) lossSum += *ex.view("eval", lossIndex).f32();
    if (accuracy) {
      TensorView logits = ex.view("eval", logitsIndex);
      int64_t classes = logits.shape[1];
      for (int64_t i = 0; i < logits.shape[0]; ++i) {
        const float* row = logits.f32() + i * classes;
        int64_t best = std::max_element(row, row + classes) - row;
        correct += best == labels->i64()[i];
      }
    }
  }
  // Each device scored its own samples. Only the stage holding the logits scores: the group
  // exists already (Executor::create makes a pipeline's groups up front, on every rank).
  std::vector<int> axes = batchAxes(ex.plan(), "eval", str(ex.plan().root().targets()));
  if (accuracy && ex.mesh() && !axes.empty()) {
    DTC_ASSIGN_OR_RETURN(comm::Communicator * group, ex.mesh()->group(axes));
    float count = static_cast<float>(correct);
    DTC_RETURN_IF_ERROR(group->allReduceSum(&count, 1));
    correct = static_cast<int64_t>(count);
  }
  if (!print) return Status::Ok();
  int64_t seen = batches * batch;
  std::printf("eval: loss %.6f", lossSum / std::max<int64_t>(batches, 1));
  if (accuracy)
    std::printf(" | accuracy %.2f%% (%lld/%lld)", 100.0 * correct / std::max<int64_t>(seen, 1),
                (long long)correct, (long long)seen);
  if (seen < data->samples())
    std::printf(" | last %lld samples skipped (not a full batch)",
                (long long)(data->samples() - seen));
  std::printf("\n");
  return Status::Ok();
}

// The world rank of stage `stage`'s first device (every other mesh coordinate 0).
int stageLeadRank(const comm::DeviceMesh& mesh, int axis, int stage) {
  int64_t stride = 1;
  for (size_t a = axis + 1; a < mesh.sizes().size(); ++a) stride *= mesh.sizes()[a];
  return static_cast<int>(stage * stride);
}

constexpr int kSaveTag = 1;  // parameters on their way to rank 0 (world communicator)

// Every rank calls it (sharded parameters are gathered collectively); only `write` (rank 0)
// writes. A pipeline's stages hold different parameters: each stage gathers its own, then its
// first device sends them to rank 0. Every rank walks the plan's state list in order, so the
// sends and receives pair up.
Status saveParameters(Executor& ex, const std::string& dir, bool write) {
  if (write && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::InvalidInput("cannot create directory " + dir);
  const Plan& plan = ex.plan();
  comm::DeviceMesh* mesh = ex.mesh();
  const bool pipeline = plan.stages() > 0 && mesh;
  const int axis = plan.root().pipeline_axis();
  bool stageLead = pipeline && ex.stage() > 0;
  for (size_t a = 0; stageLead && a < mesh->coords().size(); ++a)
    stageLead = static_cast<int>(a) == axis || mesh->coords()[a] == 0;
  std::vector<io::TensorRef> tensors;
  std::vector<std::vector<float>> gathered;
  std::vector<std::vector<uint8_t>> received;
  gathered.reserve(plan.root().state()->size());
  received.reserve(plan.root().state()->size());
  for (const plan::StateTensor* s : *plan.root().state()) {
    if (s->role() != plan::Role::param) continue;
    if (!Plan::onStage(s->stage(), ex.stage())) {
      if (!write) continue;  // another stage's, and not ours to write
      // Whole, from the first device of the stage holding it.
      const auto* shape = s->global_shape() ? s->global_shape() : s->shape();
      std::vector<int64_t> dims(shape->begin(), shape->end());
      size_t bytes = static_cast<size_t>(numElements(shape)) * dtypeSize(toDType(s->dtype()));
      received.emplace_back(bytes);
      DTC_RETURN_IF_ERROR(mesh->world().recv(received.back().data(), static_cast<int64_t>(bytes),
                                             stageLeadRank(*mesh, axis, s->stage()), kSaveTag));
      tensors.push_back({s->name()->str(), toDType(s->dtype()), dims, received.back().data(), bytes});
      continue;
    }
    TensorView t = ex.state(s->name()->str());
    std::vector<DimCut> cuts = cutsOf(s->sharding(), t.shape.size(), mesh);
    if (isSharded(cuts)) {
      if (t.dtype != DType::kF32)
        return Status::InvalidInput("--save: sharded parameter '" + s->name()->str() +
                                    "' is not float32");
      DTC_ASSIGN_OR_RETURN(std::vector<float> whole, gatherShards(t.f32(), t.shape, cuts, *mesh));
      gathered.push_back(std::move(whole));
      for (size_t d = 0; d < cuts.size(); ++d) t.shape[d] *= cuts[d].parts;
      t.data = reinterpret_cast<uint8_t*>(gathered.back().data());
    }
    const size_t bytes = static_cast<size_t>(t.numElements()) * dtypeSize(t.dtype);
    // A tensor every stage holds (stage -1) is rank 0's too.
    if (stageLead && s->stage() >= 0)
      DTC_RETURN_IF_ERROR(mesh->world().send(t.data, static_cast<int64_t>(bytes), 0, kSaveTag));
    tensors.push_back({s->name()->str(), t.dtype, t.shape, t.data, bytes});
  }
  if (mesh) DTC_RETURN_IF_ERROR(mesh->completeSends());
  if (!write) return Status::Ok();
  return io::writeSafetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
}

// This process's index among the job's processes on its node (which GPU it takes), from the
// launcher's environment (comm/world.h).
int localRank() {
  StatusOr<comm::World> world = comm::detectWorld();
  return world.ok() ? world->localRank : 0;
}

}  // namespace

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
  return Status::InvalidInput(what + ", but " + launcher + " started " +
                              std::to_string(processes) + " processes");
}

static StatusOr<std::unique_ptr<comm::DeviceMesh>> meshFor(const Plan& plan,
                                                           std::unique_ptr<comm::Communicator> world) {
  DTC_RETURN_IF_ERROR(checkWorldSize(plan, world->size(), "the launcher"));
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  if (const auto* mesh = plan.root().mesh())
    for (const plan::MeshAxis* axis : *mesh) {
      names.push_back(axis->name()->str());
      sizes.push_back(axis->size());
    }
  return comm::DeviceMesh::create(std::move(world), names, sizes);
}

static Status trainOnMesh(const Plan& plan, const TrainOptions& options, comm::DeviceMesh* mesh);


Status train(const Plan& plan, const TrainOptions& options,
             std::unique_ptr<comm::Communicator> world) {
  // Every rank fails the same way here: the caller reports it once.
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<comm::DeviceMesh> mesh, meshFor(plan, std::move(world)));
  Status status = trainOnMesh(plan, options, mesh.get());
  if (!status.ok() && mesh->numDevices() > 1) {
    // Other ranks may be waiting in a collective for this one: say why, then end the job.
    std::string who = mesh->rank() == 0 ? "" : "rank " + std::to_string(mesh->rank()) + ": ";
    std::fprintf(stderr, "dtrun: error: %s%s\n", who.c_str(), status.message().c_str());
    std::fflush(stderr);
    mesh->world().abortJob(status.exitCode());
  }
  return status;
}


static Status trainOnMesh(const Plan& plan, const TrainOptions& options, comm::DeviceMesh* mesh) {
  cpu::setBlasThreads(1);  // our pool parallelises the GEMMs (cpu/matmul.cc)
  const bool lead = mesh->rank() == 0;  // only rank 0 prints, logs and saves
  if (options.sampleTokens > 0 && mesh->numDevices() > 1)
    return Status::InvalidInput("--sample needs a single-device plan (compile without --mesh)");
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, createBackend(options.device, localRank()));
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex,
                       Executor::create(plan, options.threads, mesh, std::move(backend), {"train_step", "eval"}));
  DTC_RETURN_IF_ERROR(ex->initializeState());
  ex->setTiming(!options.tracePath.empty());
  const plan::Plan& root = plan.root();
  // Memory is rank 0's (a pipeline's stages differ).
  const std::string pipeline = root.schedule() && root.schedule()->size()
                                   ? ", pipeline " + root.schedule()->str()
                                   : std::string();
  if (lead) std::printf("plan %s: batch %lld, %s; memory: state %.2f MiB + arena %.2f MiB, %d threads%s\n",
              plan.name().c_str(), (long long)root.batch_size(),
              str(root.optimizer()).c_str(), ex->stateBytes() / 1048576.0,
              ex->arenaBytes() / 1048576.0, ex->pool().size(), pipeline.c_str());

  if (options.steps > 0) {
    if (options.dataDir.empty()) return Status::InvalidInput("--steps needs --data DIR");
    DTC_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> data,
                         openBatchSource(*ex, "train_step", options.dataDir, options.seed));
    const plan::Function& f = *ex->function("train_step");  // openBatchSource found it
    DTC_ASSIGN_OR_RETURN(uint32_t lossIndex, lossOf(*ex, f));
    // Samples per step: every micro-batch of the global batch.
    int64_t batch = plan.root().batch_size() * std::max(1, plan.root().micro_batches());
    std::unique_ptr<std::ofstream> log;
    std::string logTmp = options.logPath + ".tmp";
    if (!options.logPath.empty() && lead) {
      log = std::make_unique<std::ofstream>(logTmp, std::ios::trunc);
      if (!*log) return Status::InvalidInput("cannot write log file " + options.logPath);
    }
    for (int64_t step = 1; step <= options.steps; ++step) {
      auto start = std::chrono::steady_clock::now();
      data->fillTraining(step - 1);
      DTC_RETURN_IF_ERROR(ex->run("train_step"));
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      float loss = lossIndex != kNone ? *ex->view("train_step", lossIndex).f32() : 0.0f;
      double rate = batch / std::max(seconds, 1e-9);
      if (lead)
        std::printf("step %5lld/%lld | loss %.6f | %.0f samples/s\n", (long long)step,
                    (long long)options.steps, loss, rate);
      if (log) {
        char line[160];
        std::snprintf(line, sizeof line, "{\"step\":%lld,\"loss\":%.9g,\"samples_per_s\":%.6g}\n",
                      (long long)step, loss, rate);
        *log << line << std::flush;
      }
    }
    if (log) {
      log->close();
      if (std::rename(logTmp.c_str(), options.logPath.c_str()) != 0)
        return Status::Internal("cannot rename " + logTmp + " to " + options.logPath);
    }
  }
  if (!options.evalDir.empty()) DTC_RETURN_IF_ERROR(evaluate(*ex, options.evalDir, lead));
  if (options.sampleTokens > 0 && lead) {
    DTC_ASSIGN_OR_RETURN(std::string text, generateGreedy(*ex, options.prompt, options.sampleTokens));
    std::printf("sample: %s%s\n", options.prompt.c_str(), text.c_str());
  }
  if (!options.tracePath.empty()) DTC_RETURN_IF_ERROR(writeTrace(*ex, *mesh, options.tracePath));
  if (!options.saveDir.empty()) {
    DTC_RETURN_IF_ERROR(ex->pullState());
    DTC_RETURN_IF_ERROR(saveParameters(*ex, options.saveDir, lead));
  }
  return Status::Ok();
}

}  // namespace dtc
