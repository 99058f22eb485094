// The device memory CUDA kernels use besides their operands, as functions of a step's shapes and
// attributes alone. The compiler sizes each step's planned scratch with them
// (cudaStepScratchBytes in ops/step_scratch.h) and the CUDA binders lay their pieces out with the
// same functions, so a plan compiled for CUDA holds every byte its steps use. Plain C++: the
// compiler, which has no CUDA, links it.
#pragma once

#include <cstdint>
#include <vector>

namespace dtc::cuda::kernels {

constexpr int kMaxDims = 8;
// Blocks of a whole-tensor sum (mse, sum_squares, nonfinite_count): their partial sums, one
// double (or long long) each, are the step's scratch.
constexpr int kSumBlocks = 256;
// Pieces of a step's scratch start at multiples of this from its start (the scratch itself
// starts on the arena's 64-byte alignment, as every operand does).
constexpr uint64_t kPieceAlign = 256;
inline uint64_t alignPiece(uint64_t bytes) {
  return (bytes + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
}

// The workspace cuBLAS and cuBLASLt share on the compute stream (one GEMM runs at a time there):
// 32 MiB, what PyTorch gives cuBLAS on Hopper. A cuBLASLt algorithm asking for more is not taken.
constexpr uint64_t kBlasWorkspaceBytes = uint64_t{32} << 20;

// ---- reduce_sum ---------------------------------------------------------------------------------

struct Dims {
  int rank = 0;
  int64_t size[kMaxDims], stride[kMaxDims];  // stride in elements of x
};
#ifdef __CUDACC__
__host__ __device__
#endif
    inline int64_t
    count(const Dims& d) {
  int64_t n = 1;
  for (int i = 0; i < d.rank; ++i) n *= d.size[i];
  return n;
}
// reduce_sum of x over sorted unique axes, as a plan: x's size-1 dimensions dropped and runs of
// reduced (or kept) dimensions merged; then either the innermost run is reduced (each output
// sums `inner`-long contiguous runs) or kept (`inner` contiguous outputs per kept index).
struct ReducePlan {
  enum Kind { kEmpty, kZeros, kCopy, kInnerReduced, kInnerKept } kind = kEmpty;
  Dims kept, reduced;  // outer dimensions (the innermost run excluded)
  int64_t inner = 1, outputs = 0, total = 0, chunks = 1;  // chunks: split of each sum
  uint64_t scratchBytes() const;                          // double partial sums, when chunks > 1
};
// False where the merged dimensions exceed kMaxDims. `axes` must lie in [0, x.size()).
bool makeReducePlan(const std::vector<int64_t>& x, const std::vector<int64_t>& axes,
                    ReducePlan& plan);

// ---- normalisation, embeddings, attention, convolution ------------------------------------------

// LayerNorm's weight gradients: per chunk of rows, partial column sums of dw and db (doubles).
int64_t layerNormGradChunks(int64_t rows);
uint64_t layerNormGradScratchBytes(int64_t rows, int64_t c);
// A bias gradient's column sums over [rows, n] where cuBLASLt does not sum it beside the weight
// gradient's GEMM: per chunk of rows (LayerNorm's chunks), partial sums (doubles).
uint64_t columnSumScratchBytes(int64_t rows, int64_t n);

// The embedding gradient's sort of n ids: keys, positions and order, then CUB's radix sort's own
// temporary storage. Only CUB can say that exactly, at run time on a GPU; this bounds it from
// CUB's allocations (two alternate buffers of n keys and values, histograms and look-back state
// of at most 4 bytes per item plus a fixed part), and the binder checks the exact size against it.
uint64_t embeddingGradScratchBound(int64_t n);

// FlashAttention-2's backward pre-pass: D_i = dout_i · out_i per row (float32).
uint64_t causalAttentionGradScratchBytes(int64_t slices, int64_t t);

// The GEMM path of attention on 16-bit operands: [slices, T, T] buffers S (f32) and P (16-bit);
// backward also dP (f32) and dS (16-bit). Separate buffers, since a row pass reads its f32 row
// while other blocks write their 16-bit rows. Offsets in bytes from the scratch's start.
struct ScoresLayout {
  uint64_t s = 0, dp = 0, p = 0, ds = 0, bytes = 0;
};
// `elements` = slices·T·T (saturating: bytes UINT64_MAX where they would overflow).
ScoresLayout scoresLayout(uint64_t elements, bool grad);
uint64_t scoreElements(int64_t slices, int64_t t);
// Past this much scratch the flash kernels, which need none forward, are the better use of the
// memory (GPT-2 124M at batch 8, 96 slices of T = 1024: 576 MiB forward, 1152 MiB backward).
constexpr uint64_t kGemmScratchBudget = uint64_t{2} << 30;
// What a causal_attention (grad) step plans: the GEMM path's layout on 16-bit operands within the
// budget, and for the backward at least the flash pre-pass's rows (either path fits in it).
uint64_t attentionScratchBytes(int64_t slices, int64_t t, bool lowPrecision, bool grad);
// A bound on the workspace cuDNN's fused attention asks for on 16-bit operands, planned beside
// dtc's own kernels' scratch so that the step may take either path. Its backward accumulates dq
// in float32 over query rows padded to 128, beside a float32 sum per row: cuDNN 9.19 asked for
// B·H·roundup(T, 128)·max(D, 32)·4 + B·H·T·4 + 256 bytes (T = 16 and 17; D = 8 and 32). The
// bound pads the head size to 64 and counts a padded row's sums twice; a binder that finds cuDNN
// asking for more than the plan holds takes dtc's kernels instead. Grouped-query attention (k and
// v of kvHeads < heads heads) is not yet measured: the bound assumes the worst, dk and dv
// accumulated in float32 per query head before each group's sum, two more such buffers.
uint64_t cudnnAttentionWorkspaceBound(int64_t batch, int64_t heads, int64_t t, int64_t d, bool grad,
                                      int64_t kvHeads = 0);

// im2col + GEMM convolutions: col [n, k, p] floats; the weight gradient's per-sample parts
// [n, o, k] floats after it (k = c·kh·kw, p = oh·ow).
struct ConvScratch {
  uint64_t col = 0, parts = 0, bytes = 0;
};
ConvScratch convScratch(int64_t n, int64_t k, int64_t p, int64_t o, bool gradWeight);

}  // namespace dtc::cuda::kernels
