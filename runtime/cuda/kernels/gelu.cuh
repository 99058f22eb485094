// PyTorch's tanh GELU and its derivative on the device, operation for operation as
// cpu/kernels/activations.cc computes them (the plugin builds with --fmad=false), for the
// activation kernels (elementwise.cu) and the linear epilogues' passes (epilogue.cu) alike.
#pragma once

namespace dtc::cuda::kernels {

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCoeff = 0.044715f;

__device__ inline float geluTanh(float v) {
  const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
  return 0.5f * v * (1.0f + tanhf(inner));
}

// d gelu(v) / dv: 0.5(1 + t) + 0.5·v·(1 − t²)·√(2/π)(1 + 3·0.044715v²), t = tanh(inner).
__device__ inline float geluTanhDerivative(float v) {
  const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
  const float t = tanhf(inner);
  const float dInner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dInner;
}

}  // namespace dtc::cuda::kernels
