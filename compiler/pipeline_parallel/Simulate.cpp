#include "pipeline_parallel/Simulate.h"

#include <map>
#include <set>
#include <tuple>

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Builders.h"

#include "dist/IR/DistOps.h"
#include "perf/step_simulation.h"
#include "plan/IR/KernelQueries.h"

using namespace mlir;

namespace dtc::pipeline {

double Timeline::bubbleRatio() const {
  double idle = 0, work = 0;
  for (double b : busy) idle += makespan - b, work += b;
  return work > 0 ? idle / work : 0;
}

double Timeline::bubbleFraction() const {
  double idle = 0;
  for (double b : busy) idle += makespan - b;
  return makespan > 0 ? idle / (makespan * busy.size()) : 0;
}

namespace {

std::string unitName(Operation* op, std::string& kind) {
  const int64_t stage = stageOf(op);
  const bool backward = op->hasAttr(dist::kBackwardAttr);
  const bool weights = op->hasAttr(dist::kWeightGradAttr);
  const std::string kernel = kernelNameOf(op);
  if (kernel == "send")
    kind = "send";
  else if (kernel == "recv")
    kind = "recv";
  else if (stage >= 0)
    kind = weights ? "weight-grad" : backward ? "backward" : "forward";
  else
    kind = "other";
  if (stage < 0) return kind;
  std::string name = std::string(weights    ? "W"
                                 : backward ? "B"
                                            : "F") +
                     std::to_string(microBatchOf(op)) + " c" + std::to_string(stage);
  return kind == "send" || kind == "recv" ? kind + " " + name : name;
}

}  // namespace

FailureOr<Timeline> simulate(ArrayRef<func::FuncOp> programs, const DeviceModel& device) {
  // One stream a device: each op at its roofline in program order, a send's tensor arriving a
  // transfer after its copy out, a receive waiting for it.
  const size_t n = programs.size();
  std::vector<SmallVector<Operation*>> ops(n);
  std::vector<std::vector<perf::Task>> tasks(n);
  for (size_t d = 0; d < n; ++d)
    for (Operation& op : func::FuncOp(programs[d]).getBody().front().without_terminator()) {
      ops[d].push_back(&op);
      perf::Task task;
      const std::string kernel = kernelNameOf(&op);
      const int64_t self = static_cast<int64_t>(d);
      if (kernel == "recv") {
        task.kind = perf::TaskKind::kRecv;
        task.receives = perf::MessageKey{self - intParam(&op, "shift"), self, intParam(&op, "tag")};
      } else {
        task.seconds = opSeconds(&op, device);
        if (kernel == "send") {
          task.kind = perf::TaskKind::kSend;
          task.sends = perf::MessageKey{self, self + intParam(&op, "shift"), intParam(&op, "tag")};
          task.delivery = transferSeconds(opBytes(&op), device);
        }
      }
      tasks[d].push_back(std::move(task));
    }
  const perf::Simulation sim = perf::simulateStep(tasks);
  if (sim.stuck) {
    const auto [d, next] = *sim.stuck;
    Operation* recv = ops[d][next];
    return recv->emitError("the pipeline schedule deadlocks: stage ")
           << d << " waits for a tensor (tag " << intParam(recv, "tag") << ") from stage "
           << static_cast<int64_t>(d) - intParam(recv, "shift") << " that is never sent before it";
  }
  Timeline t;
  t.devices.resize(n);
  t.busy.assign(n, 0);
  for (size_t d = 0; d < n; ++d) {
    const perf::DeviceRun& run = sim.devices[d];
    std::vector<Box>& boxes = t.devices[d];
    for (size_t i = 0; i < ops[d].size(); ++i) {
      std::string kind, name = unitName(ops[d][i], kind);
      // A receive's box is its wait.
      const double start = kind == "recv" ? run.tasks[i].free : run.tasks[i].start;
      const double end = run.tasks[i].end;
      if (kind != "recv") t.busy[d] += end - start;
      if (!boxes.empty() && boxes.back().name == name && boxes.back().end == start &&
          kind != "recv")
        boxes.back().end = end;
      else if (end > start || kind == "send")
        boxes.push_back({name, kind, start, end});
    }
    t.makespan = std::max(t.makespan, run.compute);
  }
  return t;
}

SmallVector<func::FuncOp> stagePrograms(ModuleOp module, StringRef function) {
  std::map<int64_t, func::FuncOp> byStage;
  for (auto func : module.getOps<func::FuncOp>())
    if (auto name = func->getAttrOfType<StringAttr>(dist::kFunctionAttr); name && name == function)
      byStage[stageOf(func)] = func;
  SmallVector<func::FuncOp> out;
  for (auto& [stage, func] : byStage) out.push_back(func);
  return out;
}

void recordStageStats(ModuleOp module, func::FuncOp original, const PipelineConfig& config,
                      const Timeline& timeline) {
  // Bytes each (chunk, micro-batch) keeps for its backward pass: forward values (views count
  // once, as the storage they share) and received activations that backward ops read; of them,
  // those a weight-gradient pass reads (kept until W, the rest freed by B).
  std::map<std::pair<int64_t, int64_t>, double> saved, savedForWeights;
  std::set<std::pair<const void*, int64_t>> counted;  // (value, device holding it)
  std::set<std::pair<const void*, int64_t>> countedForWeights;
  for (Operation& op : original.getBody().front().without_terminator()) {
    int64_t chunk = stageOf(&op);
    if (chunk < 0 || !op.hasAttr(dist::kBackwardAttr)) continue;
    const bool weights = op.hasAttr(dist::kWeightGradAttr);
    for (Value v : op.getOperands()) {
      Operation* def = v.getDefiningOp();
      while (def && def->getName().stripDialect() == "reshape" && def->getNumOperands() == 1 &&
             def->getOperand(0).getDefiningOp()) {
        v = def->getOperand(0);
        def = v.getDefiningOp();
      }
      if (!def || def->hasAttr(dist::kBackwardAttr) || stageOf(def) < 0) continue;
      // A value from another device's chunk is held here as its received copy.
      const auto key = std::make_pair(v.getAsOpaquePointer(), config.deviceOf(chunk));
      if (weights && countedForWeights.insert(key).second)
        savedForWeights[{chunk, microBatchOf(def)}] += valueBytes(v);
      if (!counted.insert(key).second) continue;
      saved[{chunk, microBatchOf(def)}] += valueBytes(v);
    }
  }
  Builder b(module.getContext());
  SmallVector<Attribute> stages;
  const std::vector<std::vector<Unit>> orders = trainSchedules(config);
  for (int64_t d = 0; d < config.stages; ++d) {
    double live = 0, peak = 0, perMicroBatch = 0;
    int64_t inFlight = 0, mostInFlight = 0;
    for (int64_t c : config.chunksOf(d)) perMicroBatch += saved[{c, 0}];
    for (const Unit& u : orders[d]) {
      const double bytes = saved[{u.chunk, u.microBatch}];
      const double forWeights = std::min(bytes, savedForWeights[{u.chunk, u.microBatch}]);
      switch (u.pass) {
        case Pass::kForward: live += bytes; break;
        case Pass::kBackward: live -= bytes; break;
        case Pass::kInputGrad: live -= bytes - forWeights; break;
        case Pass::kWeightGrad: live -= forWeights; break;
      }
      if (u.pass == Pass::kForward) ++inFlight;
      if (u.finishes()) --inFlight;
      peak = std::max(peak, live);
      mostInFlight = std::max(mostInFlight, inFlight);
    }
    double busy = d < static_cast<int64_t>(timeline.busy.size()) ? timeline.busy[d] : 0;
    stages.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("in_flight", b.getI64IntegerAttr(mostInFlight)),
         b.getNamedAttr("activation_bytes",
                        b.getI64IntegerAttr(static_cast<int64_t>(perMicroBatch))),
         b.getNamedAttr("peak_activation_bytes", b.getI64IntegerAttr(static_cast<int64_t>(peak))),
         b.getNamedAttr("busy_us", b.getF64FloatAttr(busy * 1e6)),
         b.getNamedAttr("idle_us", b.getF64FloatAttr((timeline.makespan - busy) * 1e6))}));
  }
  module->setAttr(dist::kPipelineStagesAttr, b.getArrayAttr(stages));
  module->setAttr(
      dist::kPipelineBubbleAttr,
      b.getDictionaryAttr({b.getNamedAttr("fraction", b.getF64FloatAttr(timeline.bubbleFraction())),
                           b.getNamedAttr("ratio", b.getF64FloatAttr(timeline.bubbleRatio()))}));
}

std::string traceJson(ModuleOp module, const Timeline& timeline) {
  auto mesh = dist::getMesh(module);
  std::optional<PipelineConfig> config = getPipeline(module);
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto event = [&](const std::string& json) {
    os << (first ? "\n" : ",\n") << json;
    first = false;
  };
  int64_t ranks = 1;
  SmallVector<int64_t> sizes;
  SmallVector<std::string> names;
  int64_t ppAxis = -1;
  if (mesh)
    for (size_t i = 0; i < mesh.rank(); ++i) {
      sizes.push_back(mesh.getSizes()[i]);
      names.push_back(cast<StringAttr>(mesh.getNames()[i]).str());
      if (config && names.back() == config->axis) ppAxis = i;
      ranks *= sizes.back();
    }
  for (int64_t rank = 0; rank < ranks; ++rank) {
    // Row-major coordinates; the pipeline coordinate picks the stage's timeline.
    std::string coords;
    int64_t rest = rank, stage = 0;
    SmallVector<int64_t> coord(sizes.size());
    for (int64_t i = sizes.size() - 1; i >= 0; --i) coord[i] = rest % sizes[i], rest /= sizes[i];
    for (size_t i = 0; i < sizes.size(); ++i) {
      coords += (i ? ", " : "") + names[i] + "=" + std::to_string(coord[i]);
      if (static_cast<int64_t>(i) == ppAxis) stage = coord[i];
    }
    // As dtrun --trace: one process row per rank, named with its coordinates.
    event("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(rank) +
          ",\"args\":{\"name\":\"rank " + std::to_string(rank) + " (" + coords + ")\"}}");
    if (stage >= static_cast<int64_t>(timeline.devices.size())) continue;
    for (const Box& box : timeline.devices[stage]) {
      std::string e;
      llvm::raw_string_ostream es(e);
      es << "{\"name\":\"" << box.name << "\",\"cat\":\"" << box.kind
         << "\",\"ph\":\"X\",\"pid\":" << rank << ",\"tid\":0,\"ts\":" << box.start * 1e6
         << ",\"dur\":" << (box.end - box.start) * 1e6 << "}";
      event(e);
    }
  }
  os << "\n]}\n";
  return out;
}

}  // namespace dtc::pipeline
