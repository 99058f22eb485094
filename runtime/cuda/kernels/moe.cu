// Mixture-of-experts routing, dispatch and combination, and logsumexp (cpu/kernels/moe.cc). The
// top-k choice is ops/moe_math.h's, the CPU's own code, so both backends route alike. Routing
// assigns slots with one thread per (group, expert) scanning the group's choices in priority
// order: simple, and the same slots as the CPU's sequential pass. A plan entry outside the
// buffers is skipped and raises the step's error flag (the embedding kernels' convention).
#include <algorithm>

#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }

__global__ void routeChoose(const float* scores, int64_t* expert, float* weight, int64_t tokens,
                            int64_t experts, int64_t k, bool normalize) {
  for (int64_t t = globalIndex(); t < tokens; t += globalStride())
    moe::topK(scores + t * experts, experts, k, normalize, expert + t * k, weight + t * k);
}

__global__ void routeLoad(const int64_t* expert, float* load, int64_t tokens, int64_t experts,
                          int64_t k) {
  for (int64_t i = globalIndex(); i < tokens * experts; i += globalStride()) {
    const int64_t t = i / experts, e = i % experts;
    bool chosen = false;
    for (int64_t j = 0; j < k; ++j) chosen |= expert[t * k + j] == e;
    load[i] = chosen ? 1.0f : 0.0f;
  }
}

__global__ void routeSlots(const int64_t* expert, int64_t* slot, moe::MoeShape m) {
  for (int64_t i = globalIndex(); i < m.groups * m.experts; i += globalStride()) {
    const int64_t g = i / m.experts, e = i % m.experts;
    int64_t count = 0;
    for (int64_t j = 0; j < m.topK; ++j)
      for (int64_t s = 0; s < m.tokens; ++s) {
        const int64_t at = (g * m.tokens + s) * m.topK + j;
        if (expert[at] != e) continue;
        slot[at] = count < m.capacity ? count : -1;
        ++count;
      }
  }
}

// dscores zeroed before: one thread per token adds its choices' gradients.
__global__ void routeGrad(const float* dweight, const float* scores, const int64_t* expert,
                          float* dscores, int64_t tokens, int64_t experts, int64_t k,
                          bool normalize, int* bad) {
  for (int64_t t = globalIndex(); t < tokens; t += globalStride()) {
    const int64_t* chosen = expert + t * k;
    bool inside = true;
    for (int64_t j = 0; j < k; ++j) inside &= chosen[j] >= 0 && chosen[j] < experts;
    if (!inside) {
      *bad = 1;
      continue;
    }
    moe::routeGradRow(scores + t * experts, dweight + t * k, chosen, k, normalize,
                      dscores + t * experts);
  }
}

// The buffer row of choice `at`, or -1 where it was dropped or lies outside (then flagged, once
// per choice: by the thread of its first column).
__device__ int64_t choiceRow(const int64_t* expert, const int64_t* slot, const moe::MoeShape& m,
                             int64_t at, int64_t group, int64_t column, int* bad) {
  const int64_t e = expert[at], s = slot[at];
  if (!moe::entryInside(m, e, s)) {
    if (column == 0) *bad = 1;
    return -1;
  }
  return s < 0 ? -1 : moe::bufferRow(m, e, group, s);
}

// buffer zeroed before.
__global__ void dispatchKernel(const float* x, const int64_t* expert, const int64_t* slot,
                               float* buffer, moe::MoeShape m, int* bad) {
  const int64_t d = m.width, n = m.groups * m.tokens * d;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const int64_t t = i / d, c = i % d;
    for (int64_t j = 0; j < m.topK; ++j) {
      const int64_t row = choiceRow(expert, slot, m, t * m.topK + j, t / m.tokens, c, bad);
      if (row >= 0) buffer[row + c] = x[i];
    }
  }
}

// y = Σ_j weight_j · buffer row (weight null: 1), in j order as the CPU.
__global__ void gatherKernel(const float* buffer, const int64_t* expert, const int64_t* slot,
                             const float* weight, float* y, moe::MoeShape m, int* bad) {
  const int64_t d = m.width, n = m.groups * m.tokens * d;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const int64_t t = i / d, c = i % d;
    float acc = 0.0f;
    for (int64_t j = 0; j < m.topK; ++j) {
      const int64_t at = t * m.topK + j;
      const int64_t row = choiceRow(expert, slot, m, at, t / m.tokens, c, bad);
      if (row >= 0) acc += weight ? weight[at] * buffer[row + c] : buffer[row + c];
    }
    y[i] = acc;
  }
}

// dbuffer zeroed before: each kept choice's row = weight · dy.
__global__ void combineGradBuffer(const float* dy, const int64_t* expert, const int64_t* slot,
                                  const float* weight, float* dbuffer, moe::MoeShape m, int* bad) {
  const int64_t d = m.width, n = m.groups * m.tokens * d;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const int64_t t = i / d, c = i % d;
    for (int64_t j = 0; j < m.topK; ++j) {
      const int64_t at = t * m.topK + j;
      const int64_t row = choiceRow(expert, slot, m, at, t / m.tokens, c, bad);
      if (row >= 0) dbuffer[row + c] = weight[at] * dy[i];
    }
  }
}

// One block per choice: dweight = buffer row · dy, in double (0 where dropped or outside).
__global__ void combineGradWeight(const float* dy, const float* buffer, const int64_t* expert,
                                  const int64_t* slot, float* dweight, moe::MoeShape m) {
  const int64_t choices = m.groups * m.tokens * m.topK, d = m.width;
  for (int64_t at = blockIdx.x; at < choices; at += gridDim.x) {
    const int64_t t = at / m.topK, e = expert[at], s = slot[at];
    const bool kept = moe::entryInside(m, e, s) && s >= 0;
    double dot = 0;
    if (kept) {
      const float *in = buffer + moe::bufferRow(m, e, t / m.tokens, s), *g = dy + t * d;
      for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
        dot += static_cast<double>(in[c]) * g[c];
    }
    dot = blockSum(dot);
    if (threadIdx.x == 0) dweight[at] = kept ? static_cast<float>(dot) : 0.0f;
  }
}

__global__ void logSumExpKernel(const float* x, float* y, int64_t rows, int64_t n) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * n;
    float most = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) most = in[j] > most ? in[j] : most;
    most = blockMax(most);
    const float shift = isfinite(most) ? most : 0.0f;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(in[j] - shift);
    sum = blockSum(sum);
    if (threadIdx.x == 0) y[r] = shift + static_cast<float>(log(sum));
  }
}

__global__ void logSumExpGradKernel(const float* dy, const float* x, const float* y, float* dx,
                                    int64_t rows, int64_t n) {
  for (int64_t i = globalIndex(); i < rows * n; i += globalStride()) {
    const int64_t r = i / n;
    dx[i] = dy[r] * expf(x[i] - y[r]);
  }
}

int64_t bufferFloats(const moe::MoeShape& m) { return m.experts * m.groups * m.capacity * m.width; }

}  // namespace

cudaError_t moeRoute(const float* scores, int64_t* expert, int64_t* slot, float* weight,
                     float* load, const MoeShape& m, bool normalize, cudaStream_t stream) {
  const int64_t tokens = m.groups * m.tokens;
  if (tokens == 0) return cudaGetLastError();
  routeChoose<<<blocksFor(tokens), kThreads, 0, stream>>>(scores, expert, weight, tokens, m.experts,
                                                          m.topK, normalize);
  routeLoad<<<blocksFor(tokens * m.experts), kThreads, 0, stream>>>(expert, load, tokens, m.experts,
                                                                    m.topK);
  routeSlots<<<blocksFor(m.groups * m.experts), kThreads, 0, stream>>>(expert, slot, m);
  return cudaGetLastError();
}

cudaError_t moeRouteGrad(const float* dweight, const float* scores, const int64_t* expert,
                         float* dscores, const MoeShape& m, bool normalize, int* bad,
                         cudaStream_t stream) {
  const int64_t tokens = m.groups * m.tokens;
  cudaError_t e = cudaMemsetAsync(dscores, 0, tokens * m.experts * sizeof(float), stream);
  if (e != cudaSuccess || tokens == 0) return e;
  routeGrad<<<blocksFor(tokens), kThreads, 0, stream>>>(dweight, scores, expert, dscores, tokens,
                                                        m.experts, m.topK, normalize, bad);
  return cudaGetLastError();
}

cudaError_t moeDispatch(const float* x, const int64_t* expert, const int64_t* slot, float* buffer,
                        const MoeShape& m, int* bad, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(buffer, 0, bufferFloats(m) * sizeof(float), stream);
  const int64_t n = m.groups * m.tokens * m.width;
  if (e != cudaSuccess || n == 0) return e;
  dispatchKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, expert, slot, buffer, m, bad);
  return cudaGetLastError();
}

cudaError_t moeDispatchGrad(const float* dbuffer, const int64_t* expert, const int64_t* slot,
                            float* dx, const MoeShape& m, int* bad, cudaStream_t stream) {
  const int64_t n = m.groups * m.tokens * m.width;
  if (n > 0)
    gatherKernel<<<blocksFor(n), kThreads, 0, stream>>>(dbuffer, expert, slot, nullptr, dx, m, bad);
  return cudaGetLastError();
}

cudaError_t moeCombine(const float* buffer, const int64_t* expert, const int64_t* slot,
                       const float* weight, float* y, const MoeShape& m, int* bad,
                       cudaStream_t stream) {
  const int64_t n = m.groups * m.tokens * m.width;
  if (n > 0)
    gatherKernel<<<blocksFor(n), kThreads, 0, stream>>>(buffer, expert, slot, weight, y, m, bad);
  return cudaGetLastError();
}

cudaError_t moeCombineGrad(const float* dy, const float* buffer, const int64_t* expert,
                           const int64_t* slot, const float* weight, float* dbuffer, float* dweight,
                           const MoeShape& m, int* bad, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(dbuffer, 0, bufferFloats(m) * sizeof(float), stream);
  if (e != cudaSuccess) return e;
  const int64_t n = m.groups * m.tokens * m.width, choices = m.groups * m.tokens * m.topK;
  if (n > 0)
    combineGradBuffer<<<blocksFor(n), kThreads, 0, stream>>>(dy, expert, slot, weight, dbuffer, m,
                                                             bad);
  // Zero-width tokens still have choices whose dweight is 0 (the block's empty dot).
  if (choices > 0)
    combineGradWeight<<<rowBlocks(choices), rowThreads(m.width), 0, stream>>>(dy, buffer, expert,
                                                                              slot, dweight, m);
  return cudaGetLastError();
}

cudaError_t logSumExp(const float* x, float* y, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows > 0) logSumExpKernel<<<rowBlocks(rows), rowThreads(n), 0, stream>>>(x, y, rows, n);
  return cudaGetLastError();
}

cudaError_t logSumExpGrad(const float* dy, const float* x, const float* y, float* dx, int64_t rows,
                          int64_t n, cudaStream_t stream) {
  if (rows * n > 0)
    logSumExpGradKernel<<<blocksFor(rows * n), kThreads, 0, stream>>>(dy, x, y, dx, rows, n);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
