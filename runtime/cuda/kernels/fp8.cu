// FP8 training's kernels on CUDA (exec/fp8_contracts.h; the CPU emulates them exactly in
// cpu/kernels/fp8.cc): a tensor's amax and its quantization, whose scale and rounding are the CPU's
// bit for bit (support/float8.h), and the scaled GEMM on Hopper's FP8 tensor cores through
// cuBLASLt. Their binders follow.
#include <algorithm>
#include <string>
#include <vector>

#include "common.cuh"
#include "cuda_bind.h"
#include "exec/fp8_contracts.h"
#include "float_access.cuh"
#include "float_data.h"
#include "gemm_lt.h"
#include "support/float8.h"

namespace dtc::cuda::kernels {
namespace {

// Element i as float32; with `loadBf16`, a float32 one rounded to bfloat16 first, as the CPU does.
__device__ inline float loaded(FloatIn x, int64_t i, bool loadBf16) {
  const float v = at(x, i);
  return loadBf16 ? bf16ToF32(f32ToBf16(v)) : v;
}

struct BitsMax {
  __device__ unsigned operator()(unsigned a, unsigned b) const { return b > a ? b : a; }
};

// max |x| into *amaxBits (zeroed first) as float32 bits: non-negative floats order as their
// bits do, so an integer maximum is the float one, and a NaN (above infinity) wins, as on the CPU.
// The word read as a float is the amax.
__global__ void amaxKernel(FloatIn x, int64_t n, bool loadBf16, unsigned* amaxBits) {
  unsigned bits = 0;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const unsigned v = __float_as_uint(fabsf(loaded(x, i, loadBf16)));
    bits = v > bits ? v : bits;
  }
  bits = blockReduce(bits, BitsMax{}, 0u);
  if (threadIdx.x == 0) atomicMax(amaxBits, bits);
}

// The codes of n elements, without a transposed copy. With `seenBits` (zeroed first), x's own
// amax is recorded from the same loads (delayed scaling).
template <typename Format>
__global__ void quantizeKernel(FloatIn x, bool loadBf16, int64_t n, const float* amax, float fmax,
                               uint8_t* q, unsigned* seenBits) {
  const float scale = float8Scale(*amax, fmax);
  unsigned bits = 0;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const float v = loaded(x, i, loadBf16);
    const unsigned b = __float_as_uint(fabsf(v));
    bits = b > bits ? b : bits;
    const uint8_t code = f32ToFloat8<Format>(__fmul_rn(v, scale));
    q[i] = code;
  }
  if (!seenBits) return;
  bits = blockReduce(bits, BitsMax{}, 0u);
  if (threadIdx.x == 0) atomicMax(seenBits, bits);
}

// With a transposed copy: 32 x 32 tiles through shared memory, so both q and q_t are written a
// row of a tile at a time (a strided store of q_t would scatter one byte a thread). A block of
// kThreads (8 warps) takes tiles in turn; warp w handles rows w, w + 8, ... of a tile.
constexpr int kTile = 32;

template <typename Format>
__global__ void quantizeTiledKernel(FloatIn x, bool loadBf16, int64_t rows, int64_t cols,
                                    const float* amax, float fmax, uint8_t* q, uint8_t* qt,
                                    unsigned* seenBits) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const float scale = float8Scale(*amax, fmax);
  const int lane = threadIdx.x % kTile, warp = threadIdx.x / kTile;
  const int warps = blockDim.x / kTile;
  const int64_t tilesAcross = (cols + kTile - 1) / kTile;
  const int64_t tiles = tilesAcross * ((rows + kTile - 1) / kTile);
  unsigned bits = 0;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row0 = t / tilesAcross * kTile, col0 = t % tilesAcross * kTile;
    for (int i = warp; i < kTile; i += warps) {
      const int64_t r = row0 + i, c = col0 + lane;
      if (r < rows && c < cols) {
        const float v = loaded(x, r * cols + c, loadBf16);
        const unsigned b = __float_as_uint(fabsf(v));
        bits = b > bits ? b : bits;
        const uint8_t code = f32ToFloat8<Format>(__fmul_rn(v, scale));
        q[r * cols + c] = code;
        tile[i][lane] = code;
      }
    }
    __syncthreads();
    for (int i = warp; i < kTile; i += warps) {
      const int64_t c = col0 + i, r = row0 + lane;  // q_t's row c, column r
      if (c < cols && r < rows) qt[c * rows + r] = tile[lane][i];
    }
    __syncthreads();
  }
  if (!seenBits) return;
  bits = blockReduce(bits, BitsMax{}, 0u);
  if (threadIdx.x == 0) atomicMax(seenBits, bits);
}

__global__ void historyAmaxKernel(const float* history, int64_t n, float fmax, float* amax) {
  *amax = float8HistoryAmax(history, n, fmax);
}

// [seen, history[0], ..., history[n-2]], in place when out is the history.
__global__ void historyPushKernel(const float* history, int64_t n, const float* seen, float* out) {
  const float m = float8AmaxMax(0.0f, *seen);
  for (int64_t i = n - 1; i > 0; --i) out[i] = history[i - 1];
  out[0] = m;
}

// out[0] = max(out[0], seen): another micro-batch's amax.
__global__ void historyMaxKernel(const float* seen, float* out) {
  out[0] = float8AmaxMax(out[0], *seen);
}

__global__ void scaleInvKernel(float fmax, const float* amax, float* scaleInv) {
  *scaleInv = __fdiv_rn(1.0f, float8Scale(*amax, fmax));
}

}  // namespace

cudaError_t fp8Amax(FloatIn x, int64_t n, bool loadBf16, float* amax, cudaStream_t stream) {
  unsigned* word = reinterpret_cast<unsigned*>(amax);
  if (cudaError_t e = cudaMemsetAsync(word, 0, sizeof(unsigned), stream)) return e;
  if (n > 0) amaxKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, n, loadBf16, word);
  return cudaGetLastError();
}

cudaError_t fp8Quantize(FloatIn x, bool loadBf16, const float* amax, int64_t rows, int64_t cols,
                        bool e4m3, uint8_t* q, uint8_t* qt, float* scaleInv, float* seen,
                        cudaStream_t stream) {
  const float fmax = e4m3 ? kE4M3Max : kE5M2Max;
  const int64_t n = rows * cols;
  unsigned* seenBits = reinterpret_cast<unsigned*>(seen);
  if (seen)
    if (cudaError_t e = cudaMemsetAsync(seenBits, 0, sizeof(unsigned), stream)) return e;
  const int64_t tiles = ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  const unsigned tileBlocks = static_cast<unsigned>(std::min<int64_t>(tiles, 65535));
  if (n > 0 && qt && e4m3)
    quantizeTiledKernel<E4M3>
        <<<tileBlocks, kThreads, 0, stream>>>(x, loadBf16, rows, cols, amax, fmax, q, qt, seenBits);
  if (n > 0 && qt && !e4m3)
    quantizeTiledKernel<E5M2>
        <<<tileBlocks, kThreads, 0, stream>>>(x, loadBf16, rows, cols, amax, fmax, q, qt, seenBits);
  if (n > 0 && !qt && e4m3)
    quantizeKernel<E4M3>
        <<<blocksFor(n), kThreads, 0, stream>>>(x, loadBf16, n, amax, fmax, q, seenBits);
  if (n > 0 && !qt && !e4m3)
    quantizeKernel<E5M2>
        <<<blocksFor(n), kThreads, 0, stream>>>(x, loadBf16, n, amax, fmax, q, seenBits);
  scaleInvKernel<<<1, 1, 0, stream>>>(fmax, amax, scaleInv);
  return cudaGetLastError();
}

cudaError_t fp8HistoryAmax(const float* history, int64_t n, float fmax, float* amax,
                           cudaStream_t stream) {
  historyAmaxKernel<<<1, 1, 0, stream>>>(history, n, fmax, amax);
  return cudaGetLastError();
}

cudaError_t fp8HistoryPush(const float* history, int64_t n, const std::vector<const float*>& seen,
                           float* out, cudaStream_t stream) {
  historyPushKernel<<<1, 1, 0, stream>>>(history, n, seen[0], out);
  for (size_t i = 1; i < seen.size(); ++i) historyMaxKernel<<<1, 1, 0, stream>>>(seen[i], out);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels

namespace dtc::cuda {
namespace {

cudaDataType_t fp8Type(DType t) { return t == DType::kF8E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

StatusOr<BoundStep> bindFp8Amax(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkFp8Amax(ctx));
  const kernels::FloatIn x = in(ctx.inputs[0]);
  const int64_t n = ctx.inputs[0].numElements();
  const bool loadBf16 = fp8LoadsBf16(ctx);
  float* amax = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::fp8Amax(x, n, loadBf16, amax, stream), where); });
}

// fp8_quantize, or with `recorded` fp8_quantize_recorded (its third output x's own amax).
StatusOr<BoundStep> bindQuantize(const StepContext& ctx, Device& dev, bool recorded) {
  DTC_ASSIGN_OR_RETURN(const Fp8QuantizeDims d, checkFp8Quantize(ctx, recorded));
  const kernels::FloatIn x = in(ctx.inputs[0]);
  const float* amax = ctx.inputs[1].f32();
  uint8_t* q = ctx.outputs[0].data;
  float* scaleInv = ctx.outputs[1].f32();
  float* seen = recorded ? ctx.outputs[2].f32() : nullptr;
  uint8_t* qt = d.transposed ? ctx.outputs[recorded ? 3 : 2].data : nullptr;
  const bool e4m3 = d.format == DType::kF8E4M3;
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::fp8Quantize(x, d.loadBf16, amax, d.rows, d.cols, e4m3, q, qt, scaleInv,
                                         seen, stream),
                    where);
  });
}

StatusOr<BoundStep> bindFp8Quantize(const StepContext& ctx, Device& dev) {
  return bindQuantize(ctx, dev, false);
}

StatusOr<BoundStep> bindFp8QuantizeRecorded(const StepContext& ctx, Device& dev) {
  return bindQuantize(ctx, dev, true);
}

StatusOr<BoundStep> bindFp8HistoryAmax(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkFp8HistoryAmax(ctx));
  const float* history = ctx.inputs[0].f32();
  const int64_t n = ctx.inputs[0].numElements();
  const float fmax = static_cast<float>(ctx.floatAttr("fmax"));
  float* amax = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::fp8HistoryAmax(history, n, fmax, amax, stream), where); });
}

StatusOr<BoundStep> bindFp8HistoryPush(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkFp8HistoryPush(ctx));
  const float* history = ctx.inputs[0].f32();
  const int64_t n = ctx.inputs[0].numElements();
  std::vector<const float*> seen;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) seen.push_back(ctx.inputs[i].f32());
  float* out = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::fp8HistoryPush(history, n, seen, out, stream), where); });
}

// Whether the GPU has FP8 tensor cores: compute capability 8.9 (Ada) or newer.
StatusOr<bool> hasFp8TensorCores(const Device& dev, int& major, int& minor) {
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev.ordinal()),
                 "querying the compute capability"));
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev.ordinal()),
                 "querying the compute capability"));
  return major > 8 || (major == 8 && minor >= 9);
}

// Row-major out [M, N] = a [M, K] · b [N, K]ᵀ is cuBLAS's column-major outᵀ [N×M] = bᵀ-stored
// [K×N] transposed times a-stored [K×M]: A is b (transposed), B is a, the "TN" form cuBLASLt
// takes FP8 in, and A's scale is b's.
StatusOr<BoundStep> bindFp8Gemm(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const Fp8GemmDims d, checkFp8Gemm(ctx));
  int major = 0, minor = 0;
  DTC_ASSIGN_OR_RETURN(const bool fp8, hasFp8TensorCores(dev, major, minor));
  if (!fp8)
    return invalid(ctx,
                   "FP8 GEMMs need FP8 tensor cores (compute capability 8.9 or newer); "
                   "this GPU is sm_" +
                       std::to_string(major) + std::to_string(minor));
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &out = ctx.outputs[0];
  LtGemmSpec spec;
  spec.m = d.n;
  spec.n = d.m;
  spec.k = d.k;
  spec.transA = true;
  spec.transB = false;
  spec.abType = fp8Type(b.dtype);
  spec.fp8BType = fp8Type(a.dtype);
  spec.aScale = ctx.inputs[3].f32();
  spec.bScale = ctx.inputs[2].f32();
  spec.dType = out.dtype == DType::kF32    ? CUDA_R_32F
               : out.dtype == DType::kBF16 ? CUDA_R_16BF
                                           : CUDA_R_16F;
  const std::string where = ctx.where();
  DTC_ASSIGN_OR_RETURN(std::shared_ptr<const LtGemm> gemm,
                       planLtGemm(dev, spec, b.data, a.data, out.data, where));
  if (!gemm)
    return invalid(ctx, "cuBLASLt has no FP8 GEMM for a " + str(a.shape) + " and b " +
                            str(b.shape) +
                            " on this GPU (FP8 GEMMs want K, M and N multiples "
                            "of 16)");
  cudaStream_t stream = dev.stream();
  return BoundStep([=] { return gemm->run(stream, where); });
}

}  // namespace

DTC_CUDA_BINDER(fp8_amax, bindFp8Amax)
DTC_CUDA_BINDER(fp8_quantize, bindFp8Quantize)
DTC_CUDA_BINDER(fp8_quantize_recorded, bindFp8QuantizeRecorded)
DTC_CUDA_BINDER(fp8_history_amax, bindFp8HistoryAmax)
DTC_CUDA_BINDER(fp8_history_push, bindFp8HistoryPush)
DTC_CUDA_BINDER(fp8_gemm, bindFp8Gemm)

}  // namespace dtc::cuda
