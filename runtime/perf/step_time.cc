#include "perf/step_time.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "ops/device_kind.h"
#include "ops/kernel_registry.h"
#include "ops/step_scratch.h"
#include "perf/step_simulation.h"
#include "planfile/communication.h"
#include "planfile/flops.h"
#include "planfile/function_names.h"

namespace dtc::perf {
namespace {

using Shape = std::vector<int64_t>;

Shape shapeOf(const plan::Value& v) {
  return v.shape() ? Shape(v.shape()->begin(), v.shape()->end()) : Shape{};
}

double elements(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}

int64_t intAttr(const plan::Step& step, const char* name) {
  const plan::Attr* a = findStepAttr(step, name);
  return a ? a->i() : 0;
}

std::vector<int64_t> axesAttr(const plan::Step& step) {
  const plan::Attr* a = findStepAttr(step, "axes");
  return a && a->ints() ? std::vector<int64_t>(a->ints()->begin(), a->ints()->end())
                        : std::vector<int64_t>{};
}

// FLOPs a step computes: its contraction FLOPs, of which a causal attention kernel skips the
// masked half.
bool causalAttention(Kernel k) {
  return k == Kernel::causal_attention || k == Kernel::causal_attention_grad ||
         k == Kernel::causal_attention_qkv || k == Kernel::causal_attention_qkv_grad;
}

// A block of a sequence (context parallelism): attention split by positions.
bool sequenceBlock(const plan::Step& step) {
  const plan::Attr* axes = findStepAttr(step, "seq_axes");
  return (axes && axes->ints() && axes->ints()->size() > 0) || intAttr(step, "seq_chunks") > 0;
}

double stepFlops(const plan::Function& f, const plan::Step& step) {
  const double flops = contractionFlops(f, step);
  return causalAttention(step.kernel()) ? flops / 2 : flops;
}

// The head dimension of an attention step: q's last dimension (the backward's second input), or
// the projection's over heads (3·heads on the fused one).
double attentionHeadDim(const plan::Function& f, const plan::Step& step) {
  const bool grad = step.kernel() == Kernel::causal_attention_grad ||
                    step.kernel() == Kernel::causal_attention_qkv_grad;
  const uint32_t at = grad ? 1 : 0;
  if (!step.inputs() || step.inputs()->size() <= at) return 64;
  const Shape q = shapeOf(*f.values()->Get(step.inputs()->Get(at)));
  if (q.empty() || q.back() <= 0) return 64;
  const bool packed = step.kernel() == Kernel::causal_attention_qkv ||
                      step.kernel() == Kernel::causal_attention_qkv_grad;
  const int64_t heads = packed ? intAttr(step, "heads") : 0;
  const double parts = step.inputs()->size() == (grad ? 4u : 1u) ? 3.0 : 1.0;
  if (packed) return heads > 0 ? static_cast<double>(q.back()) / (parts * heads) : 64;
  return static_cast<double>(q.back());
}

double stepBytes(const plan::Function& f, const plan::Step& step) {
  double bytes = 0;
  for (const auto* list : {step.inputs(), step.outputs()})
    if (list)
      for (uint32_t id : *list) bytes += static_cast<double>(valueBytes(*f.values()->Get(id)));
  return bytes;
}

// Whether the profile describes a GPU, whose batched kernels fill the device with every slice.
bool gpuProfile(const DeviceProfile& profile) {
  const DeviceKind* kind = findDeviceKind(profile.device);
  return kind && kind->gpu;
}

// The FLOPs of one GEMM call of the step, which set its efficiency on the profile's curve. The
// CPU backend runs a batched GEMM as one sgemm per slice, each at the efficiency of its own size
// (attention's per-head products are small); a GPU's batched kernels fill the device with all
// slices at once.
double gemmCallFlops(const plan::Function& f, const plan::Step& step, double flops,
                     const DeviceProfile& profile) {
  if (step.kernel() != Kernel::batch_matmul || gpuProfile(profile) || !step.outputs() ||
      step.outputs()->size() < 1)
    return flops;
  const Shape out = shapeOf(*f.values()->Get(step.outputs()->Get(0)));
  if (out.size() < 3) return flops;
  const double slices = elements(out) / (static_cast<double>(out[out.size() - 1]) *
                                         static_cast<double>(out[out.size() - 2]));
  return slices > 1 ? flops / slices : flops;
}

// The FLOPs that set causal attention's rate on the profile's curve. The CPU's kernel runs the
// (batch, head) slices side by side, each at the rate of its own length, so a CPU profile's curve
// is by FLOPs per slice (calibrate.cc measures it so); a GPU's kernels fill the device with all
// of them, so its curve is by the step's FLOPs.
double attentionCallFlops(const plan::Function& f, const plan::Step& step, double flops,
                          const DeviceProfile& profile) {
  if (gpuProfile(profile) || !causalAttention(step.kernel()) || !step.outputs() ||
      step.outputs()->size() == 0)
    return flops;
  // The slices from lse [..., T]: the forward's second output, the backward's last input.
  const bool grad = step.kernel() == Kernel::causal_attention_grad ||
                    step.kernel() == Kernel::causal_attention_qkv_grad;
  if (grad && (!step.inputs() || step.inputs()->size() == 0)) return flops;
  const Shape rows = shapeOf(*f.values()->Get(grad ? step.inputs()->Get(step.inputs()->size() - 1)
                                                   : step.outputs()->Get(1)));
  if (rows.size() < 2 || rows.back() <= 0) return flops;
  const double slices = elements(rows) / static_cast<double>(rows.back());
  return slices > 1 ? flops / slices : flops;
}

// Elements of the step's largest operand.
double largestOperand(const plan::Function& f, const plan::Step& step) {
  double most = 0;
  for (const auto* list : {step.inputs(), step.outputs()})
    if (list)
      for (uint32_t id : *list) most = std::max(most, elements(shapeOf(*f.values()->Get(id))));
  return most;
}

// A multi-tensor kernel's elements are every tensor's: each input of a cast, each first of an
// update's (p, g, m, v) (then step, lr).
double multiTensorElements(const plan::Function& f, const plan::Step& step, uint32_t stride) {
  double total = 0;
  if (step.inputs())
    for (uint32_t k = 0; k < step.inputs()->size(); k += stride)
      if (stride == 1 || k + 4 < step.inputs()->size())
        total += elements(shapeOf(*f.values()->Get(step.inputs()->Get(k))));
  return total;
}

// The elements a step's cost per element counts.
double pricedElements(const plan::Function& f, const plan::Step& step) {
  switch (step.kernel()) {
    case Kernel::multi_tensor_adamw: return multiTensorElements(f, step, 4);
    case Kernel::multi_tensor_cast: return multiTensorElements(f, step, 1);
    default: return largestOperand(f, step);
  }
}

// The name a profile lists a kernel's cost per element under: its own, with "_tanh" for GELU's
// tanh approximation; a multi-tensor kernel computes each element as its per-tensor kernel.
std::string elementKey(const plan::Step& step) {
  if (step.kernel() == Kernel::multi_tensor_adamw) return "adamw_update";
  if (step.kernel() == Kernel::multi_tensor_cast) return "cast";
  std::string key = kernelName(step.kernel());
  if (intAttr(step, "approximate_tanh")) key += "_tanh";
  return key;
}

double secondsPerElement(const DeviceProfile& profile, const plan::Step& step, DType type) {
  if (const double s = profile.secondsPerElement(elementKey(step), type)) return s;
  // Where the profile has no cost for a fused kernel, the one kernels.def prices it as.
  const KernelInfo* info = kernelInfo(step.kernel());
  return info && info->pricedAs ? profile.secondsPerElement(info->pricedAs, type) : 0;
}

TaskKind kindOf(Kernel k) {
  switch (k) {
    case Kernel::all_reduce:
    case Kernel::all_gather:
    case Kernel::reduce_scatter:
    case Kernel::all_to_all:
    case Kernel::ring_shift:
    case Kernel::collective_broadcast: return TaskKind::kCollective;
    case Kernel::send: return TaskKind::kSend;
    case Kernel::recv: return TaskKind::kRecv;
    default: return TaskKind::kCompute;
  }
}

// The mesh seen by collectives: which link a group over some axes crosses.
struct Mesh {
  std::vector<int64_t> sizes;
  int devicesPerNode = 1;

  // Whether rank 0's group over `axes` spans more than one node (ranks are row-major).
  bool crossesNodes(const std::vector<int64_t>& axes) const {
    int64_t farthest = 0;
    for (int64_t a : axes) {
      if (a < 0 || a >= static_cast<int64_t>(sizes.size())) continue;
      int64_t stride = 1;
      for (size_t b = a + 1; b < sizes.size(); ++b) stride *= sizes[b];
      farthest += (sizes[a] - 1) * stride;
    }
    return farthest / std::max(devicesPerNode, 1) > 0;
  }
};

// How many times its plan bytes a 16-bit collective puts on the wire: the runtimes send the f32
// form of widened copies, except where NCCL runs it in its own type (CUDA: all-reduce sums, and
// reduce-scatters and all-gathers whose blocks are contiguous). Sends, receives and ring shifts
// move bytes.
double wireScale(const plan::Function& f, const plan::Step& step, bool cuda) {
  const Kernel k = step.kernel();
  if (k == Kernel::send || k == Kernel::recv || k == Kernel::ring_shift || !step.inputs() ||
      step.inputs()->size() == 0 || !step.outputs() || step.outputs()->size() == 0 || !f.values())
    return 1;
  const plan::Value& in = *f.values()->Get(step.inputs()->Get(0));
  if (in.dtype() != plan::DType::f16 && in.dtype() != plan::DType::bf16) return 1;
  if (!cuda) return 2;
  const plan::Attr* r = findStepAttr(step, "reduction");
  const bool max = r && r->s() && r->s()->str() == "max";
  const plan::Value& whole =
      k == Kernel::all_gather ? *f.values()->Get(step.outputs()->Get(0)) : in;
  const std::vector<int64_t> shape =
      whole.shape() ? std::vector<int64_t>(whole.shape()->begin(), whole.shape()->end())
                    : std::vector<int64_t>{};
  return nativeHalfCollective(k, max, shape, k == Kernel::all_reduce ? 0 : intAttr(step, "dim"))
             ? 1
             : 2;
}

// Seconds of one collective or transfer: the ring algorithm's steps, and the bytes each device
// sends (planfile/communication.h; a receive waits for what its peer sends), on its group's link.
double communicationSeconds(const Plan& plan, const plan::Function& f, const plan::Step& step,
                            const Mesh& mesh, const DeviceProfile& p, bool cuda) {
  std::optional<CollectiveCost> c = collectiveCost(plan, f, step);
  if (!c) return 0;
  const double n = static_cast<double>(c->group);
  const Link& link = mesh.crossesNodes(c->axisIndices) ? p.interNode : p.intraNode;
  const double a = link.latencySeconds;
  double bw = link.bytesPerSecond;
  if (step.kernel() == Kernel::reduce_scatter && link.reduceScatterBytesPerSecond > 0)
    bw = link.reduceScatterBytesPerSecond;
  if (step.kernel() == Kernel::all_gather && link.allGatherBytesPerSecond > 0)
    bw = link.allGatherBytesPerSecond;
  const double wire =
      wireScale(f, step, cuda) *
      (step.kernel() == Kernel::recv ? static_cast<double>(c->bytes) : c->sentBytes) / bw;
  switch (step.kernel()) {
    case Kernel::all_reduce: return 2 * (n - 1) * a + wire;
    case Kernel::reduce_scatter:
    case Kernel::all_to_all:
    case Kernel::all_gather: return (n - 1) * a + wire;
    case Kernel::collective_broadcast: return std::ceil(std::log2(std::max(n, 1.0))) * a + wire;
    default: return a + wire;  // send, recv, ring_shift
  }
}

// One rank's program, priced: its tasks for the simulator and what they add up to.
struct Program {
  int stage = -1;
  const plan::Function* function = nullptr;
  std::vector<Task> tasks;
  StagePrediction result;
  std::map<int, double> flopsByType;  // GEMM FLOPs by element type
  std::map<std::string, double> byKernel;
};

struct Pricing {
  const Plan& plan;
  const DeviceProfile& profile;
  Mesh mesh;
  bool overlap = false;           // collectives on their own stream (CUDA)
  bool libraryAttention = false;  // the profile's device runs 16-bit attention on cuDNN
  int stages = 0, pipelineAxis = -1;
  StepClock* timeline = nullptr;  // plans without a pipeline: each step's prices

  int peerStage(int stage, const plan::Step& step, bool send) const {
    const int64_t shift = intAttr(step, "shift");
    const int64_t at = send ? stage + shift : stage - shift;
    return static_cast<int>(((at % stages) + stages) % stages);
  }
  // A gradient reduction over the axis the caller defers (StepClock::deferAxis).
  bool deferred(const plan::Step& step) const {
    if (!timeline || timeline->deferAxis < 0) return false;
    if (step.kernel() != Kernel::all_reduce && step.kernel() != Kernel::reduce_scatter)
      return false;
    const std::vector<int64_t> axes = axesAttr(step);
    return std::find(axes.begin(), axes.end(), timeline->deferAxis) != axes.end();
  }
  bool alongPipeline(const plan::Step& step) const {
    const std::vector<int64_t> axes = axesAttr(step);
    return stages > 0 && axes.size() == 1 && axes[0] == pipelineAxis;
  }

  // A compute kernel's seconds: the roofline of its FLOPs and bytes, or its cost per element
  // where the profile has one, plus the fixed cost of a launch.
  double computeSeconds(Program& p, const plan::Step& step) const {
    const plan::Function& f = *p.function;
    const double flops = stepFlops(f, step), counted = contractionFlops(f, step);
    const DType type = step.inputs() && step.inputs()->size()
                           ? toDType(f.values()->Get(step.inputs()->Get(0))->dtype())
                           : DType::kF32;
    // A reshape is a view of its operand: nothing moves.
    double seconds =
        step.kernel() == Kernel::reshape ? 0 : stepBytes(f, step) / profile.memoryBytesPerSecond;
    if (const double perElement = secondsPerElement(profile, step, type))
      seconds = std::max(seconds, perElement * pricedElements(f, step));
    if (flops > 0) {
      // Attention at its own measured rate where the profile has one, else as a GEMM.
      const bool grad = step.kernel() == Kernel::causal_attention_grad ||
                        step.kernel() == Kernel::causal_attention_qkv_grad;
      // The fused projection's curve is cuDNN's on CUDA, where 16-bit attention over whole
      // sequences runs on the same kernels (blocks of a sequence stay on dtc's own).
      const bool qkv = step.kernel() == Kernel::causal_attention_qkv ||
                       step.kernel() == Kernel::causal_attention_qkv_grad ||
                       (causalAttention(step.kernel()) && libraryAttention && type != DType::kF32 &&
                        !sequenceBlock(step));
      const double headDim = causalAttention(step.kernel()) ? attentionHeadDim(f, step) : 64;
      const double callFlops = attentionCallFlops(f, step, flops, profile);
      double rate = !causalAttention(step.kernel()) ? 0
                    : qkv ? profile.qkvAttentionFlopsPerSecond(grad, type, callFlops, headDim)
                          : profile.attentionFlopsPerSecond(grad, type, callFlops, headDim);
      if (rate <= 0)
        rate = profile.gemmFlopsPerSecond(type, gemmCallFlops(f, step, flops, profile));
      seconds = std::max(seconds, flops / rate);
      p.flopsByType[static_cast<int>(type)] += counted;
    }
    return seconds + profile.kernelSeconds;
  }

  // `p`'s steps as tasks: each kernel and collective priced on the profile, each reading the
  // steps that produced its inputs.
  void price(Program& p) const {
    const plan::Function& f = *p.function;
    if (!f.steps()) return;
    std::vector<int64_t> producer(f.values() ? f.values()->size() : 0, -1);
    for (const plan::Step* step : *f.steps()) {
      Task task;
      task.kind = kindOf(step->kernel());
      if (step->inputs())
        for (uint32_t id : *step->inputs())
          if (producer[id] >= 0) task.after.push_back(static_cast<size_t>(producer[id]));
      if (timeline)
        for (auto* v :
             {&timeline->kernel, &timeline->deferred, &timeline->flops, &timeline->communication})
          v->push_back(0);
      if (task.kind == TaskKind::kCompute) {
        task.seconds = computeSeconds(p, *step);
        const double counted = contractionFlops(f, *step);
        p.byKernel[kernelName(step->kernel())] += task.seconds;
        p.result.computeSeconds += task.seconds;
        p.result.flops += counted;
        if (timeline) {
          timeline->kernel.back() = task.seconds;
          timeline->flops.back() = counted;
        }
      } else if (task.kind == TaskKind::kRecv && alongPipeline(*step)) {
        task.stream = overlap ? Stream::kCommunication : Stream::kCompute;
        task.receives =
            MessageKey{peerStage(p.stage, *step, false), p.stage, intAttr(*step, "tag")};
      } else if (deferred(*step)) {
        // Priced by the caller where the reduction really runs; its result is ready at once.
        timeline->deferred.back() = communicationSeconds(plan, f, *step, mesh, profile, overlap);
        task.stream = Stream::kNone;
      } else {
        task.seconds = communicationSeconds(plan, f, *step, mesh, profile, overlap);
        task.stream = overlap ? Stream::kCommunication : Stream::kCompute;
        p.result.communicationSeconds += task.seconds;
        if (timeline) timeline->communication.back() = task.seconds;
        if (task.kind == TaskKind::kSend && alongPipeline(*step)) {
          task.sends = MessageKey{p.stage, peerStage(p.stage, *step, true), intAttr(*step, "tag")};
          // The sender's copy out is its only cost; the wire time is the receiver's wait.
          task.release = profile.intraNode.latencySeconds;
        } else if (!overlap) {
          task.exposed = task.seconds;
        }
      }
      if (step->outputs())
        for (uint32_t id : *step->outputs()) producer[id] = static_cast<int64_t>(p.tasks.size());
      p.tasks.push_back(std::move(task));
    }
  }
};

// Tokens per sample: the non-batch dimensions of the first int64 data input (token ids), whole;
// 0 if the function has none (a middle pipeline stage).
int64_t tokensPerSample(const Plan& plan, const plan::Function& f) {
  if (!f.arguments()) return 0;
  const auto* mesh = plan.root().mesh();
  for (const plan::Binding* b : *f.arguments()) {
    if (b->role() != plan::Role::data) continue;
    const plan::Value& v = *f.values()->Get(b->value());
    if (toDType(v.dtype()) != DType::kI64 || !v.shape() || v.shape()->size() < 2) continue;
    int64_t tokens = 1;
    for (uint32_t d = 0; d < v.shape()->size(); ++d) {
      if (static_cast<int>(d) == b->batch_dim()) continue;
      int64_t size = v.shape()->Get(d);
      if (b->sharding() && d < b->sharding()->size() && mesh)
        if (const auto* axes = b->sharding()->Get(d)->axes())
          for (int a : *axes)
            if (a >= 0 && static_cast<uint32_t>(a) < mesh->size()) size *= mesh->Get(a)->size();
      tokens *= size;
    }
    return tokens;
  }
  return 0;
}

std::string seconds(double s) {
  std::ostringstream os;
  os.precision(4);
  if (s >= 1)
    os << s << " s";
  else
    os << s * 1e3 << " ms";
  return os.str();
}

}  // namespace

StatusOr<StepPrediction> predictStep(const Plan& plan, const DeviceProfile& profile,
                                     StepClock* clock) {
  Pricing pricing{plan, profile, {meshSizes(plan), profile.devicesPerNode}};
  pricing.timeline = plan.stages() > 0 ? nullptr : clock;
  const std::string device = plan.root().device() ? plan.root().device()->str() : "cpu";
  const DeviceKind* kind = findDeviceKind(device);
  pricing.overlap = kind && kind->overlapsCollectives;
  const DeviceKind* profiled = findDeviceKind(profile.device);
  pricing.libraryAttention = profiled && profiled->libraryAttention;
  pricing.stages = static_cast<int>(plan.stages());
  pricing.pipelineAxis = plan.root().pipeline_axis();
  std::vector<Program> programs;
  for (int stage = pricing.stages > 0 ? 0 : -1; stage < std::max(pricing.stages, 0); ++stage) {
    const plan::Function* f = plan.function(fn::kTrainStep, stage);
    if (!f) f = plan.function(fn::kTrainStep);
    if (!f)
      return Status::InvalidInput(plan.name() + ": no train_step to predict" +
                                  (stage >= 0 ? " for stage " + std::to_string(stage) : ""));
    Program p;
    p.stage = stage;
    p.function = f;
    p.result.stage = stage;
    pricing.price(p);
    programs.push_back(std::move(p));
    if (stage < 0) break;
  }
  std::vector<std::vector<Task>> tasks;
  for (Program& p : programs) tasks.push_back(std::move(p.tasks));
  Simulation sim = simulateStep(tasks);
  if (sim.stuck)
    return Status::InvalidInput(plan.name() +
                                ": the stages' transfers do not pair up (a receive waits forever)");
  for (size_t i = 0; i < programs.size(); ++i) {
    const DeviceRun& run = sim.devices[i];
    StagePrediction& r = programs[i].result;
    r.bubbleSeconds = run.bubble;
    r.exposedCommunicationSeconds = run.exposed;
    r.stepSeconds = run.end();
    if (pricing.timeline)
      for (const TaskTime& t : run.tasks) pricing.timeline->ends.push_back(t.computeClock);
  }
  StepPrediction out;
  out.devices = std::max<int64_t>(meshDevices(plan), 1);
  const int64_t ranksPerStage = pricing.stages > 0 ? out.devices / pricing.stages : out.devices;
  std::map<int, double> flopsByType;
  for (Program& p : programs) {
    p.result.kernels.assign(p.byKernel.begin(), p.byKernel.end());
    std::sort(p.result.kernels.begin(), p.result.kernels.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    out.stages.push_back(p.result);
    out.flopsPerStep += p.result.flops * static_cast<double>(ranksPerStage);
    for (const auto& [type, flops] : p.flopsByType) flopsByType[type] += flops;
    if (p.result.stepSeconds >= out.stepSeconds) {
      out.stepSeconds = p.result.stepSeconds;
      // The bubble is what the stage waited for other stages; the rest of the step beyond its
      // compute waited for collectives (on CUDA also a last collective after the compute).
      out.computeSeconds = p.result.computeSeconds;
      out.bubbleSeconds = std::min(p.result.bubbleSeconds,
                                   std::max(0.0, p.result.stepSeconds - p.result.computeSeconds));
      const double rest = p.result.stepSeconds - p.result.computeSeconds - out.bubbleSeconds;
      out.exposedCommunicationSeconds = rest > 1e-9 * p.result.stepSeconds ? rest : 0.0;
      if (out.exposedCommunicationSeconds == 0) out.computeSeconds += std::max(rest, 0.0);
    }
  }
  out.samplesPerStep = plan.root().batch_size() * std::max(plan.root().micro_batches(), 1);
  // The token ids of whichever stage reads them (under interleaving the first program listed
  // may be a middle one).
  int64_t tokens = 0;
  for (const Program& p : programs)
    if ((tokens = tokensPerSample(plan, *p.function)) > 0) break;
  out.tokensPerStep = out.samplesPerStep * std::max<int64_t>(tokens, 1);
  DType gemmType = DType::kF32;
  double most = 0;
  for (const auto& [type, flops] : flopsByType)
    if (flops > most) {
      most = flops;
      gemmType = static_cast<DType>(type);
    }
  const double peak = profile.peakFlopsPerSecond(gemmType);
  if (out.stepSeconds > 0 && peak > 0)
    out.utilisation =
        out.flopsPerStep / (out.stepSeconds * static_cast<double>(out.devices) * peak);
  return out;
}

std::string predictionText(const StepPrediction& p, const DeviceProfile& profile) {
  std::ostringstream os;
  os << "predicted step on " << profile.name << profile.basisNote() << ": "
     << seconds(p.stepSeconds) << " = compute " << seconds(p.computeSeconds)
     << " + exposed communication " << seconds(p.exposedCommunicationSeconds) << " + bubble "
     << seconds(p.bubbleSeconds) << "\n";
  os.precision(4);
  os << "predicted throughput: " << p.tokensPerSecond() << " tokens/s (" << p.tokensPerStep
     << " per step), " << 100 * p.utilisation << "% of the devices' peak FLOP/s\n";
  for (const StagePrediction& s : p.stages)
    if (s.stage >= 0)
      os << "  stage " << s.stage << ": ends " << seconds(s.stepSeconds) << ", compute "
         << seconds(s.computeSeconds) << ", communication " << seconds(s.communicationSeconds)
         << " (" << seconds(s.exposedCommunicationSeconds) << " exposed)\n";
  return os.str();
}

// A step's breakdown as JSON members.
static void setBreakdown(io::Json& j, double step, double compute, double exposed, double bubble) {
  j.set("step_s", step);
  j.set("compute_s", compute);
  j.set("exposed_communication_s", exposed);
  j.set("bubble_s", bubble);
}

std::string predictionJson(const StepPrediction& p, const DeviceProfile& profile) {
  io::Json j = io::Json::object();
  j.set("profile", profile.name);
  if (!profile.basis.empty()) j.set("profile_basis", profile.basis);
  setBreakdown(j, p.stepSeconds, p.computeSeconds, p.exposedCommunicationSeconds, p.bubbleSeconds);
  j.set("tokens_per_step", p.tokensPerStep);
  j.set("tokens_per_s", p.tokensPerSecond());
  j.set("flops_per_step", p.flopsPerStep);
  j.set("utilisation", p.utilisation);
  io::Json stages;
  for (const StagePrediction& s : p.stages) {
    io::Json e = io::Json::object();
    e.set("stage", s.stage);
    setBreakdown(e, s.stepSeconds, s.computeSeconds, s.exposedCommunicationSeconds,
                 s.bubbleSeconds);
    e.set("communication_s", s.communicationSeconds);
    io::Json kernels = io::Json::object();
    for (const auto& [name, t] : s.kernels) kernels.set(name, t);
    e.set("kernels_s", kernels);
    stages.push(e);
  }
  j.set("stages", stages);
  return j.dump();
}

}  // namespace dtc::perf
