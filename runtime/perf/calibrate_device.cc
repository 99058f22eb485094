#include "perf/calibrate_device.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "perf/kernel_bench.h"

namespace dtc::perf {
namespace {

using Shape = std::vector<int64_t>;

BenchOperand of(DType t, Shape s) { return {t, std::move(s), 0, -1}; }
BenchOperand ids(Shape s, int64_t range) { return {DType::kI64, std::move(s), range, -1}; }
BenchOperand over(DType t, Shape s, int input) { return {t, std::move(s), 0, input}; }
BenchAttr intAttr(const char* name, int64_t v) { return {name, v, 0, {}}; }
BenchAttr floatAttr(const char* name, double v) { return {name, 0, v, {}}; }
BenchAttr intsAttr(const char* name, std::vector<int64_t> v) { return {name, 0, 0, std::move(v)}; }

const char* typeSuffix(DType t) {
  return t == DType::kBF16 ? "@bf16" : t == DType::kF16 ? "@f16" : "";
}

}  // namespace

Status measureDevice(Backend& backend, ThreadPool& pool, DeviceProfile& p,
                     std::vector<std::string>& skipped) {
  KernelBench bench(backend, pool);
  // A GPU is measured at the sizes of a large model's layers; the CPU's kernels behind the device
  // interface (cpu-staged, which tests this path) at a 64th of the work.
  const bool gpu = backend.kind().gpu;
  p.device = backend.kind().name;
  const DType f32 = DType::kF32, bf16 = DType::kBF16;

  // GEMMs shaped as a linear layer's: 8n rows (tokens) of width n times an [n, n] weight, n from
  // 128 to 4096 on a GPU (16·n³ FLOPs each).
  const std::vector<int64_t> widths = gpu ? std::vector<int64_t>{128, 256, 512, 1024, 2048, 4096}
                                          : std::vector<int64_t>{32, 64, 128, 256};
  for (DType t : {f32, bf16}) {
    std::vector<std::pair<double, double>> curve;
    for (int64_t n : widths) {
      const BenchStep linear{"linear", {}, {of(t, {8 * n, n}), of(t, {n, n})}, {of(t, {8 * n, n})}};
      DTC_ASSIGN_OR_RETURN(double s, bench.secondsPerCall(linear, 0.05));
      const double flops = 2.0 * static_cast<double>(8 * n) * static_cast<double>(n * n);
      curve.push_back({flops, flops / s});
    }
    keepNonDecreasing(curve);
    p.gemm.push_back({t, curve});
  }

  // Causal attention over [4, 12, T, 64] (GPT-2's heads), T from 128 to 2048 on a GPU, forward
  // and backward; FLOPs as the prediction counts them (half of the full T² products).
  const std::vector<int64_t> lengths =
      gpu ? std::vector<int64_t>{128, 256, 512, 1024, 2048} : std::vector<int64_t>{32, 64, 128};
  // Forward and backward FLOP/s of causal attention over [4, 12, len, dim] in `t`.
  auto attentionRates = [&](DType t, int64_t len,
                            int64_t dim) -> StatusOr<std::pair<double, double>> {
    const Shape qkv = {4, 12, len, dim}, rows = {4, 12, len};
    const BenchAttr scale = floatAttr("scale", 0.125);
    const BenchStep fwd{"causal_attention",
                        {scale},
                        {of(t, qkv), of(t, qkv), of(t, qkv)},
                        {of(t, qkv), of(f32, rows)}};
    const BenchStep bwd{"causal_attention_grad",
                        {scale},
                        {of(t, qkv), of(t, qkv), of(t, qkv), of(t, qkv), of(t, qkv), of(f32, rows)},
                        {of(t, qkv), of(t, qkv), of(t, qkv)}};
    const double flops = 2.0 * 4 * 12 * static_cast<double>(len * len) * dim;
    DTC_ASSIGN_OR_RETURN(const double f, bench.secondsPerCall(fwd, 0.05));
    DTC_ASSIGN_OR_RETURN(const double b, bench.secondsPerCall(bwd, 0.05));
    return std::make_pair(flops / f, 2 * flops / b);
  };
  for (DType t : {f32, bf16}) {
    std::vector<std::pair<double, double>> forward, backward;
    bool refused = false;
    for (int64_t len : lengths) {
      StatusOr<std::pair<double, double>> rates = attentionRates(t, len, 64);
      if (!rates.ok()) {
        skipped.push_back(std::string("causal_attention") + typeSuffix(t) + " (" +
                          rates.status().message() + ")");
        refused = true;
        break;
      }
      const double flops = 2.0 * 4 * 12 * static_cast<double>(len * len) * 64;
      forward.push_back({flops, rates->first});
      backward.push_back({2 * flops, rates->second});
    }
    if (refused) continue;
    keepNonDecreasing(forward);
    keepNonDecreasing(backward);
    p.attention.push_back({t, forward});
    p.attentionGrad.push_back({t, backward});
    // The same attention at other head dimensions, on the longest sequence above: each rate
    // over the rate at 64, the factor the curves are scaled by (a small head dimension leaves a
    // CPU kernel's exp and loop per score unamortised).
    std::vector<std::pair<double, double>> forwardByDim, backwardByDim;
    for (int64_t dim : {16, 32, 64, 128}) {
      StatusOr<std::pair<double, double>> rates = attentionRates(t, lengths.back(), dim);
      if (!rates.ok()) break;  // a head dimension the kernels do not take
      forwardByDim.push_back({static_cast<double>(dim), rates->first});
      backwardByDim.push_back({static_cast<double>(dim), rates->second});
    }
    if (relativeToHeadDim64(forwardByDim) && relativeToHeadDim64(backwardByDim)) {
      p.attentionHeadDim.push_back({t, forwardByDim});
      p.attentionGradHeadDim.push_back({t, backwardByDim});
    }
  }

  // Attention on the fused projection (qkv [4, T, 3·12·64]), which a backend may run on other
  // kernels than the unpacked form's (cuDNN's on CUDA, for 16-bit operands): bf16 only, the
  // shapes and FLOPs as above.
  {
    std::vector<std::pair<double, double>> forward, backward;
    for (int64_t len : lengths) {
      const Shape qkv = {4, len, 3 * 12 * 64}, merged = {4, len, 12 * 64}, rows = {4, 12, len};
      const std::vector<BenchAttr> attrs = {floatAttr("scale", 0.125), intAttr("heads", 12)};
      const BenchStep fwd{
          "causal_attention_qkv", attrs, {of(bf16, qkv)}, {of(bf16, merged), of(f32, rows)}};
      const BenchStep bwd{"causal_attention_qkv_grad",
                          attrs,
                          {of(bf16, merged), of(bf16, qkv), of(bf16, merged), of(f32, rows)},
                          {of(bf16, qkv)}};
      const double flops = 2.0 * 4 * 12 * static_cast<double>(len * len) * 64;
      StatusOr<double> f = bench.secondsPerCall(fwd, 0.05);
      StatusOr<double> b = f.ok() ? bench.secondsPerCall(bwd, 0.05) : f;
      if (!f.ok() || !b.ok()) {
        skipped.push_back(std::string("causal_attention_qkv@bf16 (") +
                          (f.ok() ? b : f).status().message() + ")");
        forward.clear();
        break;
      }
      forward.push_back({flops, flops / *f});
      backward.push_back({2 * flops, 2 * flops / *b});
    }
    if (!forward.empty()) {
      keepNonDecreasing(forward);
      keepNonDecreasing(backward);
      p.qkvAttention.push_back({bf16, forward});
      p.qkvAttentionGrad.push_back({bf16, backward});
    }
  }

  // Memory: a scale over 256 MiB in and out on a GPU (32 MiB on a CPU), far beyond the caches.
  const int64_t big = gpu ? int64_t{64} << 20 : int64_t{8} << 20;
  {
    const BenchStep scale{"scale", {floatAttr("factor", 0.5)}, {of(f32, {big})}, {of(f32, {big})}};
    DTC_ASSIGN_OR_RETURN(double s, bench.secondsPerCall(scale, 0.1));
    p.memoryBytesPerSecond = 2.0 * 4.0 * static_cast<double>(big) / s;
  }
  // A kernel call's fixed cost: the same on 16 values, calls back to back.
  {
    const BenchStep tiny{"scale", {floatAttr("factor", 0.5)}, {of(f32, {16})}, {of(f32, {16})}};
    DTC_ASSIGN_OR_RETURN(p.kernelSeconds, bench.secondsPerCall(tiny, 0.05));
  }

  // Per-element costs on operands of 2^23 elements on a GPU, 2^20 on a CPU (rows of 1024;
  // attention probabilities of 256 × 256 per slice), keyed by kernel and, for 16-bit operands,
  // their type.
  const int64_t n = gpu ? int64_t{1} << 23 : int64_t{1} << 20, width = 1024, rows = n / width,
                t = 256;
  const Shape flat = {n}, matrix = {rows, width}, heads = {n / (1 << 20), 1024, 16, 64},
              headsT = {n / (1 << 20), 16, 1024, 64}, probs = {n / (t * t), t, t};
  struct Element {
    std::string key;
    BenchStep step;
  };
  std::vector<Element> elements = {
      {"gelu", {"gelu", {}, {of(f32, flat)}, {of(f32, flat)}}},
      {"gelu_grad", {"gelu_grad", {}, {of(f32, flat), of(f32, flat)}, {of(f32, flat)}}},
      {"gelu_tanh", {"gelu", {intAttr("approximate_tanh", 1)}, {of(f32, flat)}, {of(f32, flat)}}},
      {"gelu_grad_tanh",
       {"gelu_grad",
        {intAttr("approximate_tanh", 1)},
        {of(f32, flat), of(f32, flat)},
        {of(f32, flat)}}},
      {"add", {"add", {}, {of(f32, flat), of(f32, flat)}, {of(f32, flat)}}},
      {"mul", {"mul", {}, {of(f32, flat), of(f32, flat)}, {of(f32, flat)}}},
      {"cast", {"cast", {}, {of(f32, flat)}, {of(bf16, flat)}}},
      {"cast@bf16", {"cast", {}, {of(bf16, flat)}, {of(f32, flat)}}},
      {"transpose",
       {"transpose", {intsAttr("perm", {0, 2, 1, 3})}, {of(f32, heads)}, {of(f32, headsT)}}},
      {"transpose@bf16",
       {"transpose", {intsAttr("perm", {0, 2, 1, 3})}, {of(bf16, heads)}, {of(bf16, headsT)}}},
      {"split",
       {"split",
        {intAttr("axis", 1)},
        {of(f32, {rows / 2, 3 * 768})},
        {of(f32, {rows / 2, 768}), of(f32, {rows / 2, 768}), of(f32, {rows / 2, 768})}}},
      {"concat",
       {"concat",
        {intAttr("axis", 1)},
        {of(f32, {rows, width / 2}), of(f32, {rows, width / 2})},
        {of(f32, matrix)}}},
      {"reduce_sum",
       {"reduce_sum", {intsAttr("axes", {0})}, {of(f32, matrix)}, {of(f32, {width})}}},
      {"layer_norm",
       {"layer_norm",
        {floatAttr("eps", 1e-5)},
        {of(f32, matrix), of(f32, {width}), of(f32, {width})},
        {of(f32, matrix), of(f32, {rows}), of(f32, {rows})}}},
      {"layer_norm_grad",
       {"layer_norm_grad",
        {},
        {of(f32, matrix), of(f32, matrix), of(f32, {width}), of(f32, {rows}), of(f32, {rows})},
        {of(f32, matrix), of(f32, {width}), of(f32, {width})}}},
      {"add_layer_norm",
       {"add_layer_norm",
        {floatAttr("eps", 1e-5)},
        {of(f32, matrix), of(f32, matrix), of(f32, {width}), of(f32, {width})},
        {of(f32, matrix), of(bf16, matrix), of(f32, {rows}), of(f32, {rows})}}},
      {"layer_norm_grad_add@bf16",
       {"layer_norm_grad_add",
        {},
        {of(bf16, matrix), of(f32, matrix), of(f32, {width}), of(f32, {rows}), of(f32, {rows}),
         of(f32, matrix)},
        {of(f32, matrix), of(f32, {width}), of(f32, {width}), of(bf16, matrix)}}},
      {"rms_norm@bf16",
       {"rms_norm",
        {floatAttr("eps", 1e-5)},
        {of(f32, matrix), of(f32, {width})},
        {of(bf16, matrix), of(f32, {rows})}}},
      {"rms_norm_grad@bf16",
       {"rms_norm_grad",
        {},
        {of(bf16, matrix), of(f32, matrix), of(f32, {width}), of(f32, {rows})},
        {of(f32, matrix), of(f32, {width})}}},
      {"add_rms_norm@bf16",
       {"add_rms_norm",
        {floatAttr("eps", 1e-5)},
        {of(f32, matrix), of(bf16, matrix), of(f32, {width})},
        {of(f32, matrix), of(bf16, matrix), of(f32, {rows})}}},
      {"swiglu@bf16", {"swiglu", {}, {of(bf16, flat), of(bf16, flat)}, {of(bf16, flat)}}},
      {"swiglu_grad@bf16",
       {"swiglu_grad",
        {},
        {of(bf16, flat), of(bf16, flat), of(bf16, flat)},
        {of(bf16, flat), of(bf16, flat)}}},
      // On [B, T, H, D] rows, as attention on the projections reads them.
      {"rotary@bf16",
       {"rotary",
        {intAttr("seq_major", 1)},
        {of(bf16, heads), of(f32, {1024, 64}), of(f32, {1024, 64})},
        {of(bf16, heads)}}},
      {"rotary_grad@bf16",
       {"rotary_grad",
        {intAttr("seq_major", 1)},
        {of(bf16, heads), of(f32, {1024, 64}), of(f32, {1024, 64})},
        {of(bf16, heads)}}},
      // A Llama block's norm before attention: the q, k and v projections' input gradients.
      {"rms_norm_grad_add@bf16",
       {"rms_norm_grad_add",
        {},
        {of(bf16, matrix), of(bf16, matrix), of(bf16, matrix), of(f32, matrix), of(f32, {width}),
         of(f32, {rows}), of(f32, matrix)},
        {of(f32, matrix), of(f32, {width}), of(bf16, matrix)}}},
      {"softmax_cross_entropy",
       {"softmax_cross_entropy", {}, {of(f32, matrix), ids({rows}, width)}, {of(f32, {})}}},
      {"softmax_cross_entropy_grad",
       {"softmax_cross_entropy_grad",
        {},
        {of(f32, {}), of(f32, matrix), ids({rows}, width)},
        {of(f32, matrix)}}},
      {"softmax_cross_entropy_with_grad@bf16",
       {"softmax_cross_entropy_with_grad",
        {},
        {of(bf16, matrix), ids({rows}, width), of(f32, {})},
        {of(f32, {}), of(bf16, matrix)}}},
      {"causal_softmax",
       {"causal_softmax", {floatAttr("scale", 1.0)}, {of(f32, probs)}, {of(f32, probs)}}},
      {"causal_softmax_grad",
       {"causal_softmax_grad",
        {floatAttr("scale", 1.0)},
        {of(f32, probs), of(f32, probs)},
        {of(f32, probs)}}},
      {"adamw_update",
       {"adamw_update",
        {floatAttr("beta1", 0.9), floatAttr("beta2", 0.999), floatAttr("eps", 1e-8),
         floatAttr("weight_decay", 0.01)},
        {of(f32, flat), of(f32, flat), of(f32, flat), of(f32, flat), of(f32, {}), of(f32, {})},
        {over(f32, flat, 0), over(f32, flat, 2), over(f32, flat, 3)}}},
  };
  for (const Element& e : elements) {
    StatusOr<double> s = bench.secondsPerCall(e.step, 0.05);
    if (!s.ok()) {
      skipped.push_back(e.key + " (" + s.status().message() + ")");
      continue;
    }
    uint64_t largest = 0;
    for (const auto* list : {&e.step.inputs, &e.step.outputs})
      for (const BenchOperand& o : *list) largest = std::max(largest, o.elements());
    p.elementSeconds.push_back(
        {e.key, std::max(*s - p.kernelSeconds, 0.0) / static_cast<double>(largest)});
  }
  return Status::Ok();
}

}  // namespace dtc::perf
