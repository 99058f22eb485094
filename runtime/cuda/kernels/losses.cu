// Softmax cross-entropy, MSE, and cross-entropy over a split vocabulary, with their gradients
// (cpu/kernels/losses.cc, cpu/kernels/vocab_parallel.cc). Row statistics take one block per row;
// sums over rows or elements accumulate in double with a fixed reduction tree, so losses are
// deterministic.
#include <algorithm>
#include <type_traits>

#include "common.cuh"
#include "half.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

constexpr unsigned kMaxRowBlocks = 65535;

// 16-bit logits by their bits, one type per format so the loads and stores know which.
struct Bf16Bits {
  uint16_t bits;
};
struct F16Bits {
  uint16_t bits;
};

unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, kMaxRowBlocks));
}

// Per row r: max, then Σ exp(x − max) in double (every thread gets both).
__device__ void rowStats(const float* row, int64_t classes, float& m, double& s) {
  m = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) m = MaxOp{}(m, row[c]);
  m = blockMax(m);
  s = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    s += static_cast<double>(expf(row[c] - m));
  s = blockSum(s);
}

// The class a row's loss reads: its label, or -1 when the row adds nothing (ignored, or its
// label is no class, which sets *badLabel).
__device__ int64_t scoredClass(int64_t label, int64_t classes, IgnoredLabel ignored,
                               int* badLabel) {
  if (ignored.any && label == ignored.label) return -1;
  if (label < 0 || label >= classes) {
    *badLabel = 1;
    return -1;
  }
  return label;
}

__global__ void crossEntropyRows(const float* logits, const int64_t* labels, int64_t rows,
                                 int64_t classes, IgnoredLabel ignored, double* rowLoss,
                                 int* badLabel) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * classes;
    float m;
    double s;
    rowStats(row, classes, m, s);
    if (threadIdx.x == 0) {
      const int64_t label = scoredClass(labels[r], classes, ignored, badLabel);
      rowLoss[r] =
          label < 0 ? 0 : static_cast<double>(m) + log(s) - static_cast<double>(row[label]);
    }
  }
}

// Row r's −w[label]·x[r, label] (0 on ignored rows), into rowLoss[r] (a double, for the mean) or
// rowOut[r]; a label outside the classes sets *badLabel.
__global__ void nllRows(const float* x, const int64_t* labels, const float* weight, int64_t rows,
                        int64_t classes, IgnoredLabel ignored, double* rowLoss, float* rowOut,
                        int* badLabel) {
  for (int64_t r = globalIndex(); r < rows; r += globalStride()) {
    const int64_t label = scoredClass(labels[r], classes, ignored, badLabel);
    const double term = label < 0 ? 0
                                  : -static_cast<double>(x[r * classes + label]) *
                                        (weight ? static_cast<double>(weight[label]) : 1.0);
    if (rowOut)
      rowOut[r] = static_cast<float>(term);
    else
      rowLoss[r] = term;
  }
}

// `perRow`: dloss holds one value per row; else one, divided by `divisor`.
__global__ void nllGradKernel(const float* dloss, const int64_t* labels, const float* weight,
                              int64_t rows, int64_t classes, float divisor, bool perRow,
                              IgnoredLabel ignored, float* dx) {
  for (int64_t i = globalIndex(); i < rows * classes; i += globalStride()) {
    const int64_t r = i / classes, c = i % classes, label = labels[r];
    float value = 0.0f;
    if (c == label && !(ignored.any && label == ignored.label)) {
      value = perRow ? -dloss[r] : -*dloss / divisor;
      if (weight) value *= weight[label];
    }
    dx[i] = value;
  }
}

// *out = the labels that are not ignored, each counted 1 or its class's weight, / divisor; one
// block (a fixed tree: deterministic).
__global__ void labelFractionKernel(const int64_t* labels, int64_t n, const float* weight,
                                    int64_t classes, IgnoredLabel ignored, double divisor,
                                    float* out) {
  double kept = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t label = labels[i];
    if (ignored.any && label == ignored.label) continue;
    if (!weight)
      kept += 1.0;
    else if (label >= 0 && label < classes)
      kept += static_cast<double>(weight[label]);
  }
  kept = blockSum(kept);
  if (threadIdx.x == 0) *out = static_cast<float>(kept / divisor);
}

// *out = Σ values[0, n) / divisor, one block (a fixed tree: deterministic). n == 0 with
// divisor 0 gives NaN, as a mean over nothing in torch.
__global__ void sumToScalar(const double* values, int64_t n, double divisor, float* out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += values[i];
  s = blockSum(s);
  if (threadIdx.x == 0) *out = static_cast<float>(s / divisor);
}

__global__ void crossEntropyGradRows(const float* dloss, const float* logits, const int64_t* labels,
                                     int64_t rows, int64_t classes, float divisor,
                                     IgnoredLabel ignored, float* dlogits) {
  const float scale = *dloss / divisor;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * classes;
    float* drow = dlogits + r * classes;
    if (ignored.any && labels[r] == ignored.label) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) drow[c] = 0.0f;
      continue;
    }
    float m;
    double s;
    rowStats(row, classes, m, s);  // the whole row is read before any of it is written
    const float invSum = static_cast<float>(1.0 / s);
    const int64_t label = labels[r];
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const float p = expf(row[c] - m) * invSum;
      drow[c] = scale * (c == label ? p - 1.0f : p);
    }
  }
}

// The loss's row terms and the gradient in one pass over the logits (f32, or 16-bit widened as
// read and the gradient rounded as written), each row read whole before any of it is written, so
// dlogits may be the logits. The arithmetic is crossEntropyRows' and crossEntropyGradRows'.
template <typename T>
__device__ inline float loadLogit(const T* x, int64_t i) {
  if constexpr (sizeof(T) == 4)
    return x[i];
  else if constexpr (std::is_same_v<T, Bf16Bits>)
    return bf16ToF32(x[i].bits);
  else
    return f16ToF32(x[i].bits);
}

template <typename T>
__device__ inline void storeLogit(T* x, int64_t i, float v) {
  if constexpr (sizeof(T) == 4)
    x[i] = v;
  else if constexpr (std::is_same_v<T, Bf16Bits>)
    x[i].bits = f32ToBf16(v);
  else
    x[i].bits = f32ToF16(v);
}

template <typename T>
__global__ void crossEntropyWithGradRows(const T* logits, const int64_t* labels, const float* dloss,
                                         int64_t rows, int64_t classes, float divisor,
                                         IgnoredLabel ignored, double* rowLoss, T* dlogits,
                                         int* badLabel) {
  __shared__ float labelLogit;
  const float scale = *dloss / divisor;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = logits + r * classes;
    T* drow = dlogits + r * classes;
    const int64_t label = scoredClass(labels[r], classes, ignored, badLabel);
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) m = MaxOp{}(m, loadLogit(row, c));
    m = blockMax(m);
    double s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      s += static_cast<double>(expf(loadLogit(row, c) - m));
    s = blockSum(s);  // ends with a barrier: every read of the row is done
    if (threadIdx.x == 0) {
      labelLogit = label < 0 ? 0.0f : loadLogit(row, label);
      rowLoss[r] = label < 0 ? 0 : static_cast<double>(m) + log(s) - labelLogit;
    }
    __syncthreads();  // the label's logit is read before the row is written over
    const bool skipped = ignored.any && labels[r] == ignored.label;
    const float invSum = static_cast<float>(1.0 / s);
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const float p = expf(loadLogit(row, c) - m) * invSum;
      storeLogit(drow, c, skipped ? 0.0f : scale * (c == labels[r] ? p - 1.0f : p));
    }
    __syncthreads();  // the next row's label logit is not written before this row is done
  }
}

__global__ void squaredErrorPartials(const float* pred, const float* target, int64_t n,
                                     double* partial) {
  double s = 0;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const double d = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
    s += d * d;
  }
  s = blockSum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void mseGradKernel(const float* dloss, const float* pred, const float* target, int64_t n,
                              float norm, float* dpred) {
  const float g = *dloss;
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    dpred[i] = norm * (pred[i] - target[i]) * g;
}

__global__ void rowMaxKernel(const float* logits, int64_t rows, int64_t classes, float* rowMax) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      m = MaxOp{}(m, logits[r * classes + c]);
    m = blockMax(m);
    if (threadIdx.x == 0) rowMax[r] = m;
  }
}

__device__ bool labelOk(int64_t label, int64_t total, int* badLabel) {
  if (label >= 0 && label < total) return true;
  *badLabel = 1;
  return false;
}

__global__ void partsKernel(const float* logits, const int64_t* labels, const float* rowMax,
                            int64_t rows, int64_t classes, int64_t offset, int64_t total,
                            IgnoredLabel ignored, float* sumExp, float* target, int* badLabel) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * classes;
    const float m = rowMax[r];
    double s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      s += static_cast<double>(expf(row[c] - m));
    s = blockSum(s);
    if (threadIdx.x == 0) {
      if (!(ignored.any && labels[r] == ignored.label)) labelOk(labels[r], total, badLabel);
      sumExp[r] = static_cast<float>(s);
      const int64_t local = labels[r] - offset;
      target[r] = local >= 0 && local < classes ? row[local] : 0.0f;
    }
  }
}

__global__ void combineKernel(const float* rowMax, const float* sumExp, const float* target,
                              const int64_t* labels, IgnoredLabel ignored, int64_t rows,
                              double count, float* loss) {
  double s = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    if (!labels || !(ignored.any && labels[r] == ignored.label))
      s += static_cast<double>(rowMax[r]) + log(static_cast<double>(sumExp[r])) -
           static_cast<double>(target[r]);
  s = blockSum(s);
  if (threadIdx.x == 0) *loss = static_cast<float>(s / count);
}

__global__ void partsGradKernel(const float* dloss, const float* logits, const int64_t* labels,
                                const float* rowMax, const float* sumExp, int64_t rows,
                                int64_t classes, int64_t offset, int64_t total, float count,
                                IgnoredLabel ignored, float* dlogits, int* badLabel) {
  const float scale = *dloss / count;
  for (int64_t i = globalIndex(); i < rows * classes; i += globalStride()) {
    const int64_t r = i / classes, c = i % classes;
    if (ignored.any && labels[r] == ignored.label) {
      dlogits[i] = 0.0f;
      continue;
    }
    if (c == 0) labelOk(labels[r], total, badLabel);
    const float invSum = static_cast<float>(1.0 / sumExp[r]);
    const float p = expf(logits[i] - rowMax[r]) * invSum;
    dlogits[i] = scale * (c == labels[r] - offset ? p - 1.0f : p);
  }
}

}  // namespace

cudaError_t softmaxCrossEntropy(const float* logits, const int64_t* labels, int64_t rows,
                                int64_t classes, int64_t divisor, IgnoredLabel ignored, float* loss,
                                double* rowLoss, int* badLabel, cudaStream_t stream) {
  if (rows > 0)
    crossEntropyRows<<<rowBlocks(rows), rowThreads(classes), 0, stream>>>(
        logits, labels, rows, classes, ignored, rowLoss, badLabel);
  sumToScalar<<<1, kThreads, 0, stream>>>(rowLoss, rows,
                                          static_cast<double>(divisor ? divisor : rows), loss);
  return cudaGetLastError();
}

cudaError_t softmaxCrossEntropyWithGrad(const void* logits, Float type, const int64_t* labels,
                                        const float* dloss, int64_t rows, int64_t classes,
                                        int64_t divisor, IgnoredLabel ignored, float* loss,
                                        double* rowLoss, void* dlogits, int* badLabel,
                                        cudaStream_t stream) {
  const float div = static_cast<float>(divisor ? divisor : rows);
  if (rows > 0) {
    const unsigned blocks = rowBlocks(rows), threads = rowThreads(classes);
    switch (type) {
      case Float::kF32:
        crossEntropyWithGradRows<<<blocks, threads, 0, stream>>>(
            static_cast<const float*>(logits), labels, dloss, rows, classes, div, ignored, rowLoss,
            static_cast<float*>(dlogits), badLabel);
        break;
      case Float::kBF16:
        crossEntropyWithGradRows<<<blocks, threads, 0, stream>>>(
            static_cast<const Bf16Bits*>(logits), labels, dloss, rows, classes, div, ignored,
            rowLoss, static_cast<Bf16Bits*>(dlogits), badLabel);
        break;
      case Float::kF16:
        crossEntropyWithGradRows<<<blocks, threads, 0, stream>>>(
            static_cast<const F16Bits*>(logits), labels, dloss, rows, classes, div, ignored,
            rowLoss, static_cast<F16Bits*>(dlogits), badLabel);
        break;
    }
  }
  sumToScalar<<<1, kThreads, 0, stream>>>(rowLoss, rows,
                                          static_cast<double>(divisor ? divisor : rows), loss);
  return cudaGetLastError();
}

cudaError_t softmaxCrossEntropyGrad(const float* dloss, const float* logits, const int64_t* labels,
                                    int64_t rows, int64_t classes, int64_t divisor,
                                    IgnoredLabel ignored, float* dlogits, cudaStream_t stream) {
  if (rows > 0)
    crossEntropyGradRows<<<rowBlocks(rows), rowThreads(classes), 0, stream>>>(
        dloss, logits, labels, rows, classes, static_cast<float>(divisor ? divisor : rows), ignored,
        dlogits);
  return cudaGetLastError();
}

cudaError_t nllLoss(const float* x, const int64_t* labels, const float* weight, NllShape s,
                    IgnoredLabel ignored, float* loss, double* rowLoss, int* badLabel,
                    cudaStream_t stream) {
  if (s.rows > 0)
    nllRows<<<blocksFor(s.rows), kThreads, 0, stream>>>(x, labels, weight, s.rows, s.classes,
                                                        ignored, rowLoss, s.perRow ? loss : nullptr,
                                                        badLabel);
  if (!s.perRow)
    sumToScalar<<<1, kThreads, 0, stream>>>(
        rowLoss, s.rows, static_cast<double>(s.divisor ? s.divisor : s.rows), loss);
  return cudaGetLastError();
}

cudaError_t nllLossGrad(const float* dloss, const int64_t* labels, const float* weight, NllShape s,
                        IgnoredLabel ignored, float* dx, cudaStream_t stream) {
  if (s.rows * s.classes > 0)
    nllGradKernel<<<blocksFor(s.rows * s.classes), kThreads, 0, stream>>>(
        dloss, labels, weight, s.rows, s.classes,
        static_cast<float>(s.divisor ? s.divisor : s.rows), s.perRow, ignored, dx);
  return cudaGetLastError();
}

cudaError_t labelFraction(const int64_t* labels, int64_t n, const float* weight, int64_t classes,
                          IgnoredLabel ignored, int64_t divisor, float* out, cudaStream_t stream) {
  labelFractionKernel<<<1, kThreads, 0, stream>>>(labels, n, weight, classes, ignored,
                                                  static_cast<double>(divisor ? divisor : n), out);
  return cudaGetLastError();
}

cudaError_t mse(const float* pred, const float* target, int64_t n, int64_t divisor, float* loss,
                double* partial, cudaStream_t stream) {
  squaredErrorPartials<<<kSumBlocks, kThreads, 0, stream>>>(pred, target, n, partial);
  sumToScalar<<<1, kThreads, 0, stream>>>(partial, kSumBlocks,
                                          static_cast<double>(divisor ? divisor : n), loss);
  return cudaGetLastError();
}

cudaError_t mseGrad(const float* dloss, const float* pred, const float* target, int64_t n,
                    int64_t divisor, float* dpred, cudaStream_t stream) {
  // Same association as torch's mse_loss_backward: (2/n)·(pred − target)·dloss.
  const float norm = 2.0f / static_cast<float>(divisor ? divisor : n);
  if (n > 0)
    mseGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(dloss, pred, target, n, norm, dpred);
  return cudaGetLastError();
}

cudaError_t crossEntropyRowMax(const float* logits, int64_t rows, int64_t classes, float* rowMax,
                               cudaStream_t stream) {
  if (rows > 0)
    rowMaxKernel<<<rowBlocks(rows), rowThreads(classes), 0, stream>>>(logits, rows, classes,
                                                                      rowMax);
  return cudaGetLastError();
}

cudaError_t crossEntropyParts(const float* logits, const int64_t* labels, const float* rowMax,
                              int64_t rows, int64_t classes, int64_t offset, int64_t total,
                              IgnoredLabel ignored, float* sumExp, float* target, int* badLabel,
                              cudaStream_t stream) {
  if (rows > 0)
    partsKernel<<<rowBlocks(rows), rowThreads(classes), 0, stream>>>(
        logits, labels, rowMax, rows, classes, offset, total, ignored, sumExp, target, badLabel);
  return cudaGetLastError();
}

cudaError_t crossEntropyCombine(const float* rowMax, const float* sumExp, const float* target,
                                const int64_t* labels, IgnoredLabel ignored, int64_t rows,
                                int64_t count, float* loss, cudaStream_t stream) {
  combineKernel<<<1, kThreads, 0, stream>>>(rowMax, sumExp, target, labels, ignored, rows,
                                            static_cast<double>(count), loss);
  return cudaGetLastError();
}

cudaError_t crossEntropyPartsGrad(const float* dloss, const float* logits, const int64_t* labels,
                                  const float* rowMax, const float* sumExp, int64_t rows,
                                  int64_t classes, int64_t offset, int64_t total, int64_t count,
                                  IgnoredLabel ignored, float* dlogits, int* badLabel,
                                  cudaStream_t stream) {
  if (rows * classes > 0)
    partsGradKernel<<<blocksFor(rows * classes), kThreads, 0, stream>>>(
        dloss, logits, labels, rowMax, sumExp, rows, classes, offset, total,
        static_cast<float>(count), ignored, dlogits, badLabel);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
