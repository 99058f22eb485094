#include "planfile/flops.h"

#include <algorithm>

#include "ops/kernel_registry.h"

namespace dtc {
namespace {

int64_t elements(const plan::Value& v) { return numElements(v.shape()); }

int64_t dim(const plan::Value& v, int fromEnd) {
  if (!v.shape() || static_cast<int>(v.shape()->size()) < fromEnd) return 0;
  return v.shape()->Get(v.shape()->size() - fromEnd);
}

bool transposedLhs(const plan::Step& s) {
  const plan::Attr* a = findStepAttr(s, "transpose_lhs");
  return a && a->i() != 0;
}

// fp8_gemm's K: the product of both operands' last contract_dims dimensions (1 when absent).
double fp8ContractedSize(const plan::Step& s, const plan::Value& a) {
  const plan::Attr* attr = findStepAttr(s, "contract_dims");
  const int64_t c = attr ? attr->i() : 1;
  double k = 1;
  for (int64_t i = 1; i <= c; ++i) k *= static_cast<double>(dim(a, static_cast<int>(i)));
  return k;
}

}  // namespace

double contractionFlops(const plan::Function& f, const plan::Step& step) {
  const plan::Step* s = &step;
  const auto& values = *f.values();
  if (s->kernel() == Kernel::causal_attention_qkv ||
      s->kernel() == Kernel::causal_attention_qkv_grad) {
    // As causal_attention(_grad) on the heads of qkv [B, T, 3C] or of q [B, T, C]: 4·B·T²·C
    // forward, twice that backward (the full T², as the decomposed form counts it).
    const size_t at = s->kernel() == Kernel::causal_attention_qkv ? 0 : 1;
    if (!s->inputs() || s->inputs()->size() <= at) return 0;
    const bool fused = s->inputs()->size() == (at == 0 ? 1u : 4u);
    const plan::Value& q = *values.Get(s->inputs()->Get(at));
    const double t = static_cast<double>(dim(q, 2));
    return (at == 0 ? 4.0 : 8.0) * (static_cast<double>(elements(q)) / (fused ? 3.0 : 1.0)) * t;
  }
  {
    if (!s->inputs() || !s->outputs() || s->inputs()->size() < 2 || s->outputs()->size() < 1)
      return 0;
    const plan::Value& in0 = *values.Get(s->inputs()->Get(0));
    const plan::Value& in1 = *values.Get(s->inputs()->Get(1));
    const plan::Value& out = *values.Get(s->outputs()->Get(0));
    const Kernel op = s->kernel();
    double k = 0, n = static_cast<double>(elements(out));
    switch (op) {
      case Kernel::linear:
      case Kernel::linear_bias:
      case Kernel::linear_bias_gelu:
      case Kernel::linear_grad_input:
      case Kernel::linear_grad_input_gelu:
        k = dim(in0, 1);  // the input's features, or the output gradient's
        break;
      case Kernel::fp8_gemm: k = fp8ContractedSize(*s, in0); break;
      case Kernel::linear_grad_weight:
      case Kernel::linear_grad_weight_bias:
        k = static_cast<double>(elements(in0)) / std::max<int64_t>(1, dim(in0, 1));
        break;
      case Kernel::matmul:
      case Kernel::batch_matmul: k = transposedLhs(*s) ? dim(in0, 2) : dim(in0, 1); break;
      case Kernel::conv2d:
      case Kernel::conv2d_grad_input:
        k = static_cast<double>(elements(in1)) / std::max<int64_t>(1, in1.shape()->Get(0));
        break;
      case Kernel::conv2d_grad_weight:
        n = static_cast<double>(elements(in0));
        k = static_cast<double>(elements(out)) / std::max<int64_t>(1, out.shape()->Get(0));
        break;
      case Kernel::causal_attention:
      case Kernel::causal_attention_grad: {
        // q·kᵀ and p·v over [B, H, T, D] (the full T² as the decomposed form counts it); the
        // backward pass does twice the work. A block of the queries (context parallelism) meets
        // every key: T·Tk.
        const size_t keys = op == Kernel::causal_attention ? 1 : 2;
        const double t =
            s->inputs()->size() > keys ? dim(*values.Get(s->inputs()->Get(keys)), 2) : dim(in0, 2);
        const double d = dim(in0, 1);
        return (op == Kernel::causal_attention ? 4.0 : 8.0) *
               (static_cast<double>(elements(in0)) / std::max(d, 1.0)) * t * d;
      }
      default: break;
    }
    return 2.0 * n * k;
  }
}

double contractionFlops(const plan::Function& f) {
  double flops = 0;
  if (f.steps())
    for (const plan::Step* s : *f.steps()) flops += contractionFlops(f, *s);
  return flops;
}

}  // namespace dtc
