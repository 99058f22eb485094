// Host-side launchers of the CUDA kernels, one .cu file per concern; a kernel whose .cu holds its
// binders too (rms_norm.cu, swiglu.cu, rotary.cu) keeps its launchers there. Row-major fp32 buffers
// in device memory, shapes passed explicitly, as runtime/cpu/kernels/kernels.h; every launcher
// enqueues on `stream` and returns cudaGetLastError() (launch failures; faults show at
// synchronisation). The math mirrors the CPU kernel named in each comment, accumulating in double
// where it does.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "ops/binary_math.h"
#include "ops/cuda_scratch.h"  // kMaxDims, kSumBlocks, ReducePlan and the scratch sizes
#include "ops/dropout_math.h"
#include "ops/ignored_label.h"
#include "ops/moe_math.h"
#include "ops/norm_parts.h"
#include "ops/shape.h"

#include "float_data.h"

namespace dtc::cuda::kernels {

using Shape = dtc::Shape;

// ---- elementwise.cu (cpu/kernels/broadcast_binary.cc, cpu/kernels/activations.cc)
// ----------------------------

// The iteration space of a broadcasting binary op, as the CPU's: size-1 output dimensions
// dropped, neighbours both operands walk as one run merged; element strides, 0 = broadcast.
struct BroadcastPlan {
  int rank = 0;
  int64_t dims[kMaxDims], aStrides[kMaxDims], bStrides[kMaxDims];
};
// False when the merged iteration space has more than kMaxDims dimensions.
bool makeBroadcastPlan(const Shape& a, const Shape& b, const Shape& out, BroadcastPlan& plan);

using BinaryOp = dtc::BinaryOp;
// out = a op b over `plan`; `b` null reads 0 (broadcast: x + 0, as the CPU computes it).
cudaError_t binary(BinaryOp op, const float* a, const float* b, float* out,
                   const BroadcastPlan& plan, int64_t total, cudaStream_t stream);
cudaError_t fill(float* out, int64_t n, float value, cudaStream_t stream);
// y = factor · x; y may alias x.
cudaError_t scale(const float* x, float* y, int64_t n, float factor, cudaStream_t stream);
// ---- dropout.cu (cpu/kernels/dropout.cc): y = x · mask / (1 − ratio), `rng` = (seed, step) on
// the device.
cudaError_t dropoutApply(const float* x, float* y, int64_t n, const int64_t* rng,
                         const dropout::Placement& placement, uint64_t key, float ratio,
                         cudaStream_t stream);
// y = x ^ exponent (powf); y may alias x.
cudaError_t power(const float* x, float* y, int64_t n, float exponent, cudaStream_t stream);

enum class Activation { kRelu, kTanh, kGeluErf, kGeluTanh };
// y = f(x); y may alias x.
cudaError_t activation(Activation f, const float* x, float* y, int64_t n, cudaStream_t stream);
// dx = dy · f'(at): `at` is the input x (relu, gelu) or the output y (tanh); dx may alias.
cudaError_t activationGrad(Activation f, const float* dy, const float* at, float* dx, int64_t n,
                           cudaStream_t stream);

// ---- pointwise.cu (ops/pointwise_math.h) ------------------------------------------------------

// y = Math::forward(x) and dx = Math::gradient(dy, at), for each Math of a DTC_POINTWISE kernel
// (instantiated there); outputs may alias inputs.
template <typename Math>
cudaError_t pointwise(const float* x, float* y, int64_t n, cudaStream_t stream);
template <typename Math>
cudaError_t pointwiseGrad(const float* dy, const float* at, float* dx, int64_t n,
                          cudaStream_t stream);

// ---- reduce.cu (cpu/kernels/reduce.cc)
// ------------------------------------------------------------------

// `partial` holds plan.scratchBytes().
cudaError_t reduceSum(const float* x, float* out, const ReducePlan& plan, void* partial,
                      cudaStream_t stream);

// ---- losses.cu (cpu/kernels/losses.cc, cpu/kernels/vocab_parallel.cc)
// -------------------------------------------

// Σ over rows of (log Σ exp(x) − x[label]) / divisor (0: rows), into *loss. `rowLoss` holds
// `rows` doubles; a label outside [0, classes) sets *badLabel.
// Rows labelled `ignored` add nothing.
cudaError_t softmaxCrossEntropy(const float* logits, const int64_t* labels, int64_t rows,
                                int64_t classes, int64_t divisor, IgnoredLabel ignored, float* loss,
                                double* rowLoss, int* badLabel, cudaStream_t stream);
// softmaxCrossEntropy and softmaxCrossEntropyGrad from one read of each row of logits of `type`
// (16-bit: widened as read, dlogits rounded as written); dlogits may be the logits.
cudaError_t softmaxCrossEntropyWithGrad(const void* logits, Float type, const int64_t* labels,
                                        const float* dloss, int64_t rows, int64_t classes,
                                        int64_t divisor, IgnoredLabel ignored, float* loss,
                                        double* rowLoss, void* dlogits, int* badLabel,
                                        cudaStream_t stream);
// dlogits = *dloss · (softmax − onehot) / divisor, 0 on ignored rows; may alias logits.
cudaError_t softmaxCrossEntropyGrad(const float* dloss, const float* logits, const int64_t* labels,
                                    int64_t rows, int64_t classes, int64_t divisor,
                                    IgnoredLabel ignored, float* dlogits, cudaStream_t stream);
// F.nll_loss: each row's −w[label]·x[label] (`weight` null: 1s; 0 on ignored rows), into
// loss[r] when `perRow`, else Σ / divisor (0: rows) into *loss (`rowLoss`: `rows` doubles).
// A label outside [0, classes) sets *badLabel.
struct NllShape {
  int64_t rows = 0, classes = 0, divisor = 0;
  bool perRow = false;
};
cudaError_t nllLoss(const float* x, const int64_t* labels, const float* weight, NllShape s,
                    IgnoredLabel ignored, float* loss, double* rowLoss, int* badLabel,
                    cudaStream_t stream);
// dx = −w[label]·dloss[r] (per row) or −w[label]·*dloss / divisor at each row's label, 0
// elsewhere and on ignored rows.
cudaError_t nllLossGrad(const float* dloss, const int64_t* labels, const float* weight, NllShape s,
                        IgnoredLabel ignored, float* dx, cudaStream_t stream);
// *out = the labels not ignored, each counted 1 or its class's weight (`weight` over `classes`;
// 0 when it is no class), / divisor (0: n).
cudaError_t labelFraction(const int64_t* labels, int64_t n, const float* weight, int64_t classes,
                          IgnoredLabel ignored, int64_t divisor, float* out, cudaStream_t stream);
cudaError_t mse(const float* pred, const float* target, int64_t n, int64_t divisor, float* loss,
                double* partial, cudaStream_t stream);
cudaError_t mseGrad(const float* dloss, const float* pred, const float* target, int64_t n,
                    int64_t divisor, float* dpred, cudaStream_t stream);
// Cross-entropy with the classes split over devices: this one holds [offset, offset + classes).
cudaError_t crossEntropyRowMax(const float* logits, int64_t rows, int64_t classes, float* rowMax,
                               cudaStream_t stream);
// Rows labelled `ignored` add nothing (combine reads `labels`, null without ignored rows).
cudaError_t crossEntropyParts(const float* logits, const int64_t* labels, const float* rowMax,
                              int64_t rows, int64_t classes, int64_t offset, int64_t total,
                              IgnoredLabel ignored, float* sumExp, float* target, int* badLabel,
                              cudaStream_t stream);
cudaError_t crossEntropyCombine(const float* rowMax, const float* sumExp, const float* target,
                                const int64_t* labels, IgnoredLabel ignored, int64_t rows,
                                int64_t count, float* loss, cudaStream_t stream);
cudaError_t crossEntropyPartsGrad(const float* dloss, const float* logits, const int64_t* labels,
                                  const float* rowMax, const float* sumExp, int64_t rows,
                                  int64_t classes, int64_t offset, int64_t total, int64_t count,
                                  IgnoredLabel ignored, float* dlogits, int* badLabel,
                                  cudaStream_t stream);

// ---- optimizers.cu (cpu/kernels/optimizers.cc)
// ----------------------------------------------------------

// `lr` is the device scalar holding this step's learning rate.
cudaError_t sgd(const float* param, const float* grad, const float* buf, float* paramOut,
                float* bufOut, int64_t n, const float* lr, float momentum, float weightDecay,
                cudaStream_t stream);
// `step` is the device scalar holding the 1-based step count after this update.
cudaError_t adamw(const float* param, const float* grad, const float* m, const float* v,
                  float* paramOut, float* mOut, float* vOut, int64_t n, const float* step,
                  const float* lr, float beta1, float beta2, float eps, float weightDecay,
                  cudaStream_t stream);
// One tensor of a multi-tensor AdamW: its buffers and element count (outputs may alias inputs).
struct AdamwTensor {
  const float *param, *grad, *m, *v;
  float *paramOut, *mOut, *vOut;
  int64_t n;
};
// adamw on every tensor of `tensors` (one parameter group), each element computed as adamw
// computes it, in as few launches as the tensors' descriptors fit in (kernel parameters).
cudaError_t multiTensorAdamw(const std::vector<AdamwTensor>& tensors, const float* step,
                             const float* lr, float beta1, float beta2, float eps,
                             float weightDecay, cudaStream_t stream);

// ---- layout.cu (cpu/kernels/layout.cc)
// ------------------------------------------------------------------

// out = x permuted (rank <= kMaxDims): out.shape[i] = shape[perm[i]]; elements of 4 or 2 bytes.
cudaError_t transpose(const void* x, const Shape& shape, const std::vector<int64_t>& perm,
                      void* out, int elementBytes, cudaStream_t stream);

// ---- attention.cu (cpu/kernels/attention.cc)
// ------------------------------------------------------------

cudaError_t causalSoftmax(const float* x, float* y, int64_t batch, int64_t t, float scale,
                          cudaStream_t stream);
cudaError_t causalSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t batch, int64_t t,
                              float scale, cudaStream_t stream);
// The same over `rows` whole rows of n; with `log`, log_softmax and its gradient
// (cpu::logSoftmax).
cudaError_t softmax(const float* x, float* y, int64_t rows, int64_t n, float scale, bool log,
                    cudaStream_t stream);
cudaError_t softmaxGrad(const float* dy, const float* y, float* dx, int64_t rows, int64_t n,
                        float scale, bool log, cudaStream_t stream);
// Two partial attention results of the same queries merged by their log-sum-exps
// (cpu::attentionMerge): out [rows, d] of `type`, lse [rows] float32, neither aliasing an input.
cudaError_t attentionMerge(Float type, const void* outA, const float* lseA, const void* outB,
                           const float* lseB, void* out, float* lse, int64_t rows, int64_t d,
                           cudaStream_t stream);

// ---- layer_norm.cu (cpu/kernels/layer_norm.cc)
// ----------------------------------------------------------

// y is f32, or the f32 result rounded to bf16/f16 (yType). With `residual`, the rows normalised
// are x + residual, written to `sum` (add_layer_norm).
cudaError_t layerNorm(const float* x, const float* w, const float* b, void* y, Float yType,
                      float* mean, float* rstd, int64_t rows, int64_t c, float eps,
                      cudaStream_t stream, const float* residual = nullptr, float* sum = nullptr);
// layer_norm_grad_add's additions: dx written as residual + dx, and (`rounded`) that sum in
// `roundedType` too.
struct LayerNormGradAdd {
  const float* residual = nullptr;
  void* rounded = nullptr;
  Float roundedType = Float::kBF16;
};
// dy is f32, or bf16/f16 (dyType) widened as it is read; dx may alias dy or x (the weight
// gradients are taken first).
cudaError_t layerNormGrad(const void* dy, Float dyType, const float* x, const float* w,
                          const float* mean, const float* rstd, float* dx, float* dw, float* db,
                          int64_t rows, int64_t c, void* scratch, cudaStream_t stream,
                          const LayerNormGradAdd& add = {});

// ---- moe.cu (cpu/kernels/moe.cc) --
// Routing plans (expert, slot: int64 [G, S, K]) and experts' buffers [E, G, C, D]; `bad` is the
// step's error flag, raised where a plan entry lies outside the buffers (the entry is skipped).

using MoeShape = moe::MoeShape;
cudaError_t moeRoute(const float* scores, int64_t* expert, int64_t* slot, float* weight,
                     float* load, const MoeShape& m, bool normalize, cudaStream_t stream);
cudaError_t moeRouteGrad(const float* dweight, const float* scores, const int64_t* expert,
                         float* dscores, const MoeShape& m, bool normalize, int* bad,
                         cudaStream_t stream);
cudaError_t moeDispatch(const float* x, const int64_t* expert, const int64_t* slot, float* buffer,
                        const MoeShape& m, int* bad, cudaStream_t stream);
cudaError_t moeDispatchGrad(const float* dbuffer, const int64_t* expert, const int64_t* slot,
                            float* dx, const MoeShape& m, int* bad, cudaStream_t stream);
cudaError_t moeCombine(const float* buffer, const int64_t* expert, const int64_t* slot,
                       const float* weight, float* y, const MoeShape& m, int* bad,
                       cudaStream_t stream);
cudaError_t moeCombineGrad(const float* dy, const float* buffer, const int64_t* expert,
                           const int64_t* slot, const float* weight, float* dbuffer, float* dweight,
                           const MoeShape& m, int* bad, cudaStream_t stream);
// Over rows of n: y = log Σ exp(x), and dx = dy · exp(x − y).
cudaError_t logSumExp(const float* x, float* y, int64_t rows, int64_t n, cudaStream_t stream);
cudaError_t logSumExpGrad(const float* dy, const float* x, const float* y, float* dx, int64_t rows,
                          int64_t n, cudaStream_t stream);

// ---- embedding.cu (cpu/kernels/embedding.cc, the split-table paths of
// cpu/cpu_transformer_table.cc) --

// out[i] = table[ids[i] − offset] when that row is here, else 0; an id outside [0, total) sets
// *badId. Unsplit tables: offset 0, total = vocab.
cudaError_t embedding(const float* table, const int64_t* ids, float* out, int64_t n, int64_t vocab,
                      int64_t dim, int64_t offset, int64_t total, int* badId, cudaStream_t stream);
// Deterministic scatter-add: positions sorted by id (a stable radix sort), then each row sums
// its positions in increasing order, as the CPU does: bit-identical to it.
uint64_t embeddingGradScratchBytes(int64_t n, int64_t total);
cudaError_t embeddingGrad(const float* dy, const int64_t* ids, float* dtable, int64_t n,
                          int64_t vocab, int64_t dim, int64_t offset, int64_t total, void* scratch,
                          uint64_t scratchBytes, int* badId, cudaStream_t stream);

// ---- conv.cu (cpu/kernels/conv.cc, cpu/kernels/pool.cc)
// -----------------------------------------------------

struct ConvDims {
  int64_t n, c, h, w;      // input [N, C, H, W]
  int64_t o, kh, kw;       // weight [O, C, kh, kw]
  int64_t sh, sw, ph, pw;  // stride, zero padding
  int64_t oh, ow;          // output [N, O, oh, ow]
};
// col [N, C·kh·kw, oh·ow]: every output pixel's receptive field, zeros for padding.
cudaError_t im2col(const float* x, float* col, const ConvDims& g, cudaStream_t stream);
// dx [N, C, H, W] = the adjoint of im2col applied to col.
cudaError_t col2im(const float* col, float* dx, const ConvDims& g, cudaStream_t stream);
// out[e] = Σ over b of parts[b·count + e], in double, b in [0, batches).
cudaError_t sumBatches(const float* parts, int64_t batches, int64_t count, float* out,
                       cudaStream_t stream);

struct PoolDims {
  int64_t n, c, h, w, kh, kw, sh, sw, oh, ow;
};
// The first maximum of each window wins ties (as PyTorch); its gradient goes there.
cudaError_t maxPool2d(const float* x, float* y, const PoolDims& g, cudaStream_t stream);
cudaError_t maxPool2dGrad(const float* dy, const float* x, float* dx, const PoolDims& g,
                          cudaStream_t stream);

// ---- batch_norm.cu (cpu/kernels/batch_norm.cc, cpu/kernels/sync_batch_norm.cc)
// ----------------------------------

// x [N, C, S] (S = H·W); one block per channel, sums in double (two passes for the variance).
struct NormDims {
  int64_t n, c, s;
};
cudaError_t batchNormTrain(const float* x, const float* weight, const float* bias,
                           const float* runningMean, const float* runningVar, float* y, float* mean,
                           float* rstd, float* newRunningMean, float* newRunningVar, NormDims d,
                           float eps, float momentum, cudaStream_t stream);
cudaError_t batchNormTrainGrad(const float* dy, const float* x, const float* weight,
                               const float* mean, const float* rstd, float* dx, float* dweight,
                               float* dbias, NormDims d, cudaStream_t stream);
cudaError_t batchNormEval(const float* x, const float* weight, const float* bias,
                          const float* runningMean, const float* runningVar, float* y, NormDims d,
                          float eps, cudaStream_t stream);
// The pieces of synchronised BatchNorm; `count` is the values per channel over every device.
cudaError_t batchNormSum(const float* x, float* sum, NormDims d, cudaStream_t stream);
cudaError_t batchNormCenteredSquares(const float* x, const float* sum, float* squares, NormDims d,
                                     int64_t count, cudaStream_t stream);
cudaError_t batchNormNormalize(const float* x, const float* sum, const float* squares,
                               const float* weight, const float* bias, const float* runningMean,
                               const float* runningVar, float* y, float* mean, float* rstd,
                               float* newRunningMean, float* newRunningVar, NormDims d,
                               int64_t count, float eps, float momentum, cudaStream_t stream);
cudaError_t batchNormGradSums(const float* dy, const float* x, const float* mean, const float* rstd,
                              float* dbias, float* dweight, NormDims d, cudaStream_t stream);
cudaError_t batchNormGradInput(const float* dy, const float* x, const float* weight,
                               const float* mean, const float* rstd, const float* dbias,
                               const float* dweight, float* dx, NormDims d, int64_t count,
                               cudaStream_t stream);

// ---- precision.cu (cpu/cpu_precision_table.cc) ------------

// y = x in y's type, rounded to nearest even as support/half.h, bit for bit (NaN payloads too).
// Equal types copy; x and y must not overlap otherwise.
cudaError_t cast(const void* x, Float from, void* y, Float to, int64_t n, cudaStream_t stream);
// An int64 mask the data holds, as float32 (the CPU's static_cast).
cudaError_t int64ToF32(const int64_t* x, float* y, int64_t n, cudaStream_t stream);
// One pair of a multi-tensor cast.
struct CastPair {
  const void* x;
  void* y;
  int64_t n;
};
// cast() on every pair, all from `from` to `to`, in as few launches as the pairs' descriptors
// fit in (kernel parameters); no y overlaps an x.
cudaError_t multiTensorCast(const std::vector<CastPair>& pairs, Float from, Float to,
                            cudaStream_t stream);
// *count = how many of x[0, n) are inf or NaN; `partial` holds kSumBlocks long longs.
cudaError_t nonfiniteCount(const float* x, int64_t n, float* count, long long* partial,
                           cudaStream_t stream);
// *sum = the sum of x[0, n)'s squares (in double, rounded once); `partial` holds kSumBlocks
// doubles.
cudaError_t sumSquares(const float* x, int64_t n, float* sum, double* partial, cudaStream_t stream);
// clip_grad_norm_'s global norm sqrt(*squares) and coefficient min(1, max/(norm + 1e-6)) (1 when
// maxNorm is 0), on device scalars.
cudaError_t clipCoefficient(const float* squares, float* norm, float* coef, float maxNorm,
                            cudaStream_t stream);
// GradScaler's step on device scalars; `interval` is growth_interval as a float. The outputs may
// alias the inputs.
cudaError_t lossScaleStep(const float* scale, const float* good, const float* nonfinite,
                          float* keep, float* inv, float* newScale, float* newGood, float interval,
                          float growth, float backoff, cudaStream_t stream);
// y = *pred != 0 ? onTrue : onFalse; y may be either (then nothing moves when it is the one
// chosen).
cudaError_t select(const float* pred, const float* onTrue, const float* onFalse, float* y,
                   int64_t n, cudaStream_t stream);

// ---- epilogue.cu (cpu/cpu_epilogue_table.cc: the fused linear epilogues, unfused) -----------

// The epilogues of linear_bias / linear_bias_gelu / linear_grad_input_gelu after a plain GEMM, for
// when cuBLASLt cannot fuse them; the CPU's add and gelu_tanh math, in its order, in f32. `sum` is
// [rows, n] row-major, `bias` [n]; y is of `yType` (f32, or 16-bit rounded as cast() does: the
// CPU's widened result rounded). Each element is read before it is written.

// y = sum + bias; y may be `sum` (f32).
cudaError_t biasAdd(const float* sum, const float* bias, void* y, Float yType, int64_t rows,
                    int64_t n, cudaStream_t stream);
// pre = sum + bias (stored as preType: f32, or y's 16-bit type), y = gelu_tanh of the f32
// value; `pre` may be `sum` (f32).
cudaError_t biasGelu(const float* sum, const float* bias, void* pre, Float preType, void* y,
                     Float yType, int64_t rows, int64_t n, cudaStream_t stream);
// y = gelu_tanh(pre) in y's type, over `count` elements (after cuBLASLt's BIAS epilogue).
cudaError_t geluTanh(const float* pre, void* y, Float yType, int64_t count, cudaStream_t stream);
// dx = sum · gelu_tanh'(pre) in dx's type, pre read as preType, over `count` elements; dx may be
// `sum` (f32).
cudaError_t geluGrad(const float* sum, const void* pre, Float preType, void* dx, Float dxType,
                     int64_t count, cudaStream_t stream);
// out [n] = Σ over the rows of x [rows, n] (f32, or 16-bit widened as read), in a fixed order:
// partial sums per chunk of rows in `scratch` (columnSumScratchBytes), then the chunks in order.
cudaError_t columnSums(const void* x, Float xType, int64_t rows, int64_t n, void* scratch,
                       float* out, cudaStream_t stream);

// ---- attention_gemm.cu (cpu/kernels/flash_attention.cc: causal attention's GEMM path, 16-bit
// operands) --

// The row passes between cuBLAS's GEMMs (cuda_attention_table.cc) for `slices` [T, T] score
// matrices, one block per query row; `type` is kBF16 or kF16 (cudaErrorInvalidValue otherwise),
// the type of p, ds, dout and out. s = q·kᵀ and dp = dout·vᵀ are f32 [slices, T, T], unscaled;
// lse is f32 [slices, T]. p and ds are written whole: their entries above the diagonal are 0.

// lse_i = log Σ_{j≤i} exp(scale·s_ij); p_ij = exp(scale·s_ij − lse_i) rounded to `type`.
cudaError_t attentionSoftmaxRows(Float type, const float* s, float* lse, void* p, int64_t slices,
                                 int64_t t, float scale, cudaStream_t stream);
// p as above from the forward's lse, and ds_ij = p_ij (dp_ij − D_i) · scale with the unrounded p
// and D_i = dout_i · out_i (dout, out [slices, T, d]), each rounded once to `type`.
cudaError_t attentionGradRows(Float type, const float* s, const float* dp, const float* lse,
                              const void* dout, const void* out, void* p, void* ds, int64_t slices,
                              int64_t t, int64_t d, float scale, cudaStream_t stream);

}  // namespace dtc::cuda::kernels
