// The CUDA backend's core kernel table (exec/cpu_kernel_table.cc's ops): contracts checked as
// the CPU's at bind time, then cuBLAS GEMMs and the element-wise and reduction kernels.
#include <cstring>

#include "cuda_bind.h"
#include "gemm.h"

namespace dtc::cuda {
namespace {

using kernels::Activation;
using kernels::BinaryOp;

// The operands' element type (contractionType) is the GEMM's.
StatusOr<BoundStep> bindGemm(const StepContext& ctx, Device& dev, const void* a, const void* b, void* c,
                             GemmShape shape, cudaDataType_t type) {
  const std::string where = ctx.where();
  DTC_RETURN_IF_ERROR(checkGemm(shape, where));
  shape.type = type;
  cublasHandle_t handle = dev.blas();
  const bool tf32 = dev.tf32();
  return BoundStep([=] { return gemm(handle, tf32, a, b, c, shape, where); });
}

StatusOr<BoundStep> bindMatmul(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(cudaDataType_t type, contractionType(ctx));
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  if (a.shape.size() != 2 || b.shape.size() != 2 || c.shape.size() != 2)
    return invalid(ctx, "operands must be 2-D");
  bool tA = ctx.intAttr("transpose_lhs") != 0, tB = ctx.intAttr("transpose_rhs") != 0;
  int64_t m = tA ? a.shape[1] : a.shape[0], k = tA ? a.shape[0] : a.shape[1];
  int64_t kb = tB ? b.shape[1] : b.shape[0], n = tB ? b.shape[0] : b.shape[1];
  if (k != kb || c.shape != Shape{m, n})
    return invalid(ctx, "shapes " + str(a.shape) + ", " + str(b.shape) + " -> " + str(c.shape) +
                            " do not match");
  return bindGemm(ctx, dev, a.data, b.data, c.data, {m, n, k, tA, tB, 1}, type);
}

// linear, linear_grad_input, linear_grad_weight: one GEMM on the leading dimensions flattened.
StatusOr<BoundStep> bindLinearFamily(const StepContext& ctx, Device& dev, int kind) {
  DTC_ASSIGN_OR_RETURN(cudaDataType_t type, contractionType(ctx));
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  auto mismatch = [&] {
    return invalid(ctx, "shapes " + str(a.shape) + ", " + str(b.shape) + " -> " + str(c.shape) +
                            " do not match");
  };
  if (a.shape.size() < 2 || b.shape.size() < 2) return mismatch();
  Shape lead(a.shape.begin(), a.shape.end() - 1);
  int64_t rows = 1;
  for (int64_t d : lead) rows *= d;
  GemmShape s;
  Shape want;
  if (kind == 0) {  // y[..., N] = x[..., K] · w[N, K]ᵀ
    if (b.shape.size() != 2 || b.shape[1] != a.shape.back()) return mismatch();
    s = {rows, b.shape[0], b.shape[1], false, true, 1};
    want = lead, want.push_back(s.n);
  } else if (kind == 1) {  // dx[..., K] = dy[..., N] · w[N, K]
    if (b.shape.size() != 2 || b.shape[0] != a.shape.back()) return mismatch();
    s = {rows, b.shape[1], b.shape[0], false, false, 1};
    want = lead, want.push_back(s.n);
  } else {  // dw[N, K] = Σ dy[..., N]ᵀ · x[..., K]
    if (Shape(b.shape.begin(), b.shape.end() - 1) != lead) return mismatch();
    s = {a.shape.back(), b.shape.back(), rows, true, false, 1};
    want = {s.m, s.n};
  }
  if (c.shape != want) return mismatch();
  return bindGemm(ctx, dev, a.data, b.data, c.data, s, type);
}

template <int Kind>
StatusOr<BoundStep> bindLinear(const StepContext& ctx, Device& dev) {
  return bindLinearFamily(ctx, dev, Kind);
}

// out = a op b, or (b null) out = a + 0 broadcast to out's shape.
StatusOr<BoundStep> bindBroadcasting(const StepContext& ctx, Device& dev, BinaryOp op, const TensorView& a,
                                     const TensorView* b, const TensorView& out) {
  kernels::BroadcastPlan plan;
  if (!kernels::makeBroadcastPlan(a.shape, b ? b->shape : Shape{}, out.shape, plan))
    return invalid(ctx, "broadcasting " + str(a.shape) + " to " + str(out.shape) + " needs more than " +
                            std::to_string(kernels::kMaxDims) + " dimensions (the CUDA kernels' limit)");
  const float *pa = a.f32(), *pb = b ? b->f32() : nullptr;
  float* po = out.f32();
  const int64_t total = out.numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::binary(op, pa, pb, po, plan, total, stream), where); });
}

template <BinaryOp Op>
StatusOr<BoundStep> bindBinary(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  Shape expected;
  if (!broadcastShape(ctx.inputs[0].shape, ctx.inputs[1].shape, expected) ||
      expected != ctx.outputs[0].shape)
    return invalid(ctx, "cannot broadcast " + str(ctx.inputs[0].shape) + " and " +
                            str(ctx.inputs[1].shape) + " to " + str(ctx.outputs[0].shape));
  return bindBroadcasting(ctx, dev, Op, ctx.inputs[0], &ctx.inputs[1], ctx.outputs[0]);
}

StatusOr<BoundStep> bindBroadcast(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  const TensorView &x = ctx.inputs[0], &out = ctx.outputs[0];
  Shape expected;
  if (!broadcastShape(x.shape, out.shape, expected) || expected != out.shape)
    return invalid(ctx, "cannot broadcast " + str(x.shape) + " to " + str(out.shape));
  return bindBroadcasting(ctx, dev, BinaryOp::kAdd, x, nullptr, out);
}

StatusOr<BoundStep> bindReduceSum(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  std::vector<int64_t> axes = ctx.intsAttr("axes");
  int64_t kept = 1;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= (int64_t)x.shape.size() || (i && axes[i] <= axes[i - 1]))
      return invalid(ctx, "bad axes for shape " + str(x.shape));
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), (int64_t)d) == axes.end()) kept *= x.shape[d];
  if (kept != out.numElements()) return invalid(ctx, "output " + str(out.shape) + " does not match");
  kernels::ReducePlan plan;
  if (!kernels::makeReducePlan(x.shape, axes, plan))
    return invalid(ctx, "reducing " + str(x.shape) + " needs more than " + std::to_string(kernels::kMaxDims) +
                            " dimensions (the CUDA kernels' limit)");
  void* partial = nullptr;
  if (plan.scratchBytes()) {
    DTC_ASSIGN_OR_RETURN(partial, dev.scratch(plan.scratchBytes()));
  }
  const float* px = x.f32();
  float* po = out.f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::reduceSum(px, po, plan, partial, stream), where); });
}

// Any element type: labels are reshaped too. Partly overlapping storage (memmove on the CPU)
// goes through a scratch copy.
StatusOr<BoundStep> bindReshape(const StepContext& ctx, Device& dev) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects 1 input and 1 output");
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  if (x.numElements() != out.numElements() || x.dtype != out.dtype)
    return invalid(ctx, "cannot reshape " + str(x.shape) + " to " + str(out.shape));
  const size_t bytes = static_cast<size_t>(x.numElements()) * dtypeSize(x.dtype);
  const uint8_t* from = x.data;
  uint8_t* to = out.data;
  if (to == from || bytes == 0) return BoundStep([] { return Status::Ok(); });
  uint8_t* tmp = nullptr;
  if (from < to + bytes && to < from + bytes) {
    DTC_ASSIGN_OR_RETURN(void* scratch, dev.scratch(bytes));
    tmp = static_cast<uint8_t*>(scratch);
  }
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    if (tmp) {
      DTC_RETURN_IF_ERROR(cudaStatus(cudaMemcpyAsync(tmp, from, bytes, cudaMemcpyDeviceToDevice, stream), where + "a copy"));
      return cudaStatus(cudaMemcpyAsync(to, tmp, bytes, cudaMemcpyDeviceToDevice, stream), where + "a copy");
    }
    return cudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream), where + "a copy");
  });
}

StatusOr<BoundStep> bindFill(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 0, 1));
  float* out = ctx.outputs[0].f32();
  const int64_t n = ctx.outputs[0].numElements();
  const float value = static_cast<float>(ctx.floatAttr("value"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::fill(out, n, value, stream), where); });
}

StatusOr<BoundStep> bindActivation(const StepContext& ctx, Device& dev, Activation f) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  const float* x = ctx.inputs[0].f32();
  float* y = ctx.outputs[0].f32();
  const int64_t n = ctx.inputs[0].numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::activation(f, x, y, n, stream), where); });
}

StatusOr<BoundStep> bindActivationGrad(const StepContext& ctx, Device& dev, Activation f) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  const float *dy = ctx.inputs[0].f32(), *at = ctx.inputs[1].f32();
  float* dx = ctx.outputs[0].f32();
  const int64_t n = ctx.inputs[0].numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::activationGrad(f, dy, at, dx, n, stream), where); });
}

template <Activation F>
StatusOr<BoundStep> bindUnary(const StepContext& ctx, Device& dev) {
  return bindActivation(ctx, dev, F);
}

template <Activation F>
StatusOr<BoundStep> bindUnaryGrad(const StepContext& ctx, Device& dev) {
  return bindActivationGrad(ctx, dev, F);
}

Activation geluForm(const StepContext& ctx) {
  return ctx.intAttr("approximate_tanh") != 0 ? Activation::kGeluTanh : Activation::kGeluErf;
}

StatusOr<BoundStep> bindGelu(const StepContext& ctx, Device& dev) { return bindActivation(ctx, dev, geluForm(ctx)); }
StatusOr<BoundStep> bindGeluGrad(const StepContext& ctx, Device& dev) {
  return bindActivationGrad(ctx, dev, geluForm(ctx));
}

}  // namespace

const CudaBinderTable& coreCudaBinders() {
  static const CudaBinderTable table = {
      {"matmul", bindMatmul},
      {"linear", bindLinear<0>},
      {"linear_grad_input", bindLinear<1>},
      {"linear_grad_weight", bindLinear<2>},
      {"add", bindBinary<BinaryOp::kAdd>},
      {"sub", bindBinary<BinaryOp::kSub>},
      {"mul", bindBinary<BinaryOp::kMul>},
      {"reduce_sum", bindReduceSum},
      {"broadcast", bindBroadcast},
      {"reshape", bindReshape},
      {"fill", bindFill},
      {"relu", bindUnary<Activation::kRelu>},
      {"relu_grad", bindUnaryGrad<Activation::kRelu>},
      {"tanh", bindUnary<Activation::kTanh>},
      {"tanh_grad", bindUnaryGrad<Activation::kTanh>},
      {"gelu", bindGelu},
      {"gelu_grad", bindGeluGrad},
  };
  return table;
}

}  // namespace dtc::cuda
