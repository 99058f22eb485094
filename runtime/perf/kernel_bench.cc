#include "perf/kernel_bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <utility>

#include "ops/cuda_scratch.h"
#include "ops/kernel_registry.h"
#include "ops/step_scratch.h"
#include "plan_generated.h"
#include "support/half.h"

namespace dtc::perf {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The step's bytes: operands numbered inputs first, attributes sorted by name (the format's
// order), located at the op's name.
StatusOr<std::vector<uint8_t>> stepBytes(const BenchStep& s) {
  const KernelInfo* kernel = findKernel(s.op);
  if (!kernel) return Status::InvalidInput("no kernel named '" + s.op + "'");
  flatbuffers::FlatBufferBuilder b;
  std::vector<BenchAttr> attrs = s.attrs;
  std::sort(attrs.begin(), attrs.end(),
            [](const BenchAttr& x, const BenchAttr& y) { return x.name < y.name; });
  std::vector<flatbuffers::Offset<plan::Attr>> offsets;
  for (const BenchAttr& a : attrs)
    offsets.push_back(plan::CreateAttrDirect(b, a.name.c_str(), a.i, a.f,
                                             a.ints.empty() ? nullptr : &a.ints, nullptr));
  std::vector<uint32_t> ins, outs;
  for (size_t i = 0; i < s.inputs.size(); ++i) ins.push_back(static_cast<uint32_t>(i));
  for (size_t i = 0; i < s.outputs.size(); ++i)
    outs.push_back(static_cast<uint32_t>(s.inputs.size() + i));
  b.Finish(plan::CreateStepDirect(b, &ins, &outs, &offsets, s.op.c_str(), kernel->kernel));
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

// Host bytes of an operand: standard normal values in its type, or ids.
std::vector<uint8_t> randomBytes(const BenchOperand& o, std::mt19937_64& rng) {
  const uint64_t n = o.elements();
  std::vector<uint8_t> bytes(n * dtypeSize(o.dtype));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint64_t i = 0; i < n; ++i) {
    switch (o.dtype) {
      case DType::kI64: {
        const int64_t id =
            static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(o.idRange, 1)));
        std::memcpy(bytes.data() + 8 * i, &id, 8);
        break;
      }
      case DType::kBF16: {
        const uint16_t h = f32ToBf16(normal(rng));
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
      case DType::kF16: {
        const uint16_t h = f32ToF16(normal(rng));
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
      default: {
        const float f = normal(rng);
        std::memcpy(bytes.data() + 4 * i, &f, 4);
      }
    }
  }
  return bytes;
}

// The backend memory a bench step holds, given back when it goes.
class Held {
 public:
  explicit Held(Backend& b) : b_(b) {}
  ~Held() {
    for (auto& [p, n] : held_) b_.release(p, n);
  }
  StatusOr<uint8_t*> take(uint64_t bytes) {
    DTC_ASSIGN_OR_RETURN(uint8_t * p, b_.allocate(std::max<uint64_t>(bytes, 1)));
    held_.emplace_back(p, std::max<uint64_t>(bytes, 1));
    return p;
  }

 private:
  Backend& b_;
  std::vector<std::pair<uint8_t*, uint64_t>> held_;
};

}  // namespace

uint64_t BenchOperand::elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return n;
}

KernelBench::KernelBench(Backend& backend, ThreadPool& pool) : backend_(backend), pool_(pool) {}

KernelBench::~KernelBench() {
  if (workspace_) backend_.release(workspace_, workspaceBytes_);
}

// The GEMM libraries' workspace, as a plan gives it before any step is bound (device backends).
Status KernelBench::ensureWorkspace() {
  if (workspace_ || backend_.hostMemory()) return Status::Ok();
  workspaceBytes_ = cuda::kernels::kBlasWorkspaceBytes;
  DTC_ASSIGN_OR_RETURN(workspace_, backend_.allocate(workspaceBytes_));
  return backend_.useWorkspace(workspace_, workspaceBytes_);
}

StatusOr<double> KernelBench::secondsPerCall(const BenchStep& s, double budget, int rounds) {
  DTC_RETURN_IF_ERROR(ensureWorkspace());
  DTC_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, stepBytes(s));
  const plan::Step& step = *flatbuffers::GetRoot<plan::Step>(bytes.data());
  Held held(backend_);
  std::mt19937_64 rng(seed_++);
  std::vector<TensorView> inputs, outputs;
  for (const BenchOperand& o : s.inputs) {
    const std::vector<uint8_t> host = randomBytes(o, rng);
    DTC_ASSIGN_OR_RETURN(uint8_t * p, held.take(host.size()));
    DTC_RETURN_IF_ERROR(backend_.upload(p, host.data(), host.size()));
    inputs.push_back({p, o.dtype, o.shape});
  }
  for (const BenchOperand& o : s.outputs) {
    uint8_t* p = nullptr;
    if (o.alias >= 0 && o.alias < static_cast<int>(inputs.size())) {
      p = inputs[o.alias].data;
    } else {
      DTC_ASSIGN_OR_RETURN(p, held.take(o.elements() * dtypeSize(o.dtype)));
    }
    outputs.push_back({p, o.dtype, o.shape});
  }
  StepContext ctx{step, inputs, outputs, pool_, nullptr};
  // The scratch a plan compiled for this backend gives the step (ops/step_scratch.h).
  const ScratchStep sizing = scratchStepOf(ctx);
  const uint64_t scratch = backend_.kind().stepScratchBytes(sizing);
  if (scratch) {
    DTC_ASSIGN_OR_RETURN(ctx.scratch, held.take(scratch));
    ctx.scratchBytes = scratch;
  }
  DTC_ASSIGN_OR_RETURN(BoundStep bound, backend_.bind(ctx));
  DTC_RETURN_IF_ERROR(bound());  // warm caches, threads, the library's kernel choice
  DTC_RETURN_IF_ERROR(backend_.synchronize());
  double best = 1e30;
  for (int round = 0; round < std::max(rounds, 1); ++round) {
    int calls = 0;
    const double start = now();
    double elapsed = 0;
    do {
      DTC_RETURN_IF_ERROR(bound());
      ++calls;
      // A device queues calls: wait now and then, so that the clock reads finished work.
      if (calls % 8 == 0 || calls < 2) DTC_RETURN_IF_ERROR(backend_.synchronize());
      elapsed = now() - start;
    } while (calls < 2 || elapsed < budget);
    DTC_RETURN_IF_ERROR(backend_.synchronize());
    best = std::min(best, (now() - start) / calls);
  }
  return best;
}

}  // namespace dtc::perf
