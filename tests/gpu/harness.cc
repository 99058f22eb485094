#include "harness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "exec/step.h"
#include "ops/cuda_scratch.h"
#include "ops/kernel_registry.h"
#include "ops/step_scratch.h"
#include "plan_generated.h"
#include "support/half.h"
#include "support/thread_pool.h"

namespace dtc::gputest {
namespace {

using Buffers = std::vector<std::vector<uint8_t>>;

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

Buffers makeInputs(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Buffers inputs;
  for (const Input& in : c.inputs) {
    const int64_t n = elements(in.shape);
    std::vector<uint8_t> bytes(n * dtypeSize(in.dtype));
    if (in.dtype == DType::kBF16 || in.dtype == DType::kF16) {
      auto* h = reinterpret_cast<uint16_t*>(bytes.data());
      const bool bf16 = in.dtype == DType::kBF16;
      std::uniform_real_distribution<float> pick(in.lo, in.hi);
      for (int64_t i = 0; i < n; ++i) {
        if (!in.words.empty()) {
          h[i] = in.words[i % in.words.size()];
        } else {
          const float v = !in.values.empty() ? in.values[i % in.values.size()] : pick(rng);
          h[i] = bf16 ? f32ToBf16(v) : f32ToF16(v);
        }
      }
    } else if (float8(in.dtype)) {
      // Random codes, NaN and infinity left out: e4m3fn's NaN is 0x7f/0xff, e5m2's are those
      // with every exponent bit set.
      const uint8_t top = in.dtype == DType::kF8E4M3 ? 0x7f : 0x7c;
      for (int64_t i = 0; i < n; ++i) {
        uint8_t code;
        do code = static_cast<uint8_t>(rng() & 0xff);
        while ((code & top) == top);
        bytes[i] = code;
      }
    } else if (in.dtype != DType::kI64 && in.dtype != DType::kF32) {
      // Other dtypes (int32) only appear in bind-error cases: zeros.
    } else if (in.dtype == DType::kI64 && !in.indices.empty()) {
      std::memcpy(bytes.data(), in.indices.data(),
                  std::min<size_t>(bytes.size(), in.indices.size() * 8));
    } else if (in.dtype == DType::kI64) {
      std::uniform_int_distribution<int64_t> pick(in.idLo, std::max(in.idLo, in.idHi - 1));
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<int64_t*>(bytes.data())[i] = pick(rng);
    } else if (!in.values.empty()) {
      std::memcpy(bytes.data(), in.values.data(),
                  std::min<size_t>(bytes.size(), in.values.size() * 4));
    } else {
      std::uniform_real_distribution<float> pick(in.lo, in.hi);
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(bytes.data())[i] = pick(rng);
    }
    inputs.push_back(std::move(bytes));
  }
  return inputs;
}

TensorView view(uint8_t* data, DType dtype, const Shape& shape) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

// The reference: the CPU kernel table on host copies of the inputs.
Status runCpu(const Case& c, const plan::Step& step, ThreadPool& pool, comm::DeviceMesh* mesh,
              Buffers inputs, Buffers& outputs) {
  StepContext ctx{step, {}, {}, pool, mesh};
  for (size_t i = 0; i < c.inputs.size(); ++i)
    ctx.inputs.push_back(view(inputs[i].data(), c.inputs[i].dtype, c.inputs[i].shape));
  outputs.clear();
  for (const Output& o : c.outputs) {
    if (o.alias >= 0) continue;
    outputs.emplace_back(elements(o.shape) * dtypeSize(o.dtype), 0);
  }
  for (size_t k = 0, fresh = 0; k < c.outputs.size(); ++k) {
    const Output& o = c.outputs[k];
    uint8_t* data = o.alias >= 0 ? inputs[o.alias].data() : outputs[fresh++].data();
    ctx.outputs.push_back(view(data, o.dtype, o.shape));
  }
  DTC_ASSIGN_OR_RETURN(BoundStep bound, bindCpuStep(ctx));
  DTC_RETURN_IF_ERROR(bound());
  // Outputs in order, aliased ones read back from their inputs.
  Buffers result;
  for (size_t k = 0, fresh = 0; k < c.outputs.size(); ++k)
    result.push_back(c.outputs[k].alias >= 0 ? inputs[c.outputs[k].alias] : outputs[fresh++]);
  outputs = std::move(result);
  return Status::Ok();
}

// Device memory of one case, released when it goes.
class DeviceMemory {
 public:
  explicit DeviceMemory(Backend& b) : b_(b) {}
  ~DeviceMemory() {
    for (auto& [p, n] : held_) b_.release(p, n);
  }
  StatusOr<uint8_t*> take(uint64_t bytes) {
    DTC_ASSIGN_OR_RETURN(uint8_t * p, b_.allocate(bytes));
    held_.emplace_back(p, bytes);
    return p;
  }

 private:
  Backend& b_;
  std::vector<std::pair<uint8_t*, uint64_t>> held_;
};

struct DeviceCase {
  std::vector<TensorView> inputs, outputs;
};

StatusOr<DeviceCase> place(Backend& b, DeviceMemory& memory, const Case& c, const Buffers& inputs) {
  DeviceCase d;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    DTC_ASSIGN_OR_RETURN(uint8_t * p, memory.take(inputs[i].size()));
    DTC_RETURN_IF_ERROR(b.upload(p, inputs[i].data(), inputs[i].size()));
    d.inputs.push_back(view(p, c.inputs[i].dtype, c.inputs[i].shape));
  }
  for (const Output& o : c.outputs) {
    uint8_t* p = nullptr;
    if (o.alias >= 0) {
      p = d.inputs[o.alias].data;
    } else {
      DTC_ASSIGN_OR_RETURN(p, memory.take(elements(o.shape) * dtypeSize(o.dtype)));
    }
    d.outputs.push_back(view(p, o.dtype, o.shape));
  }
  return d;
}

Status download(Backend& b, const std::vector<TensorView>& views, Buffers& out) {
  out.clear();
  for (const TensorView& t : views) {
    out.emplace_back(t.numElements() * dtypeSize(t.dtype));
    DTC_RETURN_IF_ERROR(b.download(out.back().data(), t.data, out.back().size()));
  }
  return Status::Ok();
}

// How far the device's output is from the reference's: max |a − b| / max |b| over the values
// (NaN where one side has NaN and the other not), and for bfloat16/float16 outputs the most
// units in the last place between two elements; int64 and bitwise cases compare bytes.
struct Difference {
  double relative = 0;
  int64_t ulps = 0;
  bool bytesDiffer = false;
};

// A 16-bit float's position on the number line in units in the last place (±0 both 0).
int64_t ordinal(uint16_t h) {
  return (h & 0x8000u) ? -static_cast<int64_t>(h & 0x7fffu) : static_cast<int64_t>(h);
}

Difference difference(const Output& o, const std::vector<uint8_t>& a,
                      const std::vector<uint8_t>& b) {
  Difference d;
  d.bytesDiffer = a != b;
  if (o.dtype != DType::kF32 && o.dtype != DType::kBF16 && o.dtype != DType::kF16) {
    d.relative = d.bytesDiffer ? INFINITY : 0.0;
    return d;
  }
  const bool wide = o.dtype == DType::kF32;
  const size_t n = a.size() / (wide ? 4 : 2);
  auto value = [&](const std::vector<uint8_t>& v, size_t i) -> double {
    if (wide) return reinterpret_cast<const float*>(v.data())[i];
    const uint16_t h = reinterpret_cast<const uint16_t*>(v.data())[i];
    return o.dtype == DType::kBF16 ? bf16ToF32(h) : f16ToF32(h);
  };
  double worst = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = value(a, i), y = value(b, i);
    if (std::isnan(x) != std::isnan(y)) {
      d.relative = NAN;
      return d;
    }
    if (std::isnan(y)) continue;
    if (!wide) {
      const uint16_t hx = reinterpret_cast<const uint16_t*>(a.data())[i];
      const uint16_t hy = reinterpret_cast<const uint16_t*>(b.data())[i];
      d.ulps = std::max<int64_t>(d.ulps, std::llabs(ordinal(hx) - ordinal(hy)));
    }
    if (x == y) continue;                       // equal infinities too
    worst = std::max(worst, std::fabs(x - y));  // inf where only one side overflowed
  }
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(value(b, i))) scale = std::max(scale, std::fabs(value(b, i)));
  d.relative = worst == 0 ? 0.0 : worst / std::max(scale, 1e-30);
  return d;
}

}  // namespace

std::vector<uint8_t> buildStep(const Case& c) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<Attr> attrs = c.attrs;
  std::sort(attrs.begin(), attrs.end(),
            [](const Attr& x, const Attr& y) { return x.name < y.name; });
  std::vector<flatbuffers::Offset<plan::Attr>> offsets;
  for (const Attr& a : attrs)
    offsets.push_back(plan::CreateAttrDirect(b, a.name.c_str(), a.i, a.f,
                                             a.ints.empty() ? nullptr : &a.ints,
                                             a.s.empty() ? nullptr : a.s.c_str()));
  std::vector<uint32_t> ins, outs;
  for (size_t i = 0; i < c.inputs.size(); ++i) ins.push_back(static_cast<uint32_t>(i));
  for (size_t i = 0; i < c.outputs.size(); ++i)
    outs.push_back(static_cast<uint32_t>(c.inputs.size() + i));
  const KernelInfo* kernel = findKernel(c.op);
  b.Finish(plan::CreateStepDirect(b, &ins, &outs, &offsets, c.label.c_str(),
                                  kernel ? kernel->kernel : Kernel::none));
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

Harness::Harness(Backend& device, comm::DeviceMesh* mesh, int rank, bool verbose)
    : device_(device), mesh_(mesh), rank_(rank), verbose_(verbose) {
  // The GEMM workspace as a plan gives it (Plan.workspace_bytes), before any step is bound.
  StatusOr<uint8_t*> workspace = device_.allocate(cuda::kernels::kBlasWorkspaceBytes);
  Status given = workspace.status();
  if (given.ok()) {
    workspace_ = *workspace;
    given = device_.useWorkspace(workspace_, cuda::kernels::kBlasWorkspaceBytes);
  }
  if (!given.ok()) report(false, "the plan's GEMM workspace", given.message());
}

Harness::~Harness() {
  if (workspace_) device_.release(workspace_, cuda::kernels::kBlasWorkspaceBytes);
}

void Harness::report(bool ok, const std::string& label, const std::string& detail) {
  if (!ok) ++failures_;
  if (ok && !verbose_) return;
  const std::string who = rank_ ? "[rank " + std::to_string(rank_) + "] " : "";
  std::printf("%s%-4s %-44s %s\n", who.c_str(), ok ? "ok" : "FAIL", label.c_str(), detail.c_str());
  std::fflush(stdout);
}

bool Harness::run(const Case& c) {
  const std::vector<uint8_t> stepBytes = buildStep(c);
  const plan::Step& step = *flatbuffers::GetRoot<plan::Step>(stepBytes.data());
  const Buffers inputs = makeInputs(c, 0x9e3779b97f4a7c15ull * (++caseCounter_) + rank_);
  ThreadPool pool(2);
  Buffers expected;
  Status cpu = runCpu(c, step, pool, mesh_, inputs, expected);
  if (!cpu.ok()) {
    report(false, c.label, "the CPU reference failed: " + cpu.message());
    return false;
  }
  DeviceMemory memory(device_);
  auto fail = [&](const Status& s) {
    report(false, c.label, s.message());
    return false;
  };
  StatusOr<DeviceCase> placed = place(device_, memory, c, inputs);
  if (!placed.ok()) return fail(placed.status());
  StepContext ctx{step, placed->inputs, placed->outputs, pool, mesh_};
  // The scratch a plan compiled for CUDA gives the step (ops/step_scratch.h): the binder must
  // take all it uses from there, nothing of its own, on either attention path.
  const uint64_t planned = cudaStepScratchBytes(scratchStepOf(ctx));
  if (planned > 0) {
    StatusOr<uint8_t*> scratch = memory.take(planned);
    if (!scratch.ok()) return fail(scratch.status());
    ctx.scratch = *scratch;
    ctx.scratchBytes = planned;
  }
  const uint64_t unplannedBefore = device_.unplannedBytes();
  StatusOr<BoundStep> bound = device_.bind(ctx);
  if (!bound.ok()) return fail(bound.status());
  const uint64_t unplanned = device_.unplannedBytes() - unplannedBefore;
  Status ran = (*bound)();
  if (ran.ok()) ran = device_.synchronize();
  Buffers got;
  if (ran.ok()) ran = download(device_, placed->outputs, got);
  if (!ran.ok()) return fail(ran);
  double worst = 0;
  int64_t worstUlps = 0;
  bool lowOutputs = false;
  std::string detail;
  if (unplanned > 0)
    detail += " took " + std::to_string(unplanned) + " bytes beyond its planned scratch of " +
              std::to_string(planned) + ";";
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const Output& o = c.outputs[k];
    const Difference d = difference(o, got[k], expected[k]);
    const std::string which = " output " + std::to_string(k) + " " + str(o.shape);
    const bool low = o.dtype == DType::kBF16 || o.dtype == DType::kF16;
    lowOutputs = lowOutputs || low;
    if (c.bitwise) {
      if (d.bytesDiffer) detail += which + " differs in its bits;";
    } else {
      if (!(d.relative <= c.tolerance))
        detail += which + " off by " + std::to_string(d.relative) + ";";
      if (low && c.maxUlps >= 0 && d.ulps > c.maxUlps)
        detail += which + " " + std::to_string(d.ulps) + " ulps apart;";
    }
    worst = std::isnan(d.relative) || std::isnan(worst) ? NAN : std::max(worst, d.relative);
    worstUlps = std::max(worstUlps, d.ulps);
  }
  // Run again where that leaves the inputs alone: the kernels must be deterministic. (Always,
  // not only after a match: collectives must run the same number of times on every rank.)
  const bool inPlace =
      std::any_of(c.outputs.begin(), c.outputs.end(), [](const Output& o) { return o.alias >= 0; });
  if (!inPlace) {
    Buffers again;
    // (Run anyway where it need not repeat: collectives must run as often on every rank.)
    ran = (*bound)();
    if (ran.ok()) ran = device_.synchronize();
    if (ran.ok()) ran = download(device_, placed->outputs, again);
    if (!ran.ok()) return fail(ran);
    if (again != got && c.repeatable)
      detail += " a second run gave different bits (nondeterministic kernel);";
  }
  char buffer[96];
  if (c.bitwise)
    std::snprintf(buffer, sizeof buffer, "bit for bit");
  else if (lowOutputs)
    std::snprintf(buffer, sizeof buffer, "max rel err %.2e, max %lld ulp", worst,
                  static_cast<long long>(worstUlps));
  else
    std::snprintf(buffer, sizeof buffer, "max rel err %.2e", worst);
  report(detail.empty(), c.label, c.op + ": " + (detail.empty() ? std::string(buffer) : detail));
  return detail.empty();
}

bool Harness::expectSameBindError(const Case& c) {
  const std::vector<uint8_t> stepBytes = buildStep(c);
  const plan::Step& step = *flatbuffers::GetRoot<plan::Step>(stepBytes.data());
  const Buffers inputs = makeInputs(c, ++caseCounter_);
  ThreadPool pool(1);
  Buffers ignored;
  Status cpu = runCpu(c, step, pool, mesh_, inputs, ignored);
  DeviceMemory memory(device_);
  StatusOr<DeviceCase> placed = place(device_, memory, c, inputs);
  if (!placed.ok()) {
    report(false, c.label, placed.status().message());
    return false;
  }
  StepContext ctx{step, placed->inputs, placed->outputs, pool, mesh_};
  StatusOr<BoundStep> bound = device_.bind(ctx);
  const bool ok = !cpu.ok() && !bound.ok() && bound.status().message() == cpu.message() &&
                  bound.status().code() == cpu.code();
  report(ok, c.label,
         "bind error: cpu '" + cpu.message() + "', device '" +
             (bound.ok() ? std::string("(bound)") : bound.status().message()) + "'");
  return ok;
}

bool Harness::expectBindError(const Case& c, const std::string& text) {
  const std::vector<uint8_t> stepBytes = buildStep(c);
  const plan::Step& step = *flatbuffers::GetRoot<plan::Step>(stepBytes.data());
  const Buffers inputs = makeInputs(c, ++caseCounter_);
  ThreadPool pool(1);
  DeviceMemory memory(device_);
  StatusOr<DeviceCase> placed = place(device_, memory, c, inputs);
  StatusOr<BoundStep> bound = Status::Internal("not bound");
  if (placed.ok()) {
    StepContext ctx{step, placed->inputs, placed->outputs, pool, mesh_};
    bound = device_.bind(ctx);
  }
  const bool ok =
      placed.ok() && !bound.ok() && bound.status().message().find(text) != std::string::npos;
  report(ok, c.label,
         "bind error: '" + (bound.ok() ? std::string("(bound)") : bound.status().message()) + "'");
  return ok;
}

bool Harness::expectRunError(const Case& c, const std::string& text) {
  const std::vector<uint8_t> stepBytes = buildStep(c);
  const plan::Step& step = *flatbuffers::GetRoot<plan::Step>(stepBytes.data());
  const Buffers inputs = makeInputs(c, ++caseCounter_);
  ThreadPool pool(1);
  DeviceMemory memory(device_);
  StatusOr<DeviceCase> placed = place(device_, memory, c, inputs);
  Status result = placed.status();
  if (placed.ok()) {
    StepContext ctx{step, placed->inputs, placed->outputs, pool, mesh_};
    StatusOr<BoundStep> bound = device_.bind(ctx);
    result = bound.status();
    if (bound.ok()) result = (*bound)();
    if (result.ok()) result = device_.synchronize();
  }
  const bool ok = result.code() == StatusCode::kInvalidInput &&
                  result.message().find(text) != std::string::npos;
  report(ok, c.label, "run error: '" + result.message() + "'");
  return ok;
}

bool Harness::sendRecv(const Shape& shape, DType dtype) {
  Case send{"send/recv " + dtypeName(dtype) + " " + str(shape),
            "send",
            {intsAttr("axes", {0}), intAttr("shift", 1), intAttr("tag", 7)},
            {dtype == DType::kI64   ? ids(shape, 1000)
             : dtype == DType::kF32 ? f32(shape)
                                    : lowp(dtype, shape)},
            {},
            0};
  Case recv{send.label, "recv", send.attrs, {}, {{shape, dtype, -1}}, 0};
  const Buffers inputs = makeInputs(send, ++caseCounter_ * 31 + rank_);
  const std::vector<uint8_t> sendBytes = buildStep(send), recvBytes = buildStep(recv);
  const plan::Step& sendStep = *flatbuffers::GetRoot<plan::Step>(sendBytes.data());
  const plan::Step& recvStep = *flatbuffers::GetRoot<plan::Step>(recvBytes.data());
  ThreadPool pool(1);
  // The CPU backend's pair, for reference.
  Buffers cpuOut;
  Status st = runCpu(send, sendStep, pool, mesh_, inputs, cpuOut);
  if (st.ok()) st = runCpu(recv, recvStep, pool, mesh_, {}, cpuOut);
  if (st.ok()) st = mesh_->completeSends();
  DeviceMemory memory(device_);
  Buffers got;
  if (st.ok()) {
    StatusOr<DeviceCase> s = place(device_, memory, send, inputs);
    StatusOr<DeviceCase> r = place(device_, memory, recv, {});
    st = s.ok() ? r.status() : s.status();
    if (st.ok()) {
      StatusOr<BoundStep> sb = device_.bind(StepContext{sendStep, s->inputs, {}, pool, mesh_});
      StatusOr<BoundStep> rb = device_.bind(StepContext{recvStep, {}, r->outputs, pool, mesh_});
      st = sb.ok() ? rb.status() : sb.status();
      if (st.ok()) st = (*sb)();
      if (st.ok()) st = (*rb)();
      if (st.ok()) st = mesh_->completeSends();
      if (st.ok()) st = device_.synchronize();
      if (st.ok()) st = download(device_, r->outputs, got);
    }
  }
  const bool ok = st.ok() && got.size() == 1 && cpuOut.size() == 1 && got[0] == cpuOut[0];
  report(ok, send.label,
         st.ok() ? (ok ? "received what the CPU backend received" : "received other bytes")
                 : st.message());
  return ok;
}

ScopedEnv::ScopedEnv(const char* name) : name_(name) {
  const char* was = std::getenv(name);
  had_ = was != nullptr;
  if (had_) was_ = was;
}

namespace {
std::function<void()>& optionsReload() {
  static std::function<void()> reload;
  return reload;
}
void reloadOptions() {
  if (optionsReload()) optionsReload()();
}
}  // namespace

void setRuntimeOptionsReload(std::function<void()> reload) { optionsReload() = std::move(reload); }

ScopedEnv::~ScopedEnv() {
  if (had_)
    ::setenv(name_, was_.c_str(), 1);
  else
    ::unsetenv(name_);
  reloadOptions();
}

void ScopedEnv::set(const char* value) {
  if (value)
    ::setenv(name_, value, 1);
  else
    ::unsetenv(name_);
  reloadOptions();
}

}  // namespace dtc::gputest
