// The CPU backend's kernel table: for each plan op, the contract its operands must meet and the
// call into runtime/cpu. Contracts are checked once, when the plan is bound, so a corrupt or
// mismatched plan is an error before any kernel touches memory.
#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "cpu/half.h"
#include "cpu/kernels.h"
#include "exec/bind_util.h"
#include "support/printable.h"

namespace dtc {
namespace {

StatusOr<BoundStep> bindMatmul(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  if (a.shape.size() != 2 || b.shape.size() != 2 || c.shape.size() != 2)
    return invalid(ctx, "operands must be 2-D");
  bool tA = ctx.intAttr("transpose_lhs") != 0, tB = ctx.intAttr("transpose_rhs") != 0;
  int64_t m = tA ? a.shape[1] : a.shape[0], k = tA ? a.shape[0] : a.shape[1];
  int64_t kb = tB ? b.shape[1] : b.shape[0], n = tB ? b.shape[0] : b.shape[1];
  if (k != kb || c.shape != Shape{m, n})
    return invalid(ctx, "shapes " + str(a.shape) + ", " + str(b.shape) + " -> " + str(c.shape) +
                            " do not match");
  float *pa = a.f32(), *pb = b.f32(), *pc = c.f32();
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::matmul(pa, pb, pc, m, n, k, tA, tB, *pool);
    return Status::Ok();
  });
}

// linear, linear_grad_input, linear_grad_weight: one GEMM on the leading dimensions flattened.
StatusOr<BoundStep> bindLinearFamily(const StepContext& ctx, int kind) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  auto mismatch = [&] {
    return invalid(ctx, "shapes " + str(a.shape) + ", " + str(b.shape) + " -> " + str(c.shape) +
                            " do not match");
  };
  if (a.shape.size() < 2 || b.shape.size() < 2) return mismatch();
  Shape lead(a.shape.begin(), a.shape.end() - 1);
  int64_t rows = 1;
  for (int64_t d : lead) rows *= d;
  int64_t m, n, k;
  bool tA = false, tB = false;
  Shape want;
  if (kind == 0) {  // y[..., N] = x[..., K] · w[N, K]ᵀ
    if (b.shape.size() != 2 || b.shape[1] != a.shape.back()) return mismatch();
    m = rows, n = b.shape[0], k = b.shape[1], tB = true;
    want = lead, want.push_back(n);
  } else if (kind == 1) {  // dx[..., K] = dy[..., N] · w[N, K]
    if (b.shape.size() != 2 || b.shape[0] != a.shape.back()) return mismatch();
    m = rows, n = b.shape[1], k = b.shape[0];
    want = lead, want.push_back(n);
  } else {  // dw[N, K] = Σ dy[..., N]ᵀ · x[..., K]
    if (Shape(b.shape.begin(), b.shape.end() - 1) != lead) return mismatch();
    m = a.shape.back(), n = b.shape.back(), k = rows, tA = true;
    want = {m, n};
  }
  if (c.shape != want) return mismatch();
  float *pa = a.f32(), *pb = b.f32(), *pc = c.f32();
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::matmul(pa, pb, pc, m, n, k, tA, tB, *pool);
    return Status::Ok();
  });
}

template <int Kind>
StatusOr<BoundStep> bindLinear(const StepContext& ctx) {
  return bindLinearFamily(ctx, Kind);
}

template <cpu::BinaryOp Op>
StatusOr<BoundStep> bindBinary(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  Shape expected;
  if (!broadcastShape(ctx.inputs[0].shape, ctx.inputs[1].shape, expected) ||
      expected != ctx.outputs[0].shape)
    return invalid(ctx, "cannot broadcast " + str(ctx.inputs[0].shape) + " and " +
                            str(ctx.inputs[1].shape) + " to " + str(ctx.outputs[0].shape));
  TensorView a = ctx.inputs[0], b = ctx.inputs[1], out = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::binary(Op, a.f32(), a.shape, b.f32(), b.shape, out.f32(), out.shape, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindReduceSum(const StepContext& ctx) {
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
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::reduceSum(x.f32(), x.shape, axes, out.f32(), *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBroadcast(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  Shape expected;
  if (!broadcastShape(x.shape, out.shape, expected) || expected != out.shape)
    return invalid(ctx, "cannot broadcast " + str(x.shape) + " to " + str(out.shape));
  ThreadPool* pool = &ctx.pool;
  // x + 0 through the broadcasting kernel: one code path for every broadcast pattern.
  return BoundStep([=] {
    static const float zero = 0.0f;
    cpu::binary(cpu::BinaryOp::kAdd, x.f32(), x.shape, &zero, {}, out.f32(), out.shape, *pool);
    return Status::Ok();
  });
}

// Any element type: labels are reshaped too.
StatusOr<BoundStep> bindReshape(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects 1 input and 1 output");
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  if (x.numElements() != out.numElements() || x.dtype != out.dtype)
    return invalid(ctx, "cannot reshape " + str(x.shape) + " to " + str(out.shape));
  size_t bytes = static_cast<size_t>(x.numElements()) * dtypeSize(x.dtype);
  return BoundStep([=] {
    if (out.data != x.data) std::memmove(out.data, x.data, bytes);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindFill(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 0, 1));
  TensorView out = ctx.outputs[0];
  float value = static_cast<float>(ctx.floatAttr("value"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::fill(out.f32(), out.numElements(), value, *pool);
    return Status::Ok();
  });
}

// Unary element-wise ops: y = f(x).
template <void (*Fn)(const float*, float*, int64_t, ThreadPool&)>
StatusOr<BoundStep> bindUnary(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    Fn(x.f32(), y.f32(), x.numElements(), *pool);
    return Status::Ok();
  });
}

// Activation gradients: dx = g(dy, at).
template <void (*Fn)(const float*, const float*, float*, int64_t, ThreadPool&)>
StatusOr<BoundStep> bindActivationGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  TensorView dy = ctx.inputs[0], at = ctx.inputs[1], dx = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    Fn(dy.f32(), at.f32(), dx.f32(), dy.numElements(), *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindGelu(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  bool tanhForm = ctx.intAttr("approximate_tanh") != 0;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::gelu(x.f32(), y.f32(), x.numElements(), tanhForm, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindGeluGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], dx = ctx.outputs[0];
  bool tanhForm = ctx.intAttr("approximate_tanh") != 0;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::geluGrad(dy.f32(), x.f32(), dx.f32(), dy.numElements(), tanhForm, *pool);
    return Status::Ok();
  });
}

Status checkCrossEntropy(const StepContext& ctx, const TensorView& logits, const TensorView& labels) {
  if (logits.shape.size() != 2 || labels.shape != Shape{logits.shape[0]})
    return invalid(ctx, "needs logits [N,C] and labels [N], got " + str(logits.shape) + " and " +
                            str(labels.shape));
  return Status::Ok();
}

// A mean loss's divisor: the `count` attribute (the global rows or elements of a partitioned
// or accumulated batch), at least the local ones; 0 when absent (the kernel's own count).
StatusOr<int64_t> lossDivisor(const StepContext& ctx, int64_t local) {
  int64_t count = ctx.intAttr("count");
  if (count != 0 && count < local)
    return invalid(ctx, "count " + std::to_string(count) + " is below the " +
                            std::to_string(local) + " elements it averages");
  return count;
}

StatusOr<BoundStep> bindCrossEntropy(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], loss = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(checkCrossEntropy(ctx, logits, labels));
  if (loss.numElements() != 1) return invalid(ctx, "loss must be a scalar");
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, logits.shape[0]));
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  return BoundStep([=] {
    int64_t rows = logits.shape[0], classes = logits.shape[1];
    if (!cpu::softmaxCrossEntropy(logits.f32(), labels.i64(), rows, classes, loss.f32(), *pool,
                                  divisor))
      return Status::InvalidInput(where + "a label is outside [0, " + std::to_string(classes) +
                                  ") (the data's class labels do not fit the model)");
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCrossEntropyGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1, {2}));
  TensorView dloss = ctx.inputs[0], logits = ctx.inputs[1], labels = ctx.inputs[2];
  TensorView dlogits = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(checkCrossEntropy(ctx, logits, labels));
  DTC_RETURN_IF_ERROR(sameShape(ctx, logits, dlogits));
  if (dloss.numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, logits.shape[0]));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::softmaxCrossEntropyGrad(dloss.f32(), logits.f32(), labels.i64(), logits.shape[0],
                                 logits.shape[1], dlogits.f32(), *pool, divisor);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMse(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  if (ctx.outputs[0].numElements() != 1) return invalid(ctx, "loss must be a scalar");
  TensorView pred = ctx.inputs[0], target = ctx.inputs[1], loss = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, pred.numElements()));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::mse(pred.f32(), target.f32(), pred.numElements(), loss.f32(), *pool, divisor);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMseGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.inputs[2]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.outputs[0]));
  if (ctx.inputs[0].numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  TensorView dloss = ctx.inputs[0], pred = ctx.inputs[1], target = ctx.inputs[2];
  TensorView dpred = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, pred.numElements()));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::mseGrad(dloss.f32(), pred.f32(), target.f32(), pred.numElements(), dpred.f32(), *pool,
                 divisor);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindSgd(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 2));
  for (const TensorView& t : {ctx.inputs[1], ctx.inputs[2], ctx.outputs[0], ctx.outputs[1]})
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], t));
  TensorView p = ctx.inputs[0], g = ctx.inputs[1], buf = ctx.inputs[2];
  TensorView pOut = ctx.outputs[0], bufOut = ctx.outputs[1];
  float lr = ctx.floatAttr("lr"), momentum = ctx.floatAttr("momentum");
  float wd = ctx.floatAttr("weight_decay");
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::sgd(p.f32(), g.f32(), buf.f32(), pOut.f32(), bufOut.f32(), p.numElements(), lr,
             momentum, wd, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindAdamw(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 3));
  for (const TensorView& t : {ctx.inputs[1], ctx.inputs[2], ctx.inputs[3], ctx.outputs[0],
                              ctx.outputs[1], ctx.outputs[2]})
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], t));
  if (ctx.inputs[4].numElements() != 1) return invalid(ctx, "step must be a scalar");
  TensorView p = ctx.inputs[0], g = ctx.inputs[1], m = ctx.inputs[2], v = ctx.inputs[3];
  TensorView step = ctx.inputs[4];
  TensorView pOut = ctx.outputs[0], mOut = ctx.outputs[1], vOut = ctx.outputs[2];
  float lr = ctx.floatAttr("lr"), b1 = ctx.floatAttr("beta1"), b2 = ctx.floatAttr("beta2");
  float eps = ctx.floatAttr("eps"), wd = ctx.floatAttr("weight_decay");
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::adamw(p.f32(), g.f32(), m.f32(), v.f32(), pOut.f32(), mOut.f32(), vOut.f32(),
               p.numElements(), *step.f32(), lr, b1, b2, eps, wd, *pool);
    return Status::Ok();
  });
}

}  // namespace

const BinderTable& coreBinders() {
  static const BinderTable table = {
      {"matmul", bindMatmul},
      {"linear", bindLinear<0>},
      {"linear_grad_input", bindLinear<1>},
      {"linear_grad_weight", bindLinear<2>},
      {"add", bindBinary<cpu::BinaryOp::kAdd>},
      {"sub", bindBinary<cpu::BinaryOp::kSub>},
      {"mul", bindBinary<cpu::BinaryOp::kMul>},
      {"reduce_sum", bindReduceSum},
      {"broadcast", bindBroadcast},
      {"reshape", bindReshape},
      {"fill", bindFill},
      {"relu", bindUnary<cpu::relu>},
      {"relu_grad", bindActivationGrad<cpu::reluGrad>},
      {"tanh", bindUnary<cpu::tanhForward>},
      {"tanh_grad", bindActivationGrad<cpu::tanhGrad>},
      {"gelu", bindGelu},
      {"gelu_grad", bindGeluGrad},
      {"softmax_cross_entropy", bindCrossEntropy},
      {"softmax_cross_entropy_grad", bindCrossEntropyGrad},
      {"mse", bindMse},
      {"mse_grad", bindMseGrad},
      {"sgd_update", bindSgd},
      {"adamw_update", bindAdamw},
  };
  return table;
}

namespace {

bool lowPrecision(DType t) { return t == DType::kBF16 || t == DType::kF16; }

void toF32(const TensorView& from, float* to) {
  const auto* h = reinterpret_cast<const uint16_t*>(from.data);
  const int64_t n = from.numElements();
  if (from.dtype == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) to[i] = cpu::bf16ToF32(h[i]);
  else if (from.dtype == DType::kF16)
    for (int64_t i = 0; i < n; ++i) to[i] = cpu::f16ToF32(h[i]);
  else
    std::memcpy(to, from.data, n * sizeof(float));
}

void fromF32(const float* from, const TensorView& to) {
  auto* h = reinterpret_cast<uint16_t*>(to.data);
  const int64_t n = to.numElements();
  if (to.dtype == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) h[i] = cpu::f32ToBf16(from[i]);
  else if (to.dtype == DType::kF16)
    for (int64_t i = 0; i < n; ++i) h[i] = cpu::f32ToF16(from[i]);
  else
    std::memcpy(to.data, from, n * sizeof(float));
}

// y = x in y's element type (f32, bf16, f16).
StatusOr<BoundStep> bindCast(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1) return invalid(ctx, "expects 1 input and 1 output");
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  for (const TensorView* t : {&x, &y})
    if (t->dtype != DType::kF32 && !lowPrecision(t->dtype))
      return invalid(ctx, "casts between float32, bfloat16 and float16, not " + dtypeName(t->dtype));
  if (x.shape != y.shape) return invalid(ctx, "shapes " + str(x.shape) + " and " + str(y.shape) + " differ");
  return BoundStep([=] {
    if (x.dtype == y.dtype) {
      std::memmove(y.data, x.data, x.numElements() * dtypeSize(x.dtype));
    } else if (x.dtype == DType::kF32) {
      fromF32(x.f32(), y);
    } else if (y.dtype == DType::kF32) {
      toF32(x, y.f32());
    } else {
      std::vector<float> wide(x.numElements());
      toF32(x, wide.data());
      fromF32(wide.data(), y);
    }
    return Status::Ok();
  });
}

// A step on bf16/f16 operands run by its f32 kernel on widened copies (exact: every bf16/f16
// value is a float32), the results rounded back: a contraction then accumulates in f32 and
// rounds once, as a GPU's tensor cores do. Operands already f32 (attention's log-sum-exp) are
// used as they are; the 16-bit ones must share one type.
StatusOr<BoundStep> bindLowPrecision(const StepContext& ctx, const Binder& wide) {
  DType low = DType::kF32;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list) {
      if (!lowPrecision(t.dtype)) continue;
      if (low != DType::kF32 && t.dtype != low)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low) + " and " +
                                dtypeName(t.dtype));
      low = t.dtype;
    }
  auto buffers = std::make_shared<std::vector<std::vector<float>>>();
  StepContext f32{ctx.step, ctx.inputs, ctx.outputs, ctx.pool, ctx.mesh};
  for (auto* list : {&f32.inputs, &f32.outputs})
    for (TensorView& t : *list) {
      if (!lowPrecision(t.dtype)) continue;
      buffers->emplace_back(t.numElements());
      t.data = reinterpret_cast<uint8_t*>(buffers->back().data());
      t.dtype = DType::kF32;
    }
  DTC_ASSIGN_OR_RETURN(BoundStep inner, wide(f32));
  std::vector<TensorView> lowIn = ctx.inputs, lowOut = ctx.outputs;
  std::vector<TensorView> wideIn = f32.inputs, wideOut = f32.outputs;
  return BoundStep([=] {
    for (size_t i = 0; i < lowIn.size(); ++i)
      if (lowPrecision(lowIn[i].dtype)) toF32(lowIn[i], wideIn[i].f32());
    DTC_RETURN_IF_ERROR(inner());
    for (size_t i = 0; i < lowOut.size(); ++i)
      if (lowPrecision(lowOut[i].dtype)) fromF32(wideOut[i].f32(), lowOut[i]);
    (void)buffers;  // owned by the step
    return Status::Ok();
  });
}

}  // namespace

StatusOr<BoundStep> bindCpuStep(const StepContext& ctx) {
  std::string op = ctx.step.op()->str();
  if (op == "cast") return bindCast(ctx);
  // Low-precision operands: contractions (mixed precision) and the collectives that move or
  // sum their results run on f32 copies (exact for moves; sums in f32 are the more accurate).
  static const char* const kWidened[] = {"matmul", "batch_matmul", "linear", "linear_grad_input",
                                         "linear_grad_weight", "causal_attention",
                                         "causal_attention_grad", "linear_bias", "linear_bias_gelu",
                                         "linear_grad_input_gelu", "transpose", "split", "concat",
                                         "layer_norm",
                                         "all_reduce", "all_gather",
                                         "reduce_scatter", "all_to_all", "local_slice",
                                         "collective_broadcast"};
  bool anyLow = false;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list) anyLow |= lowPrecision(t.dtype);
  if (anyLow && std::find(std::begin(kWidened), std::end(kWidened), op) != std::end(kWidened))
    for (const BinderTable* table : {&coreBinders(), &transformerBinders(), &collectiveBinders(),
                                     &epilogueBinders()})
      if (auto it = table->find(op); it != table->end()) return bindLowPrecision(ctx, it->second);
  for (const BinderTable* table : {&coreBinders(), &transformerBinders(), &convBinders(),
                                     &collectiveBinders(), &vocabParallelBinders(),
                                     &lossScaleBinders(), &epilogueBinders()}) {
    auto it = table->find(op);
    if (it != table->end()) return it->second(ctx);
  }
  return Status::InvalidInput("unknown op '" + printable(op) + "' (the plan needs a newer dtrun)");
}

}  // namespace dtc
