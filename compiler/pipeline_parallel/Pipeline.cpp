#include "pipeline_parallel/Pipeline.h"

#include <algorithm>

#include "mlir/IR/Builders.h"

#include "dist/IR/DistOps.h"
#include "pipeline_parallel/ZeroBubble.h"

using namespace mlir;

namespace dtc::pipeline {

std::vector<int64_t> PipelineConfig::chunksOf(int64_t device) const {
  std::vector<int64_t> held;
  for (int64_t chunk = 0; chunk < chunks(); ++chunk)
    if (deviceOf(chunk) == device) held.push_back(chunk);
  return held;
}

int passSlot(Pass pass) { return pass == Pass::kForward ? 0 : pass == Pass::kInputGrad ? 1 : 2; }

double PipelineConfig::seconds(const Unit& unit) const {
  if (unit.pass == Pass::kBackward)
    return seconds({unit.chunk, unit.microBatch, Pass::kInputGrad}) +
           seconds({unit.chunk, unit.microBatch, Pass::kWeightGrad});
  const size_t at = static_cast<size_t>(3 * unit.chunk + passSlot(unit.pass));
  return at < passSeconds.size() ? passSeconds[at] : 1.0;
}

std::string PipelineConfig::summary() const {
  std::string s = schedule;
  if (virtualStages > 1) s += " (" + std::to_string(virtualStages) + " virtual stages)";
  return s + ", " + std::to_string(microBatches) + " micro-batches, " + std::to_string(stages) +
         " stages";
}

std::optional<PipelineConfig> getPipeline(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>(dist::kPipelineAttr);
  if (!dict) return std::nullopt;
  PipelineConfig c;
  auto integer = [&](StringRef name, int64_t& out) {
    if (auto a = dict.getAs<IntegerAttr>(name)) out = a.getInt();
  };
  auto string = [&](StringRef name, std::string& out) {
    if (auto a = dict.getAs<StringAttr>(name)) out = a.str();
  };
  integer("stages", c.stages);
  integer("virtual_stages", c.virtualStages);
  integer("micro_batches", c.microBatches);
  string("schedule", c.schedule);
  string("axis", c.axis);
  if (auto seconds = dict.getAs<DenseF64ArrayAttr>("pass_seconds"))
    c.passSeconds.assign(seconds.asArrayRef().begin(), seconds.asArrayRef().end());
  return c;
}

void setPipeline(ModuleOp module, const PipelineConfig& c) {
  Builder b(module.getContext());
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr("stages", b.getI64IntegerAttr(c.stages)),
      b.getNamedAttr("virtual_stages", b.getI64IntegerAttr(c.virtualStages)),
      b.getNamedAttr("micro_batches", b.getI64IntegerAttr(c.microBatches)),
      b.getNamedAttr("schedule", b.getStringAttr(c.schedule)),
      b.getNamedAttr("axis", b.getStringAttr(c.axis))};
  if (!c.passSeconds.empty())
    entries.push_back(b.getNamedAttr("pass_seconds", b.getDenseF64ArrayAttr(c.passSeconds)));
  module->setAttr(dist::kPipelineAttr, b.getDictionaryAttr(entries));
}

int64_t stageOf(Operation* op) {
  auto stage = op ? op->getAttrOfType<IntegerAttr>(dist::kStageAttr) : nullptr;
  return stage ? stage.getInt() : -1;
}

int64_t microBatchOf(Operation* op) {
  auto micro = op ? op->getAttrOfType<IntegerAttr>(dist::kMicroBatchAttr) : nullptr;
  return micro ? micro.getInt() : 0;
}

void copyPlacement(Operation* from, Operation* to) {
  for (StringRef name :
       {dist::kStageAttr, dist::kMicroBatchAttr, dist::kBackwardAttr, dist::kWeightGradAttr})
    if (Attribute a = from->getAttr(name)) to->setAttr(name, a);
}

namespace {

// Megatron's interleaved order: the k-th forward (backward) of a device visits chunks in groups
// of p micro-batches, chunk by chunk (backward: last chunk first).
Unit interleavedUnit(const PipelineConfig& c, int64_t device, int64_t k, bool backward) {
  const int64_t p = c.stages, v = c.virtualStages;
  int64_t inGroup = k % (p * v);
  int64_t local = inGroup / p;
  if (backward) local = v - 1 - local;
  return {local * p + device, (k / (p * v)) * p + k % p,
          backward ? Pass::kBackward : Pass::kForward};
}

// GPipe's, 1F1B's or interleaved 1F1B's order on `device`.
std::vector<Unit> deviceOrder(const PipelineConfig& c, int64_t device) {
  const int64_t p = c.stages, m = c.microBatches;
  std::vector<Unit> order;
  constexpr Pass F = Pass::kForward, B = Pass::kBackward;
  if (c.schedule == "gpipe") {
    for (int64_t mb = 0; mb < m; ++mb) order.push_back({device, mb, F});
    for (int64_t mb = 0; mb < m; ++mb) order.push_back({device, mb, B});
    return order;
  }
  if (c.schedule == "1f1b") {
    int64_t warmup = std::min(p - device - 1, m);
    for (int64_t mb = 0; mb < warmup; ++mb) order.push_back({device, mb, F});
    for (int64_t i = 0; i < m - warmup; ++i) {
      order.push_back({device, warmup + i, F});
      order.push_back({device, i, B});
    }
    for (int64_t mb = m - warmup; mb < m; ++mb) order.push_back({device, mb, B});
    return order;
  }
  // Interleaved 1F1B.
  const int64_t total = m * c.virtualStages;
  int64_t warmup = std::min((p - device - 1) * 2 + (c.virtualStages - 1) * p, total);
  for (int64_t k = 0; k < warmup; ++k) order.push_back(interleavedUnit(c, device, k, false));
  for (int64_t i = 0; i < total - warmup; ++i) {
    order.push_back(interleavedUnit(c, device, warmup + i, false));
    order.push_back(interleavedUnit(c, device, i, true));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    order.push_back(interleavedUnit(c, device, k, true));
  return order;
}

}  // namespace

std::vector<std::vector<Unit>> trainSchedules(const PipelineConfig& c) {
  if (c.splitsBackward()) return zeroBubbleOrders(c);
  std::vector<std::vector<Unit>> orders;
  for (int64_t d = 0; d < c.stages; ++d) orders.push_back(deviceOrder(c, d));
  return orders;
}

OrdersRun runOrders(const PipelineConfig& c, const std::vector<std::vector<Unit>>& orders,
                    llvm::function_ref<double(const Unit&)> seconds, double transfer) {
  const int64_t stages = c.stages, chunks = c.chunks(), m = c.microBatches;
  std::vector<int64_t> device(chunks);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) device[chunk] = c.deviceOf(chunk);
  // When a chunk's output for a micro-batch reaches the chunk after it (forward) or before it
  // (backward); negative until sent.
  auto at = [m](int64_t chunk, int64_t mb) { return static_cast<size_t>(chunk * m + mb); };
  std::vector<double> forwardArrives(chunks * m, -1), backwardArrives(chunks * m, -1);
  OrdersRun run;
  run.end.assign(stages, 0);
  run.idle.assign(stages, 0);
  std::vector<size_t> next(stages, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < stages; ++s)
      for (; next[s] < orders[s].size(); ++next[s]) {
        const Unit& u = orders[s][next[s]];
        const bool back = u.backward(), feeds = u.feedsNeighbour();
        double ready = 0;
        if (feeds && !back && u.chunk > 0) ready = forwardArrives[at(u.chunk - 1, u.microBatch)];
        if (feeds && back && u.chunk + 1 < chunks)
          ready = backwardArrives[at(u.chunk + 1, u.microBatch)];
        if (ready < 0) break;
        const double start = std::max(run.end[s], ready);
        run.idle[s] += start - run.end[s];
        run.end[s] = start + seconds(u);
        const int64_t to = back ? u.chunk - 1 : u.chunk + 1;
        if (feeds && to >= 0 && to < chunks)
          (back ? backwardArrives : forwardArrives)[at(u.chunk, u.microBatch)] =
              run.end[s] + (device[u.chunk] == device[to] ? 0.0 : transfer);
        progress = true;
      }
  }
  for (int64_t s = 0; s < stages; ++s) run.stuck |= next[s] < orders[s].size();
  return run;
}

}  // namespace dtc::pipeline
