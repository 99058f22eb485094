// CPU kernels, one per graph op. Plain functions over raw row-major (C-order) fp32 buffers;
// shapes are passed explicitly. The executor (exec/) maps plan steps onto these.
// Every kernel must tolerate `out` aliasing an input of the same shape only where stated.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/binary_math.h"
#include "ops/dropout_math.h"
#include "ops/ignored_label.h"
#include "ops/shape.h"
#include "support/thread_pool.h"

namespace dtc::cpu {

using Shape = dtc::Shape;
using dtc::numElements;

// C[M,N] = op(A) · op(B), op(X) = X or Xᵀ. A is [M,K] (or [K,M] if transA), B is [K,N] (or
// [N,K] if transB). Through single-threaded BLAS (sgemm) calls on blocks run by `pool`.
void matmul(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool transA,
            bool transB, ThreadPool& pool);

// Element-wise binary ops with NumPy broadcasting: out has shape `outShape`; a and b are
// broadcast to it (shapes right-aligned, size-1 or missing dimensions repeat).
using BinaryOp = dtc::BinaryOp;
void binary(BinaryOp op, const float* a, const Shape& aShape, const float* b, const Shape& bShape,
            float* out, const Shape& outShape, ThreadPool& pool);

// out = sum of x over `axes` (sorted, unique); out has x's shape with those axes removed
// (keepdims only changes the shape, not the data layout).
void reduceSum(const float* x, const Shape& xShape, const std::vector<int64_t>& axes, float* out,
               ThreadPool& pool);

// out[i] = value.
void fill(float* out, int64_t n, float value, ThreadPool& pool);

// Activations and their gradients. `out` may alias the input.
void relu(const float* x, float* y, int64_t n, ThreadPool& pool);
void reluGrad(const float* dy, const float* x, float* dx, int64_t n, ThreadPool& pool);
void tanhForward(const float* x, float* y, int64_t n, ThreadPool& pool);
// y = factor · x.
void scale(const float* x, float* y, int64_t n, float factor, ThreadPool& pool);
// Dropout's mask applied, forward or backward: y = x · mask / (1 − ratio), the mask drawn for
// this block of the tensor (ops/dropout_math.h) at (seed, step). `y` may alias `x`.
void dropoutApply(const float* x, float* y, int64_t n, uint64_t seed, uint64_t step,
                  const dropout::Placement& placement, uint64_t key, float ratio, ThreadPool& pool);
// y = x ^ exponent, in float (as torch.pow on float32 tensors).
void power(const float* x, float* y, int64_t n, float exponent, ThreadPool& pool);
void tanhGrad(const float* dy, const float* y, float* dx, int64_t n,
              ThreadPool& pool);  // y = tanh(x)
// approximateTanh: PyTorch's GELU(approximate="tanh"); otherwise the exact erf form.
void gelu(const float* x, float* y, int64_t n, bool approximateTanh, ThreadPool& pool);
void geluGrad(const float* dy, const float* x, float* dx, int64_t n, bool approximateTanh,
              ThreadPool& pool);

// Mean softmax cross-entropy over `rows` rows of `classes` logits, as F.cross_entropy with
// reduction="mean". Labels are class indices; one outside [0, classes) makes the call return
// false (and leaves *loss unspecified) — the caller turns that into an error.
// `divisor` (0: rows) is what the sum divides by: a device holding a slice of a batch divides
// by the whole batch's rows, so the devices' losses sum to the batch's mean.
// Rows labelled `ignored` add nothing (the divisor stays all rows).
bool softmaxCrossEntropy(const float* logits, const int64_t* labels, int64_t rows, int64_t classes,
                         float* loss, ThreadPool& pool, int64_t divisor = 0,
                         IgnoredLabel ignored = {});
// dlogits = dloss · (softmax(logits) − onehot(labels)) / divisor (0: rows); 0 on ignored rows.
void softmaxCrossEntropyGrad(const float* dloss, const float* logits, const int64_t* labels,
                             int64_t rows, int64_t classes, float* dlogits, ThreadPool& pool,
                             int64_t divisor = 0, IgnoredLabel ignored = {});
// F.nll_loss on log-probabilities x [rows, classes]: each row's −w[label]·x[label] (w: the class
// weights, null for 1s; 0 on ignored rows), into loss[r] when `perRow`, else their sum divided by
// `divisor` (0: rows) into *loss. False for a label outside [0, classes) that is not ignored.
struct NllShape {
  int64_t rows = 0, classes = 0, divisor = 0;
  bool perRow = false;
};
bool nllLoss(const float* x, const int64_t* labels, const float* weight, NllShape s, float* loss,
             IgnoredLabel ignored = {});
// dx = −w[label]·dloss[r] (per row) or −w[label]·dloss / divisor at each row's label, 0
// elsewhere and on ignored rows.
void nllLossGrad(const float* dloss, const int64_t* labels, const float* weight, NllShape s,
                 float* dx, IgnoredLabel ignored = {});
// The labels not ignored, each counted 1 or (with class weights over `classes`) its class's
// weight, 0 when it is no class; divided by `divisor` (0: n).
float labelFraction(const int64_t* labels, int64_t n, const float* weight, int64_t classes,
                    IgnoredLabel ignored, int64_t divisor = 0);

// Mean squared error over n elements, as F.mse_loss with reduction="mean"; divides by
// `divisor` (0: n) as softmaxCrossEntropy.
void mse(const float* pred, const float* target, int64_t n, float* loss, ThreadPool& pool,
         int64_t divisor = 0);
// dpred = dloss · 2 (pred − target) / divisor (0: n).
void mseGrad(const float* dloss, const float* pred, const float* target, int64_t n, float* dpred,
             ThreadPool& pool, int64_t divisor = 0);

// Cross-entropy with the classes split over devices (vocab_parallel.cc): this device holds
// classes [offset, offset + classes) of each row. rowMax and sumExp (Σ exp(x − rowMax)) are
// per row, target the label's logit or 0 when the label is in another block.
void crossEntropyRowMax(const float* logits, int64_t rows, int64_t classes, float* rowMax,
                        ThreadPool& pool);
void crossEntropyParts(const float* logits, const int64_t* labels, const float* rowMax,
                       int64_t rows, int64_t classes, int64_t offset, float* sumExp, float* target,
                       ThreadPool& pool);
// Σ over rows of rowMax + log(sumExp) − target, divided by count; rows whose label (`labels`,
// read only then) is `ignored` add nothing.
float crossEntropyCombine(const float* rowMax, const float* sumExp, const float* target,
                          int64_t rows, int64_t count, const int64_t* labels = nullptr,
                          IgnoredLabel ignored = {});
// dlogits = dloss · (exp(x − rowMax)/sumExp − onehot(label)) / count, on this block; 0 on
// ignored rows.
void crossEntropyPartsGrad(float dloss, const float* logits, const int64_t* labels,
                           const float* rowMax, const float* sumExp, int64_t rows, int64_t classes,
                           int64_t offset, int64_t count, float* dlogits, ThreadPool& pool,
                           IgnoredLabel ignored = {});

// torch.optim.SGD (dampening 0, not nesterov) for one tensor:
//   g = grad + weightDecay·param;  buf = momentum·buf + g  (buf starts at 0);  param -= lr·buf
// With momentum == 0 the buffer is left untouched and param -= lr·g.
// paramOut/bufOut may alias param/buf.
void sgd(const float* param, const float* grad, const float* buf, float* paramOut, float* bufOut,
         int64_t n, float lr, float momentum, float weightDecay, ThreadPool& pool);

// torch.optim.AdamW for one tensor; `step` is the 1-based step count after this update.
//   param *= 1 − lr·weightDecay
//   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
//   param −= (lr / (1−β1^step)) · m / (sqrt(v) / sqrt(1−β2^step) + eps)
// Outputs may alias the corresponding inputs.
void adamw(const float* param, const float* grad, const float* m, const float* v, float* paramOut,
           float* mOut, float* vOut, int64_t n, float step, float lr, float beta1, float beta2,
           float eps, float weightDecay, ThreadPool& pool);

}  // namespace dtc::cpu
