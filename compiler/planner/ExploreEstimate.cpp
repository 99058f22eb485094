#include "planner/ExploreEstimate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "ops/kernel_registry.h"
#include "pipeline_parallel/Pipeline.h"
#include "planfile/function_names.h"
#include "planfile/plan.h"
#include "planner/CompileRequest.h"
#include "planner/ExploreReport.h"
#include "planner/ExploreSchedule.h"
#include "source/ModelSource.h"

namespace dtc {

// One setting's shallow compiles, priced: seconds on the compute stream (`total`: with the waits
// for collectives) and bytes per rank.
struct LayerUnit {
  // Seconds a part adds to the step, of its kernels, and of its collectives (the comm stream's
  // busy time, which the step cannot undercut however well it overlaps).
  struct Cost {
    double total = 0, kernels = 0, comm = 0;
    Cost& operator+=(const Cost& o) {
      total += o.total;
      kernels += o.kernels;
      comm += o.comm;
      return *this;
    }
    Cost scaled(double k) const { return {total * k, kernels * k, comm * k}; }
  };
  Cost embedForward, embedBackward;  // before the stack (the first chunk)
  Cost layerForward, layerBackward;  // one layer
  Cost headForward, headBackward;    // after the stack: final norm, head, loss (the last chunk)
  Cost layerUpdate, firstUpdate, lastUpdate;  // after the backward: gradient reduction, update
  double transferBytes = 0;                   // what a chunk passes on, per micro-batch
  // State per rank: one layer's, what the first and the last stage hold outside the stack, and
  // all of that outside the stack (what a rank without a pipeline holds).
  uint64_t stateLayer = 0, stateFirst = 0, stateLast = 0, stateOutside = 0;
  // Adding one micro-batch's gradients to the step's (a pipeline accumulates after the last
  // micro-batch): for one layer's parameters, and for those outside the stack.
  Cost accumulateLayer, accumulateOutside;
  // Of the updates' seconds, the gradient reductions deferred to after the last micro-batch
  // (one layer's, and the first stage's outside the stack).
  double deferredLayer = 0, deferredFirst = 0;
  // The gradients a step accumulates micro-batches into (held from the first backward to the
  // update): one layer's, and those outside the stack on the first and the last stage.
  uint64_t gradientLayer = 0, gradientFirst = 0, gradientLast = 0;
  // The arena: the three-layer copy's (one micro-batch), and what a layer keeps for its backward.
  uint64_t arenaShallow = 0, stashLayer = 0;
  // The middle layer's 16-bit copies of its weights: cast once per step and shared by every
  // micro-batch (dtc-fold-casts), so held per layer, not per micro-batch in flight.
  uint64_t weightCopiesLayer = 0;
  // The most bytes live at once besides the layers' kept tensors, over the embedding's steps,
  // the middle layer's, the head's, and the rest (gradients' reductions, updates).
  uint64_t transientEmbed = 0, transientLayer = 0, transientHead = 0, transientRest = 0;
  double flopsLayer = 0, flopsRest = 0;  // over the setting's ranks, per micro-batch
  double flopsShare = 0;                 // one layer's share of the shallow copy's FLOPs
  double peakFlops = 0;                  // the devices' peak for the plan's GEMM type
  int64_t tokens = 0;                    // per micro-batch
};

namespace {

using Cost = LayerUnit::Cost;

// The shallow copy's depth: three layers, so that one sits between two (the first follows the
// embedding, the last precedes the head).
constexpr int kShallow = 3;

// A layer's name with '/' read as '.' and no leading separator.
std::string sameSpelling(std::string layer) {
  std::replace(layer.begin(), layer.end(), '/', '.');
  return layer.empty() || layer[0] != '.' ? layer : layer.substr(1);
}

struct Compiled {
  Plan plan;
  perf::StepPrediction prediction;
  perf::StepClock clock;
};

// Each step's layer of the stack (-1: outside it) in the three-layer program. ZeRO-3's gathers
// run ahead of the layer that needs them (prefetch): they belong to the part they stand in.
StatusOr<std::vector<int>> layerOfSteps(const plan::Function& f, const LayerStack& stack) {
  std::vector<std::string> spelled;
  for (int l = 0; l < kShallow; ++l) spelled.push_back(sameSpelling(stack.layers[l]));
  std::vector<int> layer(f.steps()->size(), -1);
  int layers = 0;
  for (size_t i = 0; i < layer.size(); ++i) {
    const plan::Step& s = *f.steps()->Get(i);
    const std::string of = sameSpelling(layerOf(s.loc() ? s.loc()->str() : ""));
    for (int l = 0; l < kShallow; ++l)
      if (of == spelled[l]) layer[i] = l;
    if (s.kernel() == Kernel::all_gather) layer[i] = i ? layer[i - 1] : -1;
    layers = std::max(layers, layer[i] + 1);
  }
  if (layers != kShallow) return Status::Internal("the shallow plan lost a layer");
  return layer;
}

// Where the three-layer program's parts start: embedding | layers' forward | head forward, loss,
// head backward | layers' backward | the rest (embedding gradient, reductions, updates).
struct Parts {
  size_t forward = 0, head = 0, backward = 0, rest = 0;
};

StatusOr<Parts> partsOf(const std::vector<int>& layer) {
  const size_t n = layer.size();
  auto find = [&](size_t from, auto pred) {
    while (from < n && !pred(layer[from])) ++from;
    return from;
  };
  Parts p;
  p.forward = find(0, [](int l) { return l >= 0; });
  p.head = find(p.forward, [](int l) { return l < 0; });
  p.backward = find(p.head, [](int l) { return l >= 0; });
  // The backward ends with the first layer's; a recomputing plan may run a layer's forward again
  // before the head's last gradient, which stays the head's.
  p.rest = find(find(p.backward, [](int l) { return l == 0; }), [](int l) { return l != 0; });
  if (p.forward == n || p.backward == n || layer[p.forward] != 0 ||
      layer[p.backward] != kShallow - 1)
    return Status::Internal("the shallow plan's steps do not run the layers forward, then back");
  return p;
}

// The parts' times from the simulated clock. One layer's part is the middle layer's steps (the
// first follows the embedding, the last precedes the head, and either may hold a step of theirs).
void priceTime(const Compiled& shallow, const std::vector<int>& layer, const Parts& at,
               LayerUnit& u) {
  const plan::Function& f = *shallow.plan.function(fn::kTrainStep);
  const perf::StepClock& clock = shallow.clock;
  const size_t n = layer.size();
  auto middle = [&](size_t i) { return layer[i] == 1 ? 1.0 : 0.0; };
  auto cost = [&](size_t i) {
    return Cost{clock.ends[i] - (i ? clock.ends[i - 1] : 0.0), clock.kernel[i],
                clock.communication[i]};
  };
  auto locOf = [&](size_t i) {
    const plan::Step& s = *f.steps()->Get(i);
    return s.loc() ? s.loc()->str() : std::string();
  };
  auto isBackward = [&](size_t i) {
    const std::string k = kernelName(f.steps()->Get(i)->kernel());
    return k.find("grad") != std::string::npos || k == "reduce_sum";
  };
  std::set<std::string> embedNames, headNames;
  for (size_t i = 0; i < at.forward; ++i) {
    u.embedForward += cost(i);
    embedNames.insert(locOf(i));
  }
  for (size_t i = at.forward; i < at.head; ++i) u.layerForward += cost(i).scaled(middle(i));
  for (size_t i = at.head; i < at.backward; ++i) {
    (isBackward(i) ? u.headBackward : u.headForward) += cost(i);
    headNames.insert(locOf(i));
  }
  for (size_t i = at.backward; i < at.rest; ++i)
    if (layer[i] >= 0)
      u.layerBackward += cost(i).scaled(middle(i));
    else
      u.headBackward += cost(i);
  auto startsWithOneOf = [](const std::string& name, const std::set<std::string>& prefixes) {
    for (const std::string& p : prefixes)
      if (!p.empty() && name.rfind(p, 0) == 0) return true;
    return false;
  };
  bool embeddingBackward = true;  // the embedding's gradient comes first, then the updates
  for (size_t i = at.rest; i < n; ++i) {
    if (layer[i] >= 0) {
      u.layerUpdate += cost(i).scaled(middle(i));
      embeddingBackward = false;
      continue;
    }
    const std::string loc = locOf(i);
    const bool first = startsWithOneOf(loc, embedNames);
    if (first && embeddingBackward && isBackward(i))
      u.embedBackward += cost(i);
    else if (first || !startsWithOneOf(loc, headNames))
      u.firstUpdate += cost(i);
    else
      u.lastUpdate += cost(i);
    if (!first || !isBackward(i)) embeddingBackward = false;
  }
  double layerFlops = 0, allFlops = 0;
  for (size_t i = 0; i < n; ++i) {
    allFlops += clock.flops[i];
    layerFlops += clock.flops[i] * middle(i);
  }
  u.flopsShare = allFlops > 0 ? layerFlops / allFlops : 0;
  // Gradient reductions deferred to after the last micro-batch, as a pipeline runs them.
  for (size_t i = 0; i < n; ++i)
    if (const double seconds = clock.deferred[i]; seconds > 0) {
      const double share = layer[i] >= 0 ? seconds * middle(i) : seconds;
      (layer[i] >= 0 ? u.layerUpdate : u.firstUpdate) += Cost{share, 0, share};
      (layer[i] >= 0 ? u.deferredLayer : u.deferredFirst) += share;
    }
  // What the step waits for after its last kernel (a collective still running).
  u.firstUpdate.total += std::max(0.0, shallow.prediction.stepSeconds - clock.ends.back());
}

// What the middle layer keeps for its backward: the tensors its forward writes that the backward
// reads (a reshape is a view of its operand); and what the first layer passes on, its forward's
// last output.
void priceActivations(const plan::Function& f, const std::vector<int>& layer, const Parts& at,
                      LayerUnit& u) {
  const size_t n = layer.size();
  std::vector<int64_t> root(f.values() ? f.values()->size() : 0, -1);
  auto rootOf = [&](uint32_t id) {
    int64_t r = id;
    while (root[r] >= 0) r = root[r];
    return static_cast<uint32_t>(r);
  };
  std::vector<int> writtenBy(root.size(), -2);       // layer of the forward step that wrote it
  std::vector<bool> weightCopy(root.size(), false);  // a cast of a parameter (state region)
  for (size_t i = 0; i < n; ++i) {
    const plan::Step& s = *f.steps()->Get(i);
    if (!s.outputs()) continue;
    if (s.kernel() == Kernel::cast && s.inputs() && s.inputs()->size() == 1 &&
        f.values()->Get(s.inputs()->Get(0))->region() == plan::Region::state)
      for (uint32_t id : *s.outputs()) weightCopy[id] = true;
    if (s.kernel() == Kernel::reshape && s.inputs() && s.inputs()->size() == 1 &&
        s.outputs()->size() == 1) {
      root[s.outputs()->Get(0)] = rootOf(s.inputs()->Get(0));
      continue;
    }
    if (i < at.head)
      for (uint32_t id : *s.outputs()) writtenBy[id] = layer[i];
  }
  std::set<uint32_t> kept, keptByAny;
  for (size_t i = at.backward; i < n; ++i)
    if (const auto* ins = f.steps()->Get(i)->inputs())
      for (uint32_t id : *ins) {
        if (writtenBy[rootOf(id)] == 1) kept.insert(rootOf(id));
        if (writtenBy[rootOf(id)] >= 0) keptByAny.insert(rootOf(id));
      }
  for (uint32_t id : kept)
    (weightCopy[id] ? u.weightCopiesLayer : u.stashLayer) += valueBytes(*f.values()->Get(id));
  // What else is live at each step (arena values from their first write to their last read,
  // the layers' kept tensors aside), and its peak over each part's steps: a pipeline stage
  // reaches only the peaks of the parts it holds (the head's logits, say, only the last).
  std::vector<int64_t> start(root.size(), -1), end(root.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    const plan::Step& s = *f.steps()->Get(i);
    for (const auto* ids : {s.inputs(), s.outputs()})
      if (ids)
        for (uint32_t id : *ids) {
          const uint32_t r = rootOf(id);
          if (start[r] < 0) start[r] = static_cast<int64_t>(i);
          end[r] = static_cast<int64_t>(i);
        }
  }
  std::vector<int64_t> delta(n + 1, 0);
  for (uint32_t r = 0; r < root.size(); ++r)
    if (start[r] >= 0 && root[r] < 0 && !keptByAny.count(r) &&
        f.values()->Get(r)->region() == plan::Region::arena) {
      const int64_t bytes = static_cast<int64_t>(valueBytes(*f.values()->Get(r)));
      delta[start[r]] += bytes;
      delta[end[r] + 1] -= bytes;
    }
  int64_t live = 0;
  for (size_t i = 0; i < n; ++i) {
    live += delta[i];
    // The middle layer's steps stand for every layer's: the outer two's may hold the
    // embedding's or the head's.
    const bool layerStep = i >= at.forward && i < at.rest && layer[i] >= 0;
    if (layerStep && layer[i] != 1) continue;
    uint64_t& peak = i < at.forward                ? u.transientEmbed
                     : layerStep                   ? u.transientLayer
                     : i >= at.head && i < at.rest ? u.transientHead
                                                   : u.transientRest;
    peak = std::max<uint64_t>(peak, static_cast<uint64_t>(std::max<int64_t>(live, 0)));
  }
  const plan::Step& last = *f.steps()->Get(at.head - 1);
  if (last.outputs() && last.outputs()->size())
    u.transferBytes = static_cast<double>(valueBytes(*f.values()->Get(last.outputs()->Get(0))));
}

// State by the part of the model that holds it: the middle layer's; outside the stack, the first
// stage's when the embedding reads it, the last's when the head reads it. Also what adding one
// micro-batch's gradients costs, and the gradients' bytes.
void priceState(const Plan& plan, const LayerStack& stack, const perf::DeviceProfile& profile,
                const std::vector<int>& layer, const Parts& at, LayerUnit& u) {
  const plan::Function& f = *plan.function(fn::kTrainStep);
  std::set<uint32_t> readByEmbed, readByHead;
  for (size_t i = 0; i < layer.size(); ++i) {
    const plan::Step& s = *f.steps()->Get(i);
    if (!s.inputs() || (i >= at.forward && i < at.head) || i >= at.backward) continue;
    for (uint32_t id : *s.inputs()) (i < at.forward ? readByEmbed : readByHead).insert(id);
  }
  std::vector<std::pair<std::string, int>> owners;  // parameter name -> 1 first, 2 last, 3 both
  if (f.arguments())
    for (const plan::Binding* b : *f.arguments())
      if (b->role() == plan::Role::param && b->name())
        owners.push_back({b->name()->str(), (readByEmbed.count(b->value()) ? 1 : 0) |
                                                (readByHead.count(b->value()) ? 2 : 0)});
  // Parameters carry PyTorch's names ("h.1.ln_1.weight") where an export's nodes carry paths
  // ("/h.1/ln_1/..."): layers compare with '/' read as '.'.
  const std::string middle = sameSpelling(stack.layers[1]);
  std::set<std::string> seen;
  for (const plan::StateTensor* s : *plan.root().state()) {
    const std::string name = s->name()->str();
    if (!seen.insert(name).second) continue;
    const std::string of = sameSpelling(layerOf(name));
    const uint64_t bytes = stateTensorBytes(*s);
    // One add of gradients: both operands read, the sum written.
    const double add = 3 * double(bytes) / profile.memoryBytesPerSecond + profile.kernelSeconds;
    const bool gradient = s->role() == plan::Role::param && s->trainable();
    if (of == middle) {
      u.stateLayer += bytes;
      if (gradient) {
        u.accumulateLayer += Cost{add, add};
        u.gradientLayer += bytes;
      }
    }
    if (!of.empty()) continue;
    if (gradient) u.accumulateOutside += Cost{add, add};
    u.stateOutside += bytes;
    int owner = 0;
    size_t longest = 0;
    for (const auto& [param, who] : owners)
      if (name.rfind(param, 0) == 0 && param.size() > longest) {
        longest = param.size();
        owner = who;
      }
    if (owner & 1 || owner == 0) {
      u.stateFirst += bytes;
      if (gradient) u.gradientFirst += bytes;
    }
    if (owner & 2) {
      u.stateLast += bytes;
      if (gradient) u.gradientLast += bytes;
    }
  }
}

// The three-layer program priced by its parts.
Status priceParts(const Compiled& shallow, const LayerStack& stack,
                  const perf::DeviceProfile& profile, LayerUnit& u) {
  const plan::Function* f = shallow.plan.function(fn::kTrainStep);
  const size_t n = f && f->steps() ? f->steps()->size() : 0;
  if (n == 0 || shallow.clock.ends.size() != n || shallow.clock.kernel.size() != n)
    return Status::Internal("the shallow plan's steps were not all simulated");
  DTC_ASSIGN_OR_RETURN(std::vector<int> layer, layerOfSteps(*f, stack));
  DTC_ASSIGN_OR_RETURN(Parts at, partsOf(layer));
  priceTime(shallow, layer, at, u);
  priceActivations(*f, layer, at, u);
  priceState(shallow.plan, stack, profile, layer, at, u);
  return Status::Ok();
}

// Layers per chunk: each chunk at least one, except that the first may hold the embedding alone
// and the last the head alone (`bareEnds`), as the compiler's own cuts may; the slowest chunk as
// fast as it can be. Layers cost the same, so the slowest chunk's time is one of extra + k
// layers; the least that lets the chunks hold every layer is found by bisection, and chunks left
// with room give back layers, the slowest first.
std::vector<int64_t> cutLayers(const LayerUnit& u, int64_t layers, int64_t chunks,
                               std::pair<bool, bool> bareEnds) {
  const double layer = std::max(u.layerForward.total + u.layerBackward.total, 1e-30);
  auto extra = [&](int64_t c) {
    return (c == 0 ? u.embedForward.total + u.embedBackward.total : 0.0) +
           (c == chunks - 1 ? u.headForward.total + u.headBackward.total : 0.0);
  };
  auto least = [&](int64_t c) {
    return (c == 0 && bareEnds.first) || (c == chunks - 1 && bareEnds.second) ? 0 : 1;
  };
  auto capacity = [&](int64_t c, double slowest) {
    return std::min<int64_t>(layers,
                             static_cast<int64_t>(std::floor((slowest - extra(c)) / layer + 1e-9)));
  };
  auto fits = [&](double slowest) {
    int64_t held = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t k = capacity(c, slowest);
      if (k < least(c)) return false;
      held += k;
    }
    return held >= layers;
  };
  std::vector<double> options;
  for (int64_t c : {int64_t{0}, chunks - 1, std::min<int64_t>(1, chunks - 1)})
    for (int64_t k = least(c); k <= layers; ++k) options.push_back(extra(c) + double(k) * layer);
  std::sort(options.begin(), options.end());
  const double slowest =
      *std::partition_point(options.begin(), options.end(), [&](double t) { return !fits(t); });
  std::vector<int64_t> count(chunks);
  int64_t excess = -layers;
  for (int64_t c = 0; c < chunks; ++c) excess += count[c] = capacity(c, slowest);
  for (; excess > 0; --excess) {
    int64_t pick = -1;
    for (int64_t c = 0; c < chunks; ++c)
      if (count[c] > least(c) && (pick < 0 || extra(c) + double(count[c]) * layer >=
                                                  extra(pick) + double(count[pick]) * layer))
        pick = c;
    --count[pick];
  }
  return count;
}

}  // namespace

LayerEstimator::LayerEstimator(std::vector<std::string> base, const perf::DeviceProfile& profile,
                               LayerStack stack)
    : base_(std::move(base)), profile_(profile), stack_(std::move(stack)) {}

LayerEstimator::~LayerEstimator() = default;

std::unique_ptr<LayerEstimator> LayerEstimator::create(const std::vector<std::string>& base,
                                                       const perf::DeviceProfile& profile,
                                                       std::string* why) {
  StatusOr<CompileRequest> request = parseCompileArgs(base);
  if (!request.ok()) {
    *why = request.status().message();
    return nullptr;
  }
  llvm::Expected<ModelFile> model = readModelSource(request->model, request->onnx, request->folder);
  if (!model) {
    *why = llvm::toString(model.takeError());
    return nullptr;
  }
  std::optional<LayerStack> stack = findLayerStack(model->model(), why);
  if (!stack) return nullptr;
  std::unique_ptr<LayerEstimator> e(new LayerEstimator(base, profile, *stack));
  if (stack->size() < kShallow) {
    *why = "the model's stack has " + std::to_string(stack->size()) + " layers; estimates need " +
           std::to_string(kShallow);
    return nullptr;
  }
  e->onnx_ = isOnnxFile(request->model);
  e->path_ = request->model;
  e->translate_ = request->onnx;
  e->folder_ = request->folder;
  e->batch_ = request->options.batchSize;
  // A dtc model's copies serve every micro-batch size; an ONNX export is translated at each.
  StatusOr<Shallow> shallow = e->copies(*model, 0);
  if (!shallow.ok()) {
    *why = shallow.status().message();
    return nullptr;
  }
  return e;
}

StatusOr<LayerEstimator::Shallow> LayerEstimator::copies(const ModelFile& model,
                                                         int64_t microBatch) {
  llvm::Expected<ModelFile> shallow = keepLayers(model, stack_, kShallow);
  if (!shallow) return Status::InvalidInput(llvm::toString(shallow.takeError()));
  Shallow out = std::make_shared<const ModelFile>(std::move(*shallow));
  std::lock_guard<std::mutex> lock(mutex_);
  return shallow_[onnx_ ? microBatch : 0] = out;
}

StatusOr<LayerEstimator::Shallow> LayerEstimator::copiesFor(int64_t microBatch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = shallow_.find(onnx_ ? microBatch : 0); it != shallow_.end()) return it->second;
  }
  onnx_import::TranslateOptions options = translate_;
  options.batch = microBatch;
  llvm::Expected<ModelFile> model = readModelSource(path_, options, folder_);
  if (!model) return Status::InvalidInput(llvm::toString(model.takeError()));
  return copies(*model, microBatch);
}

StatusOr<std::shared_ptr<const LayerUnit>> LayerEstimator::unit(
    const std::vector<std::string>& flags, int64_t microBatch, int64_t microBatches) {
  const std::string key = explore_report::join(flags) + " @" + std::to_string(microBatch) +
                          (microBatches > 1 ? " accumulated" : "");
  std::shared_ptr<std::promise<StatusOr<std::shared_ptr<const LayerUnit>>>> mine;
  std::shared_future<StatusOr<std::shared_ptr<const LayerUnit>>> result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = units_.find(key);
    if (it != units_.end()) {
      result = it->second;
    } else {
      mine = std::make_shared<std::promise<StatusOr<std::shared_ptr<const LayerUnit>>>>();
      result = units_[key] = mine->get_future().share();
    }
  }
  if (!mine) return result.get();
  auto build = [&]() -> StatusOr<std::shared_ptr<const LayerUnit>> {
    DTC_ASSIGN_OR_RETURN(Shallow shallow, copiesFor(microBatch));
    std::vector<std::string> args = base_;
    args.insert(args.end(), flags.begin(), flags.end());
    DTC_ASSIGN_OR_RETURN(CompileRequest request, parseCompileArgs(args));
    request.options.batchSize = microBatch;
    request.options.trial = true;
    request.threaded = false;
    request.loaded = shallow;
    DTC_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, compilePlan(request));
    Compiled compiled;
    DTC_ASSIGN_OR_RETURN(compiled.plan, Plan::fromFileBytes(std::move(bytes), "estimate"));
    // Accumulated micro-batches reduce their gradients over dp once, after the last.
    // (ZeRO-2 and 3 reduce-scatter each micro-batch's as it comes.)
    if (const auto* mesh = compiled.plan.root().mesh();
        mesh && microBatches > 1 && request.options.memory.zeroStage < 2)
      for (uint32_t a = 0; a < mesh->size(); ++a)
        if (mesh->Get(a)->name()->str() == "dp") compiled.clock.deferAxis = static_cast<int>(a);
    DTC_ASSIGN_OR_RETURN(compiled.prediction,
                         perf::predictStep(compiled.plan, profile_, &compiled.clock));
    auto u = std::make_shared<LayerUnit>();
    DTC_RETURN_IF_ERROR(priceParts(compiled, stack_, profile_, *u));
    u->arenaShallow = compiled.plan.maxArenaBytes();
    const perf::StepPrediction& two = compiled.prediction;
    // FLOPs over the setting's ranks: the plan's, in the shares its steps hold.
    u->flopsLayer = u->flopsShare * two.flopsPerStep;
    u->flopsRest = two.flopsPerStep - kShallow * u->flopsLayer;
    if (two.utilisation > 0)
      u->peakFlops = two.flopsPerStep / (two.stepSeconds * double(two.devices) * two.utilisation);
    u->tokens = two.tokensPerStep;
    return std::shared_ptr<const LayerUnit>(u);
  };
  StatusOr<std::shared_ptr<const LayerUnit>> built = build();
  mine->set_value(built);
  return built;
}

void LayerEstimator::estimate(ExploreCandidate& c, uint64_t budget) {
  c.built = true;
  c.estimated = true;
  const int64_t pp = c.pp, v = std::max<int64_t>(c.layout.virtualStages, 1),
                m = c.layout.microBatchesOrOne(), layers = stack_.size();
  const int64_t chunks = pp * v;
  // The first chunk may hold the embedding alone, the last the head alone.
  const std::pair<bool, bool> bareEnds = {stack_.nodesBefore, !stack_.nodeAfter.empty()};
  if (chunks > mostChunks()) {
    c.unpriced = true;
    c.reason = "more pipeline chunks (" + std::to_string(chunks) + ") than layers (" +
               std::to_string(layers) + ") and the nodes around them";
    return;
  }
  StatusOr<std::shared_ptr<const LayerUnit>> got =
      unit(c.layout.withoutPipeline().flags(), batch_ / m, m);
  while (!got.ok() && (c.keepVocabularyWhole(got.status()) ||
                       c.keepSequenceOrder(got.status())))  // as a whole compile does
    got = unit(c.layout.withoutPipeline().flags(), batch_ / m, m);
  if (!got.ok()) {
    c.reason = got.status().message();
    return;
  }
  const LayerUnit& u = **got;
  const std::vector<int64_t> count =
      pp > 1 ? cutLayers(u, layers, chunks, bareEnds) : std::vector<int64_t>{layers};
  if (pp > 1) {
    std::string cuts;
    for (int64_t ch = 1, first = count[0]; ch < chunks; first += count[ch++])
      cuts += (cuts.empty() ? "" : ",") +
              (first < layers ? stack_.firstNodes[first] : stack_.nodeAfter);
    c.layout.stageCuts = cuts;
  }
  // Each chunk's forward and backward of one micro-batch.
  std::vector<Cost> forward(chunks), backward(chunks);
  for (int64_t ch = 0; ch < chunks; ++ch) {
    forward[ch] = u.layerForward.scaled(double(count[ch]));
    backward[ch] = u.layerBackward.scaled(double(count[ch]));
    if (ch == 0) {
      forward[ch] += u.embedForward;
      backward[ch] += u.embedBackward;
    }
    if (ch == chunks - 1) {
      forward[ch] += u.headForward;
      backward[ch] += u.headBackward;
    }
  }
  // A transfer between stages: pp is the mesh's outermost axis, so neighbours are dp*ep*tp ranks
  // apart.
  const int64_t stride = c.dp * c.ep * c.cp * c.tp;
  const perf::Link& link =
      stride >= profile_.devicesPerNode ? profile_.interNode : profile_.intraNode;
  const double transfer = pp > 1 ? link.latencySeconds + u.transferBytes / link.bytesPerSecond : 0;
  pipeline::PipelineConfig config;
  config.stages = pp;
  config.virtualStages = v;
  config.microBatches = m;
  // Without a pipeline the one stage runs each micro-batch's forward, then its backward (as
  // accumulation unrolls them): one micro-batch's activations at a time.
  config.schedule =
      pp > 1 ? (c.layout.schedule.empty() ? std::string("1f1b") : c.layout.schedule) : "1f1b";
  std::vector<uint64_t> kept(chunks);
  for (int64_t ch = 0; ch < chunks; ++ch) kept[ch] = u.stashLayer * count[ch];
  std::vector<PassPrice> forwardPrice, backwardPrice;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    forwardPrice.push_back({forward[ch].total, forward[ch].kernels});
    backwardPrice.push_back({backward[ch].total, backward[ch].kernels});
  }
  StatusOr<ScheduleRun> run = runSchedule(config, forwardPrice, backwardPrice, kept, transfer);
  if (!run.ok()) {
    c.reason = run.status().message();
    return;
  }
  perf::StepPrediction& p = c.prediction;
  p = {};
  p.devices = pp * c.dp * c.ep * c.cp * c.tp;
  // The device holding the last chunk (the head): the last, or under zb-v the first.
  const int64_t headDevice = config.deviceOf(chunks - 1);
  for (int64_t s = 0; s < pp; ++s) {
    const std::vector<int64_t> here = config.chunksOf(s);
    int64_t held = 0;
    for (int64_t ch : here) held += count[ch];
    Cost update = u.layerUpdate.scaled(double(held));
    if (s == 0) update += u.firstUpdate;
    if (s == headDevice) update += u.lastUpdate;
    if (m > 1) {
      update += u.accumulateLayer.scaled(double(held * (m - 1)));
      if (s == 0 || s == headDevice) update += u.accumulateOutside.scaled(double(m - 1));
    }
    // The deferred reductions start as the last micro-batch's backward finishes each layer's
    // gradients, on the comm stream beside the backward of the layers before it: all but the
    // last-finished layer's share hides behind that backward's kernels.
    if (const double deferred = u.deferredLayer * double(held) + (s == 0 ? u.deferredFirst : 0);
        deferred > 0 && held > 0) {
      double lastBackward = 0;
      for (int64_t ch : here) lastBackward += backward[ch].kernels;
      update.total -= std::min(deferred - u.deferredLayer, lastBackward);
    }
    // The stage's collectives, all of them on its comm stream: the step takes at least their
    // seconds. The schedule's times are each part's marginal seconds in the shallow copy, where
    // the comm stream has room to spare; many layers' per-tensor collectives (ZeRO-1's
    // reduce-scatters and gathers) fill it.
    double comm = update.comm;
    for (int64_t ch : here) comm += (forward[ch].comm + backward[ch].comm) * double(m);
    perf::StagePrediction stage;
    stage.stage = pp > 1 ? static_cast<int>(s) : -1;
    stage.stepSeconds = std::max(run->end[s] + update.total, comm);
    stage.computeSeconds = run->kernels[s] + update.kernels;
    stage.bubbleSeconds = run->idle[s];
    stage.exposedCommunicationSeconds =
        std::max(0.0, stage.stepSeconds - stage.computeSeconds - stage.bubbleSeconds);
    stage.communicationSeconds = comm;
    p.stages.push_back(stage);
    if (stage.stepSeconds >= p.stepSeconds) {
      p.stepSeconds = stage.stepSeconds;
      p.computeSeconds = stage.computeSeconds;
      p.bubbleSeconds = stage.bubbleSeconds;
      p.exposedCommunicationSeconds = stage.exposedCommunicationSeconds;
    }
    const uint64_t state =
        u.stateLayer * held +
        (pp == 1 ? u.stateOutside
                 : (s == 0 ? u.stateFirst : 0) + (s == headDevice ? u.stateLast : 0));
    // The shallow copy's arena with its layers' activations swapped for the stage's.
    const uint64_t shallowStash = kShallow * u.stashLayer;
    // ... and its layers' weight copies for the stage's.
    const uint64_t shallowCopies = kShallow * u.weightCopiesLayer;
    // Less the share of its other bytes from peaks the stage does not reach (the head's, say,
    // on a stage without it).
    const uint64_t transientAll = std::max(
        {u.transientEmbed, u.transientLayer, u.transientHead, u.transientRest, uint64_t{1}});
    const uint64_t transientHeld =
        std::max({s == 0 ? u.transientEmbed : 0, held > 0 ? u.transientLayer : 0,
                  s == headDevice ? u.transientHead : 0, u.transientRest});
    const uint64_t other = u.arenaShallow - std::min(u.arenaShallow, shallowStash + shallowCopies);
    const uint64_t arena =
        static_cast<uint64_t>(double(other) * double(transientHeld) / double(transientAll)) +
        (pp > 1 ? run->stashPeak[s] : std::max(run->stashPeak[s], shallowStash)) +
        u.weightCopiesLayer * uint64_t(held);
    // Accumulated micro-batches keep their gradients' running sums for the whole step.
    const uint64_t sums = m > 1 ? u.gradientLayer * held + (s == 0 ? u.gradientFirst : 0) +
                                      (s == headDevice ? u.gradientLast : 0)
                                : 0;
    c.memoryPerRank = std::max(c.memoryPerRank, state + arena + sums);
  }
  p.flopsPerStep = double(m) * (u.flopsRest + double(layers) * u.flopsLayer);
  p.samplesPerStep = batch_;
  p.tokensPerStep = u.tokens * m;
  if (p.stepSeconds > 0 && u.peakFlops > 0)
    p.utilisation = p.flopsPerStep / (p.stepSeconds * double(p.devices) * u.peakFlops);
  c.feasible = !budget || c.memoryPerRank <= budget;
  if (!c.feasible)
    c.reason = "needs " + explore_report::gib(c.memoryPerRank) + " per rank, over the " +
               explore_report::gib(budget) + " budget";
}

}  // namespace dtc
