// The residual stream's adds joined to LayerNorm (add_layer_norm, layer_norm_grad_add) against the
// CPU, which runs add and layer_norm (layer_norm_grad) one after the other: f32, a 16-bit y (the
// next GEMM's input), a 16-bit dy (a GEMM's input gradient) and the sum's 16-bit copy (the next
// GEMMs' dy); rows not a multiple of a block and a GPT-2 width. Tolerances as the LayerNorm
// cases': f32 1e-5, the 16-bit outputs one rounding of values that agree to that. Llama's fused
// blocks too: rms_norm, swiglu and rotary and their gradients, against the CPU's kernels, in f32
// and with their activations stored in bf16/f16 (read widened, written rounded; the CPU runs its
// f32 kernels on widened copies); RMSNorm's residual kernels (add_rms_norm, rms_norm_grad_add
// with one to four parts of dy) against the CPU's add, rms_norm and rms_norm_grad in order.
#include "exec/bind_util.h"
#include "harness.h"

namespace dtc::gputest {
namespace {

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kF16 = DType::kF16;

Case addNorm(DType y, int64_t rows, int64_t c) {
  Case k{"add_layer_norm [" + std::to_string(rows) + "," + std::to_string(c) + "]" + typeLabel(y) +
             " y",
         "add_layer_norm",
         {floatAttr("eps", 1e-5)},
         {f32({rows, c}, -3, 3), f32({rows, c}, -1, 1), f32({c}, 0.5f, 1.5f), f32({c})},
         {out({rows, c}), outAs(y, {rows, c}), out({rows}), out({rows})}};
  k.tolerance = y == kBF16 ? 1e-2 : y == kF16 ? 2e-3 : 1e-5;
  k.maxUlps = -1;
  return k;
}

Case normGradAdd(DType dy, DType copy, int64_t rows, int64_t c) {
  Case k{"layer_norm_grad_add [" + std::to_string(rows) + "," + std::to_string(c) + "]" +
             typeLabel(dy) + " dy" + (copy != kF32 ? typeLabel(copy) + " copy" : ""),
         "layer_norm_grad_add",
         {},
         {dy == kF32 ? f32({rows, c}) : lowp(dy, {rows, c}), f32({rows, c}, -3, 3),
          f32({c}, 0.5f, 1.5f), f32({rows}), f32({rows}, 0.5f, 2), f32({rows, c})},
         {out({rows, c}), out({c}), out({c})}};
  if (copy != kF32) k.outputs.push_back(outAs(copy, {rows, c}));
  k.tolerance = copy == kBF16 ? 1e-2 : copy == kF16 ? 2e-3 : 1e-4;
  k.maxUlps = -1;
  return k;
}

Case rmsNorm(int64_t rows, int64_t c) {
  Case k{"rms_norm [" + std::to_string(rows) + "," + std::to_string(c) + "]",
         "rms_norm",
         {floatAttr("eps", 1e-6)},
         {f32({rows, c}, -3, 3), f32({c}, 0.5f, 1.5f)},
         {out({rows, c}), out({rows})}};
  k.tolerance = 1e-5;
  k.maxUlps = -1;
  return k;
}

Case rmsNormGrad(int64_t rows, int64_t c) {
  Case k{"rms_norm_grad [" + std::to_string(rows) + "," + std::to_string(c) + "]",
         "rms_norm_grad",
         {},
         {f32({rows, c}), f32({rows, c}, -3, 3), f32({c}, 0.5f, 1.5f), f32({rows}, 0.5f, 2)},
         {out({rows, c}), out({c})}};
  k.tolerance = 1e-4;
  k.maxUlps = -1;
  return k;
}

// add_rms_norm: the residual r in `r` (a sublayer's 16-bit output as a bf16 plan reads it), y in
// `y`.
Case addRmsNorm(DType r, DType y, int64_t rows, int64_t c) {
  Case k{"add_rms_norm [" + std::to_string(rows) + "," + std::to_string(c) + "]" + typeLabel(r) +
             " r" + typeLabel(y) + " y",
         "add_rms_norm",
         {floatAttr("eps", 1e-6)},
         {f32({rows, c}, -3, 3), r == kF32 ? f32({rows, c}, -1, 1) : lowp(r, {rows, c}),
          f32({c}, 0.5f, 1.5f)},
         {out({rows, c}), outAs(y, {rows, c}), out({rows})}};
  k.tolerance = y == kBF16 ? 1e-2 : y == kF16 ? 2e-3 : 1e-5;
  k.maxUlps = -1;
  return k;
}

// rms_norm_grad_add with `parts` parts of dy in `dy` (the q, k and v projections' input
// gradients), and the sum's copy in `copy` where that is 16-bit.
Case rmsNormGradAdd(int parts, DType dy, DType copy, int64_t rows, int64_t c) {
  Case k{"rms_norm_grad_add [" + std::to_string(rows) + "," + std::to_string(c) + "] " +
             std::to_string(parts) + " parts" + typeLabel(dy) + " dy" +
             (copy != kF32 ? typeLabel(copy) + " copy" : ""),
         "rms_norm_grad_add",
         {},
         {},
         {out({rows, c}), out({c})}};
  for (int p = 0; p < parts; ++p)
    k.inputs.push_back(dy == kF32 ? f32({rows, c}) : lowp(dy, {rows, c}));
  for (Input o :
       {f32({rows, c}, -3, 3), f32({c}, 0.5f, 1.5f), f32({rows}, 0.5f, 2), f32({rows, c})})
    k.inputs.push_back(o);
  if (copy != kF32) k.outputs.push_back(outAs(copy, {rows, c}));
  k.tolerance = copy == kBF16 ? 1e-2 : copy == kF16 ? 2e-3 : 1e-4;
  k.maxUlps = -1;
  return k;
}

Case swiglu(bool grad, const Shape& shape) {
  Case k{std::string(grad ? "swiglu_grad " : "swiglu ") + str(shape),
         grad ? "swiglu_grad" : "swiglu",
         {},
         {f32(shape, -6, 6), f32(shape, -2, 2)},
         {out(shape)}};
  if (grad) {
    k.inputs.insert(k.inputs.begin(), f32(shape));
    k.outputs.push_back(out(shape));
  }
  k.tolerance = 1e-5;
  k.maxUlps = -1;
  return k;
}

Case rotary(bool grad, const Shape& x, const Shape& table, bool seqMajor = false) {
  Case k{std::string(grad ? "rotary_grad " : "rotary ") + str(x) + " table " + str(table) +
             (seqMajor ? " seq_major" : ""),
         grad ? "rotary_grad" : "rotary",
         {},
         {f32(x, -2, 2), f32(table, -1, 1), f32(table, -1, 1)},
         {out(x)}};
  if (seqMajor) k.attrs.push_back(intAttr("seq_major", 1));
  k.tolerance = 1e-5;
  k.maxUlps = -1;
  return k;
}

// `k` with the inputs and outputs at `in` and `out` stored in `t`, as mixed precision's plans
// store the activations around the contractions (the math stays f32, the outputs one rounding
// of values that agree to the f32 case's tolerance).
Case stored(Case k, DType t, std::initializer_list<size_t> in, std::initializer_list<size_t> out) {
  for (size_t i : in) k.inputs[i].dtype = t;
  for (size_t i : out) k.outputs[i].dtype = t;
  k.label += typeLabel(t) + " storage";
  k.tolerance = t == kBF16 ? 1e-2 : 2e-3;
  k.maxUlps = -1;
  return k;
}

}  // namespace

std::vector<Case> normCases() {
  std::vector<Case> cases;
  for (DType y : {kF32, kBF16, kF16}) {
    cases.push_back(addNorm(y, 37, 96));
    cases.push_back(addNorm(y, 64, 768));
  }
  cases.push_back(normGradAdd(kF32, kF32, 37, 96));
  cases.push_back(normGradAdd(kBF16, kBF16, 37, 96));
  cases.push_back(normGradAdd(kF16, kF16, 64, 768));
  cases.push_back(normGradAdd(kBF16, kF32, 64, 768));
  for (auto [rows, c] : {std::pair<int64_t, int64_t>{37, 96}, {64, 4096}, {1000, 128}}) {
    cases.push_back(rmsNorm(rows, c));
    cases.push_back(rmsNormGrad(rows, c));
  }
  for (auto [rows, c] : {std::pair<int64_t, int64_t>{37, 96}, {64, 2048}}) {
    cases.push_back(addRmsNorm(kF32, kF32, rows, c));
    cases.push_back(rmsNormGradAdd(1, kF32, kF32, rows, c));
    cases.push_back(rmsNormGradAdd(4, kF32, kF32, rows, c));
  }
  for (DType t : {kBF16, kF16}) {
    cases.push_back(addRmsNorm(t, t, 37, 96));
    cases.push_back(addRmsNorm(t, kF32, 1000, 128));
    cases.push_back(rmsNormGradAdd(3, t, t, 37, 96));
    cases.push_back(rmsNormGradAdd(2, t, kF32, 64, 2048));
    cases.push_back(rmsNormGradAdd(1, t, t, 1000, 128));
  }
  for (bool grad : {false, true}) {
    cases.push_back(rotary(grad, {2, 3, 17, 8}, {17, 8}));
    cases.push_back(rotary(grad, {4, 32, 128, 128}, {1, 1, 128, 128}));
    // [B, T, H, D] rows, as attention on the projections reads them.
    cases.push_back(rotary(grad, {2, 17, 3, 8}, {17, 8}, true));
    cases.push_back(rotary(grad, {2, 128, 8, 64}, {1, 128, 64}, true));
  }
  for (const Shape& shape : {Shape{1001}, Shape{8, 128, 344}}) {
    cases.push_back(swiglu(false, shape));
    cases.push_back(swiglu(true, shape));
  }
  // 16-bit storage as a Llama step's plan has it: the norm's y and its gradient's dy and dx beside
  // the f32 residual stream, SwiGLU and rotary wholly in 16 bits but for the tables.
  for (DType t : {kBF16, kF16}) {
    cases.push_back(stored(rmsNorm(37, 96), t, {}, {0}));
    cases.push_back(stored(rmsNorm(64, 4096), t, {0}, {0}));
    cases.push_back(stored(rmsNormGrad(37, 96), t, {0}, {0}));
    cases.push_back(stored(rmsNormGrad(1000, 128), t, {0, 1}, {}));
    cases.push_back(stored(swiglu(false, {8, 128, 344}), t, {0, 1}, {0}));
    cases.push_back(stored(swiglu(true, {1001}), t, {0, 1, 2}, {0, 1}));
    cases.push_back(stored(rotary(false, {2, 3, 17, 8}, {17, 8}), t, {0}, {0}));
    cases.push_back(stored(rotary(true, {4, 8, 128, 64}, {1, 1, 128, 64}), t, {0}, {0}));
    cases.push_back(stored(rotary(false, {2, 64, 32, 64}, {64, 64}, true), t, {0}, {0}));
    cases.push_back(stored(rotary(true, {2, 64, 8, 64}, {64, 64}, true), t, {0}, {0}));
  }
  return cases;
}

// Steps both backends must refuse at bind time, with the same message.
std::vector<Case> normMalformedCases() {
  Case residual = addNorm(kF32, 4, 8);
  residual.label = "bad add_layer_norm residual";
  residual.inputs[1] = f32({4, 7});
  Case outputs = normGradAdd(kF32, kF32, 4, 8);
  outputs.label = "bad layer_norm_grad_add outputs";
  outputs.outputs.pop_back();
  Case rmsWeight = rmsNorm(4, 8);
  rmsWeight.label = "bad rms_norm weight";
  rmsWeight.inputs[1] = f32({7});
  Case swigluShapes = swiglu(true, {4, 8});
  swigluShapes.label = "bad swiglu_grad shapes";
  swigluShapes.inputs[2] = f32({4, 7});
  Case rotaryOdd = rotary(false, {2, 5, 7}, {5, 7});
  rotaryOdd.label = "bad rotary odd head size";
  Case rotaryRows = rotary(false, {2, 5, 3, 8}, {3, 8}, true);
  rotaryRows.label = "bad rotary seq_major table";
  Case rmsResidual = addRmsNorm(kF32, kF32, 4, 8);
  rmsResidual.label = "bad add_rms_norm residual";
  rmsResidual.inputs[1] = f32({4, 7});
  Case manyParts = rmsNormGradAdd(5, kF32, kF32, 4, 8);
  manyParts.label = "bad rms_norm_grad_add parts";
  Case partShape = rmsNormGradAdd(2, kF32, kF32, 4, 8);
  partShape.label = "bad rms_norm_grad_add part shape";
  partShape.inputs[1] = f32({4, 7});
  return {residual,   outputs,     rmsWeight, swigluShapes, rotaryOdd,
          rotaryRows, rmsResidual, manyParts, partShape};
}

}  // namespace dtc::gputest
