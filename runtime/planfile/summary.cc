#include "planfile/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "ops/kernel_registry.h"
#include "planfile/communication.h"
#include "planfile/fp8_summary.h"
#include "planfile/function_names.h"
#include "planfile/moe_summary.h"

namespace dtc {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else
      out += c;
  }
  return out + "\"";
}

std::string jsonShape(const flatbuffers::Vector<int64_t>* shape) {
  std::string s = "[";
  if (shape)
    for (size_t i = 0; i < shape->size(); ++i) s += (i ? "," : "") + std::to_string(shape->Get(i));
  return s + "]";
}

const char* initName(plan::InitKind k) { return plan::EnumNameInitKind(k); }

struct FunctionStats {
  std::map<std::string, int> ops;
  int arenaBuffers = 0;
  uint64_t naiveArenaBytes = 0;  // every arena value in its own buffer: what reuse saves
  uint64_t largestScratch = 0;   // the most planned scratch one step uses
  std::string largestScratchStep;
};

FunctionStats stats(const plan::Function& f) {
  FunctionStats s;
  if (f.steps())
    for (const plan::Step* step : *f.steps()) {
      s.ops[kernelName(step->kernel())]++;
      if (step->scratch_bytes() > s.largestScratch) {
        s.largestScratch = step->scratch_bytes();
        s.largestScratchStep =
            kernelName(step->kernel()) +
            (step->loc() && step->loc()->size() ? " at " + step->loc()->str() : "");
      }
    }
  if (f.values())
    for (const plan::Value* v : *f.values())
      if (v->region() == plan::Region::arena) {
        ++s.arenaBuffers;
        s.naiveArenaBytes += (valueBytes(*v) + 63) / 64 * 64;
      }
  return s;
}

// Bytes of the state tensors in `role` (trainable ones only if `trainable`) that ranks of
// `stage` hold (-1: all of the plan's, a tensor every pipeline stage keeps counted once).
uint64_t bytesOf(const Plan& plan, plan::Role role, bool trainable, int stage = -1) {
  uint64_t n = 0;
  std::set<std::string> seen;
  for (const plan::StateTensor* s : *plan.root().state())
    if (s->role() == role && (!trainable || s->trainable()) && Plan::onStage(s->stage(), stage) &&
        seen.insert(s->name()->str()).second)
      n += stateTensorBytes(*s);
  return n;
}

// One rank's training step: the gradient bytes its optimizer updates read (a dp-shard of each
// under ZeRO; the whole partial gradients are arena values, freed once reduced) and the largest
// all-gather result (under ZeRO-3, a parameter gathered for one phase).
struct StepMemory {
  uint64_t grads = 0, largestGather = 0;
};

StepMemory stepMemory(const plan::Function& f) {
  StepMemory m;
  if (!f.steps() || !f.values()) return m;
  auto bytesAt = [&](const flatbuffers::Vector<uint32_t>* ids, uint32_t k) -> uint64_t {
    return ids && k < ids->size() && ids->Get(k) < f.values()->size()
               ? valueBytes(*f.values()->Get(ids->Get(k)))
               : 0;
  };
  for (const plan::Step* step : *f.steps()) {
    const std::string kernel = kernelName(step->kernel());
    if (kernel == "sgd_update" || kernel == "adamw_update") m.grads += bytesAt(step->inputs(), 1);
    if (kernel == "multi_tensor_adamw" && step->inputs())  // (p, g, m, v) per tensor, step, lr
      for (uint32_t k = 1; k + 4 < step->inputs()->size(); k += 4)
        m.grads += bytesAt(step->inputs(), k);
    if (kernel == "all_gather")
      m.largestGather = std::max(m.largestGather, bytesAt(step->outputs(), 0));
  }
  return m;
}

// What one rank of pipeline stage `stage` holds.
struct StageMemory {
  uint64_t state = 0;  // its state region: the end of its last tensor
  uint64_t params = 0, grads = 0, optimizer = 0;
  uint64_t largestGather = 0;
  uint64_t arena = 0;  // the largest arena among its functions
};

StageMemory stageMemory(const Plan& plan, int stage) {
  StageMemory m;
  for (const plan::StateTensor* s : *plan.root().state())
    if (Plan::onStage(s->stage(), stage))
      m.state = std::max<uint64_t>(m.state, s->offset() + stateTensorBytes(*s));
  m.params = bytesOf(plan, plan::Role::param, false, stage);
  const plan::Function* step =
      stage < 0 ? plan.function(fn::kTrainStep) : plan.function(fn::kTrainStep, stage);
  if (step) {
    const StepMemory sm = stepMemory(*step);
    m.grads = sm.grads;
    m.largestGather = sm.largestGather;
  }
  m.optimizer = bytesOf(plan, plan::Role::optim_state, false, stage);
  m.arena = plan.maxArenaBytes(stage);
  return m;
}

// The compiler's prediction for `stage` under the plan's schedule, or nullptr.
const plan::PipelineStage* predictedStage(const Plan& plan, int stage) {
  const auto* predicted = plan.root().pipeline_stages();
  return predicted && static_cast<uint32_t>(stage) < predicted->size() ? predicted->Get(stage)
                                                                       : nullptr;
}

// Bytes rounded to a whole number. Sums over a plan's steps are only bounded by the file's
// size, so a malformed plan can exceed 2^64: it prints the largest count instead.
uint64_t wholeBytes(double bytes) {
  const double limit = 18446744073709551616.0;  // 2^64
  return bytes + 0.5 < limit ? static_cast<uint64_t>(bytes + 0.5) : UINT64_MAX;
}

// A double as JSON writes it (no NaN or infinity there).
std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A function's name, with its stage appended in a pipeline ("eval (stage 1)").
std::string functionName(const plan::Function& f) {
  return f.name()->str() + (f.stage() >= 0 ? " (stage " + std::to_string(f.stage()) + ")" : "");
}

// Per training step, per rank: calls and bytes of each kind of transfer over each mesh axis
// group. A recv counts the bytes it receives.
void printTransfers(std::ostream& os, const Plan& plan, const plan::Function& step,
                    const std::string& prefix) {
  std::map<std::pair<std::string, std::string>, std::pair<int, double>> byKind;
  for (const CollectiveCost& c : collectivesOf(plan, step)) {
    auto& entry = byKind[{c.op, c.axes}];
    ++entry.first;
    entry.second += c.op == "recv" ? static_cast<double>(c.bytes) : c.sentBytes;
  }
  for (const auto& [key, value] : byKind)
    os << prefix << "per rank, per training step: " << key.first << " over " << key.second << ": "
       << value.first << " call(s), " << (key.first == "recv" ? "receives " : "sends ")
       << wholeBytes(value.second) << " bytes\n";
}

}  // namespace

namespace {

// A data input the step reads: one sample's shape (the batch dimension is the file's N).
struct DataInput {
  std::string name;
  plan::DType dtype;
  std::vector<int64_t> sample;  // dimensions after the batch dimension
  int64_t sequenceParts = 1;    // devices splitting the sequence (context parallelism)
  int64_t sequenceChunks = 0;   // > 0: read load-balanced in that many chunks
};

// The data inputs of train_step (eval for a plan without one), once each (a pipeline's stages
// and micro-batches repeat them).
std::vector<DataInput> dataInputs(const Plan& plan) {
  std::vector<DataInput> out;
  std::set<std::string> seen;
  const std::string function = plan.function(fn::kTrainStep) ? fn::kTrainStep : "eval";
  const std::vector<int64_t> sizes = meshSizes(plan);
  for (const plan::Function* f : *plan.root().functions()) {
    if (f->name()->str() != function || !f->arguments()) continue;
    for (const plan::Binding* b : *f->arguments()) {
      if (b->role() != plan::Role::data || !b->name() || !seen.insert(b->name()->str()).second)
        continue;
      const plan::Value& v = *f->values()->Get(b->value());
      DataInput in{b->name()->str(), v.dtype(), {}};
      // The whole sample: a sequence split over devices (context parallelism) counts whole.
      if (v.shape())
        for (uint32_t d = 1; d < v.shape()->size(); ++d) {
          int64_t n = v.shape()->Get(d);
          if (b->sharding() && d < b->sharding()->size() && b->sharding()->Get(d)->axes()) {
            for (int32_t a : *b->sharding()->Get(d)->axes())
              if (a >= 0 && static_cast<size_t>(a) < sizes.size()) n *= sizes[a];
            if (d == 1) {
              in.sequenceParts = n / v.shape()->Get(d);
              in.sequenceChunks = b->sharding()->Get(d)->sequence_chunks();
            }
          }
          in.sample.push_back(n);
        }
      out.push_back(in);
    }
  }
  return out;
}

// A language model's token input and targets: two int64 [B, T] inputs, one of them the targets.
int64_t contextLength(const Plan& plan, const std::vector<DataInput>& inputs) {
  const std::string targets = plan.root().targets() ? plan.root().targets()->str() : "";
  if (inputs.size() != 2 || inputs[0].sample != inputs[1].sample || inputs[0].sample.size() != 1)
    return 0;
  for (const DataInput& in : inputs)
    if (in.dtype != plan::DType::i64) return 0;
  if (inputs[0].name != targets && inputs[1].name != targets) return 0;
  return inputs[0].sample[0];
}

std::string dimsText(const std::vector<int64_t>& sample) {
  std::string out = "[N";
  for (int64_t d : sample) out += "," + std::to_string(d);
  return out + "]";
}

}  // namespace

uint64_t rankMemoryBytes(const Plan& plan, int stage) {
  if (stage < 0) return plan.root().state_bytes() + plan.maxArenaBytes();
  const StageMemory m = stageMemory(plan, stage);
  return m.state + m.arena;
}

std::string summarizePlanText(const Plan& plan) {
  const plan::Plan& p = plan.root();
  std::ostringstream os;
  os << "plan " << plan.name() << " (format v" << p.version() << ", by "
     << (p.producer() ? p.producer()->str() : "?") << ")\n";
  os << "batch size " << p.batch_size();
  if (p.micro_batches() > 1)
    os << " x " << p.micro_batches() << " micro-batches per step ("
       << p.batch_size() * p.micro_batches() << " samples)";
  os << "; optimizer: " << (p.optimizer() ? p.optimizer()->str() : "") << "\n";
  if (p.clip_grad_norm() > 0)
    os << "gradient clipping: global L2 norm to " << p.clip_grad_norm()
       << " (the step reports the norm)\n";
  else if (p.reports_grad_norm())
    os << "gradient norm: reported by the step (no clipping)\n";
  uint64_t paramCount = 0, paramBytes = 0, stateBytes = 0;
  int params = 0, trainable = 0, slots = 0;
  std::set<std::string> seen;  // a tensor every pipeline stage keeps counts once
  for (const plan::StateTensor* s : *p.state()) {
    if (!seen.insert(s->name()->str()).second) continue;
    uint64_t bytes = stateTensorBytes(*s);
    if (s->role() == plan::Role::param) {
      ++params;
      trainable += s->trainable();
      paramCount += numElements(s->shape());
      paramBytes += bytes;
    } else {
      ++slots;
      stateBytes += bytes;
    }
  }
  os << "parameters: " << params << " tensors (" << trainable << " trainable), " << paramCount
     << " values, " << paramBytes << " bytes\n";
  os << "optimizer state: " << slots << " tensors, " << stateBytes << " bytes\n";
  if (p.device() && p.device()->size() && p.device()->str() != "cpu")
    os << "device: " << p.device()->str()
       << " (dtrun runs it there unless --device says otherwise)\n";
  const std::vector<DataInput> inputs = dataInputs(plan);
  os << "data (--data DIR: DIR/<name>.npy, N samples):";
  for (const DataInput& in : inputs)
    os << " " << in.name << " " << dtypeName(toDType(in.dtype)) << " " << dimsText(in.sample);
  os << "\n";
  if (const int64_t t = contextLength(plan, inputs))
    os << "  or an llm.c token file (--data TOKENS.bin): windows of " << t + 1
       << " tokens, context length " << t << "\n";
  for (const DataInput& in : inputs)
    if (in.sequenceParts > 1) {
      os << "  each rank reads " << in.sample[0] / in.sequenceParts << " positions of every "
         << in.sample[0] << "-position sequence ("
         << (in.sequenceChunks
                 ? "load-balanced: chunks i and " + std::to_string(in.sequenceChunks - 1) +
                       "-i of " + std::to_string(in.sequenceChunks)
                 : std::string("contiguous"))
         << ")\n";
      break;
    }
  std::string mesh = meshText(plan);
  const int64_t stages = plan.stages();
  if (!mesh.empty())
    os << "mesh: " << mesh << " (" << meshDevices(plan) << " devices; every rank runs this plan"
       << (stages > 0 ? " (its stage's functions)" : "")
       << " on its shards, so the sizes below are per rank)\n";
  if (!mesh.empty() && meshDevices(plan) <= 64) {
    // Ranks are row-major over the axes: the last axis varies fastest.
    os << "ranks:";
    for (int64_t rank = 0; rank < meshDevices(plan); ++rank) {
      std::vector<int64_t> coords(p.mesh()->size());
      int64_t rest = rank;
      for (int64_t a = static_cast<int64_t>(coords.size()) - 1; a >= 0; --a)
        coords[a] = rest % p.mesh()->Get(a)->size(), rest /= p.mesh()->Get(a)->size();
      os << " " << rank << "=(";
      for (size_t a = 0; a < coords.size(); ++a)
        os << (a ? "," : "") << p.mesh()->Get(a)->name()->str() << coords[a];
      os << ")";
    }
    os << "\n";
  }
  if (stages > 0) {
    os << "pipeline: " << stages << " stages along "
       << p.mesh()->Get(p.pipeline_axis())->name()->str()
       << (p.schedule() && p.schedule()->size() ? "; schedule " + p.schedule()->str() : "")
       << " (each stage holds its own parameters and runs its own functions)\n";
    os << "state region: " << p.state_bytes() << " bytes (the largest stage's)\n";
    for (int stage = 0; stage < stages; ++stage) {
      StageMemory m = stageMemory(plan, stage);
      os << "stage " << stage << ", per rank: parameters " << m.params << " bytes, gradients "
         << m.grads << " bytes, optimizer state " << m.optimizer
         << " bytes, largest all-gather result " << m.largestGather << " bytes, state region "
         << m.state << " bytes, arena peak (largest function) " << m.arena << " bytes; total "
         << m.state + m.arena << " bytes\n";
      if (const plan::PipelineStage* predicted = predictedStage(plan, stage))
        os << "stage " << stage << ", predicted: " << predicted->in_flight()
           << " micro-batch(es) in flight, activations " << predicted->activation_bytes()
           << " bytes per micro-batch, peak " << predicted->peak_activation_bytes()
           << " bytes; busy " << jsonNumber(predicted->busy_us()) << " us, idle "
           << jsonNumber(predicted->idle_us()) << " us per step\n";
      if (const plan::Function* step = plan.function(fn::kTrainStep, stage))
        printTransfers(os, plan, *step, "stage " + std::to_string(stage) + ", ");
    }
  } else {
    os << "state region: " << p.state_bytes()
       << " bytes; arena peak (largest function): " << plan.maxArenaBytes() << " bytes; total "
       << p.state_bytes() + plan.maxArenaBytes() << " bytes\n";
    if (const plan::Function* step = plan.function(fn::kTrainStep)) {
      // What one rank holds while training. Gradients live in the arena, with the activations
      // and temporaries: the figure is what reaches the optimizer.
      const StepMemory m = stepMemory(*step);
      os << "per rank, training: parameters " << paramBytes << " bytes, gradients " << m.grads
         << " bytes (as the optimizer reads them), optimizer state " << stateBytes
         << " bytes, largest all-gather result " << m.largestGather
         << " bytes, arena (activations, gradients, temporaries) peak " << step->arena_bytes()
         << " bytes\n";
      printTransfers(os, plan, *step, "");
    }
  }
  for (const plan::Function* f : *p.functions())
    if (f->name()->str() == fn::kTrainStep)
      for (const MoeLayer& m : moeLayersOf(*f))
        os << "mixture of experts [" << m.loc << "]: " << m.experts << " experts, top-" << m.topK
           << ", capacity " << m.capacity << " of " << m.tokens
           << " tokens per expert and sequence; dispatch buffer per rank [" << m.experts << ","
           << m.groups << "," << m.capacity << "," << m.width << "] float32, " << m.bufferBytes
           << " bytes\n";
  if (p.workspace_bytes())
    os << "GEMM workspace (cuBLAS, cuBLASLt): " << p.workspace_bytes()
       << " bytes, the start of every function's arena\n";
  for (const plan::Function* f : *p.functions()) {
    FunctionStats s = stats(*f);
    os << "function " << functionName(*f) << ": " << (f->steps() ? f->steps()->size() : 0)
       << " steps, " << s.arenaBuffers << " arena buffers, peak " << f->arena_bytes() << " bytes ("
       << s.naiveArenaBytes << " without reuse)";
    if (s.largestScratch)
      os << "; its largest step scratch " << s.largestScratch << " bytes (" << s.largestScratchStep
         << ")";
    os << "\n    ops:";
    for (auto& [op, n] : s.ops) os << " " << op << "=" << n;
    os << "\n";
    if (const Fp8Layers fp8 = fp8LayersOf(*f); fp8.fp8Gemms > 0) {
      os << "    fp8: " << fp8.fp8Gemms << " GEMMs of " << fp8.fp8.size()
         << " layers on FP8 operands; other GEMMs at:";
      for (const std::string& loc : fp8.other) os << " " << (loc.empty() ? "?" : loc);
      os << (fp8.other.empty() ? " none\n" : "\n");
      os << "    fp8 operands: " << fp8.quantizations << " quantizations (" << fp8.delayed
         << " on amax histories), " << fp8.amaxPasses << " amax passes before them, "
         << fp8.castsFolded << " steps reading f32 through bf16 (the casts folded in)\n";
    }
    std::vector<CollectiveCost> comms = collectivesOf(plan, *f);
    if (comms.empty()) continue;
    double sent = 0;
    for (const CollectiveCost& c : comms) sent += c.sentBytes;
    os << "    communication per call, per rank: " << comms.size() << " collective(s), sends "
       << wholeBytes(sent) << " bytes (ring algorithms)\n";
    for (const CollectiveCost& c : comms)
      os << "      " << c.op << " over " << c.axes << " (" << c.group << " ranks): " << c.bytes
         << " bytes in " << c.tensors << (c.tensors == 1 ? " tensor" : " tensors") << ", sends "
         << wholeBytes(c.sentBytes) << (c.loc.empty() ? "" : " [" + c.loc + "]") << "\n";
  }
  // Untrained parameters the step writes (BatchNorm's running statistics) are buffers, not
  // frozen weights.
  std::set<std::string> written;
  for (const plan::Function* f : *p.functions())
    if (f->name()->str() == fn::kTrainStep && f->results())
      for (const plan::Binding* b : *f->results())
        if (b->role() == plan::Role::param && b->name()) written.insert(b->name()->str());
  os << "parameters:\n";
  for (const plan::StateTensor* s : *p.state()) {
    if (s->role() != plan::Role::param) continue;
    const char* kind = s->trainable()                    ? ""
                       : written.count(s->name()->str()) ? " (buffer, updated by training)"
                                                         : " (frozen)";
    os << "  " << s->name()->str() << " " << shapeString(s->shape()) << " "
       << dtypeName(toDType(s->dtype())) << kind << " init " << initName(s->init());
    if (s->init() == plan::InitKind::uniform || s->init() == plan::InitKind::normal)
      os << "(" << s->init_a() << ", " << s->init_b() << ", seed " << s->init_seed() << ")";
    if (s->trainable()) os << (s->weight_decay() != 0 ? " decay " : " no decay");
    if (s->trainable() && s->weight_decay() != 0) os << s->weight_decay();
    os << "\n";
  }
  return os.str();
}

std::string summarizePlanJson(const Plan& plan) {
  const plan::Plan& p = plan.root();
  std::ostringstream os;
  os << "{\"version\":" << p.version() << ",\"batch_size\":" << p.batch_size()
     << ",\"optimizer\":" << quote(p.optimizer() ? p.optimizer()->str() : "")
     << ",\"micro_batches\":" << p.micro_batches() << ",\"mesh\":" << quote(meshText(plan))
     << ",\"devices\":" << meshDevices(plan) << ",\"state_bytes\":" << p.state_bytes()
     << ",\"arena_bytes\":" << plan.maxArenaBytes()
     << ",\"workspace_bytes\":" << p.workspace_bytes()
     << ",\"param_bytes\":" << bytesOf(plan, plan::Role::param, false)
     << ",\"grad_bytes\":" << bytesOf(plan, plan::Role::param, true)
     << ",\"optimizer_state_bytes\":" << bytesOf(plan, plan::Role::optim_state, false)
     << ",\"clip_grad_norm\":" << p.clip_grad_norm()
     << ",\"reports_grad_norm\":" << (p.reports_grad_norm() ? "true" : "false");
  if (const plan::LrSchedule* lr = p.lr_schedule())
    os << ",\"lr_schedule\":{\"kind\":" << quote(lr->kind() ? lr->kind()->str() : "")
       << ",\"lr\":" << lr->lr() << ",\"warmup_steps\":" << lr->warmup_steps()
       << ",\"decay_steps\":" << lr->decay_steps() << ",\"min_lr\":" << lr->min_lr() << "}";
  const std::vector<DataInput> inputs = dataInputs(plan);
  os << ",\"data\":[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    os << (i ? "," : "") << "{\"name\":" << quote(inputs[i].name)
       << ",\"dtype\":" << quote(dtypeName(toDType(inputs[i].dtype))) << ",\"shape\":[\"N\"";
    for (int64_t d : inputs[i].sample) os << "," << d;
    os << "]}";
  }
  os << "],\"context_length\":" << contextLength(plan, inputs);
  // What one rank holds (a pipeline's largest, or each stage's below).
  {
    const StageMemory m = stageMemory(plan, -1);
    os << ",\"memory\":{\"param_bytes\":" << m.params << ",\"grad_bytes\":" << m.grads
       << ",\"optimizer_state_bytes\":" << m.optimizer
       << ",\"largest_gather_bytes\":" << m.largestGather << ",\"state_bytes\":" << p.state_bytes()
       << ",\"arena_bytes\":" << plan.maxArenaBytes() << "}";
  }
  // Pipeline plans: what a rank of each stage holds, and each tensor's and function's stage.
  const int64_t stages = plan.stages();
  if (stages > 0) {
    os << ",\"pipeline\":{\"axis\":" << p.pipeline_axis()
       << ",\"axis_name\":" << quote(p.mesh()->Get(p.pipeline_axis())->name()->str())
       << ",\"schedule\":" << quote(p.schedule() ? p.schedule()->str() : "") << ",\"stages\":[";
    for (int stage = 0; stage < stages; ++stage) {
      StageMemory m = stageMemory(plan, stage);
      os << (stage ? "," : "") << "{\"stage\":" << stage << ",\"state_bytes\":" << m.state
         << ",\"arena_bytes\":" << m.arena << ",\"param_bytes\":" << m.params
         << ",\"grad_bytes\":" << m.grads << ",\"optimizer_state_bytes\":" << m.optimizer
         << ",\"largest_gather_bytes\":" << m.largestGather;
      if (const plan::PipelineStage* predicted = predictedStage(plan, stage))
        os << ",\"in_flight\":" << predicted->in_flight()
           << ",\"activation_bytes\":" << predicted->activation_bytes()
           << ",\"peak_activation_bytes\":" << predicted->peak_activation_bytes()
           << ",\"busy_us\":" << jsonNumber(predicted->busy_us())
           << ",\"idle_us\":" << jsonNumber(predicted->idle_us());
      os << "}";
    }
    os << "]}";
  }
  os << ",\"state\":[";
  bool first = true;
  for (const plan::StateTensor* s : *p.state()) {
    os << (first ? "" : ",") << "{\"name\":" << quote(s->name()->str())
       << ",\"role\":" << quote(plan::EnumNameRole(s->role()))
       << ",\"shape\":" << jsonShape(s->shape())
       << ",\"dtype\":" << quote(dtypeName(toDType(s->dtype())))
       << ",\"trainable\":" << (s->trainable() ? "true" : "false") << ",\"offset\":" << s->offset()
       << ",\"init\":" << quote(initName(s->init()));
    if (s->role() == plan::Role::param && s->trainable())
      os << ",\"weight_decay\":" << s->weight_decay();
    if (stages > 0) os << ",\"stage\":" << s->stage();
    os << "}";
    first = false;
  }
  os << "],\"functions\":[";
  first = true;
  for (const plan::Function* f : *p.functions()) {
    FunctionStats s = stats(*f);
    os << (first ? "" : ",") << "{\"name\":" << quote(f->name()->str());
    if (stages > 0) os << ",\"stage\":" << f->stage();
    os << ",\"arena_bytes\":" << f->arena_bytes() << ",\"arena_buffers\":" << s.arenaBuffers
       << ",\"naive_arena_bytes\":" << s.naiveArenaBytes
       << ",\"largest_step_scratch_bytes\":" << s.largestScratch << ",\"op_counts\":{";
    bool firstOp = true;
    for (auto& [op, n] : s.ops)
      os << (firstOp ? "" : ",") << quote(op) << ":" << n, firstOp = false;
    os << "},\"collectives\":[";
    bool firstComm = true;
    for (const CollectiveCost& c : collectivesOf(plan, *f)) {
      os << (firstComm ? "" : ",") << "{\"op\":" << quote(c.op) << ",\"axes\":" << quote(c.axes)
         << ",\"group\":" << c.group << ",\"tensors\":" << c.tensors << ",\"bytes\":" << c.bytes
         << ",\"sent_bytes\":" << wholeBytes(c.sentBytes) << "}";
      firstComm = false;
    }
    const Fp8Layers fp8 = fp8LayersOf(*f);
    for (auto [key, list] :
         {std::pair{"fp8_layers", &fp8.fp8}, std::pair{"other_gemm_layers", &fp8.other}}) {
      os << "],\"" << key << "\":[";
      for (size_t i = 0; i < list->size(); ++i) os << (i ? "," : "") << quote((*list)[i]);
    }
    os << "],\"fp8_quantizations\":" << fp8.quantizations << ",\"fp8_delayed\":" << fp8.delayed
       << ",\"fp8_amax_passes\":" << fp8.amaxPasses << ",\"fp8_casts_folded\":" << fp8.castsFolded;
    os << ",\"moe_layers\":[";
    bool firstMoe = true;
    for (const MoeLayer& m : moeLayersOf(*f)) {
      os << (firstMoe ? "" : ",") << "{\"loc\":" << quote(m.loc) << ",\"experts\":" << m.experts
         << ",\"top_k\":" << m.topK << ",\"capacity\":" << m.capacity << ",\"groups\":" << m.groups
         << ",\"tokens\":" << m.tokens << ",\"width\":" << m.width
         << ",\"buffer_bytes\":" << m.bufferBytes << "}";
      firstMoe = false;
    }
    os << "],\"steps\":[";
    bool firstStep = true;
    if (f->steps())
      for (const plan::Step* step : *f->steps()) {
        os << (firstStep ? "" : ",") << "{\"op\":" << quote(kernelName(step->kernel()))
           << ",\"loc\":" << quote(step->loc() ? step->loc()->str() : "") << ",\"inputs\":[";
        if (step->inputs())
          for (uint32_t i = 0; i < step->inputs()->size(); ++i)
            os << (i ? "," : "") << step->inputs()->Get(i);
        os << "],\"outputs\":[";
        bool firstOut = true;
        for (uint32_t id : *step->outputs()) {
          const plan::Value* v = f->values()->Get(id);
          os << (firstOut ? "" : ",") << "{\"value\":" << id
             << ",\"shape\":" << jsonShape(v->shape())
             << ",\"dtype\":" << quote(plan::EnumNameDType(v->dtype()))
             << ",\"bytes\":" << valueBytes(*v)
             << ",\"region\":" << quote(plan::EnumNameRegion(v->region()))
             << ",\"offset\":" << v->offset() << "}";
          firstOut = false;
        }
        os << "]}";
        firstStep = false;
      }
    os << "]}";
    first = false;
  }
  os << "]}\n";
  return os.str();
}

}  // namespace dtc
