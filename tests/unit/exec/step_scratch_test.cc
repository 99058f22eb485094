// The scratch a step needs besides its operands (ops/step_scratch.h), which the compiler plans and
// the backends' binders lay out: sizes worked out by hand from the kernels' layouts.
#include "ops/step_scratch.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "exec/stream_hazards.h"
#include "ops/cuda_scratch.h"

namespace dtc {
namespace {

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16;

ScratchStep step(const char* kernel, std::vector<ScratchOperand> in,
                 std::vector<ScratchOperand> out, std::map<std::string, int64_t> ints = {},
                 std::map<std::string, std::vector<int64_t>> lists = {}) {
  ScratchStep s;
  s.kernel = findKernel(kernel);
  s.inputs = std::move(in);
  s.outputs = std::move(out);
  s.intAttr = [ints](const char* name) {
    auto it = ints.find(name);
    return it == ints.end() ? int64_t{0} : it->second;
  };
  s.intsAttr = [lists](const char* name) {
    auto it = lists.find(name);
    return it == lists.end() ? std::vector<int64_t>{} : it->second;
  };
  return s;
}

TEST(StepScratchTest, CpuWidensSixteenBitOperandsOfFloatKernels) {
  // bf16 [4, 8] · [8, 4] -> [4, 4]: float32 copies of 32, 32 and 16 values, each 64-aligned.
  const ScratchStep low = step("matmul", {{kBF16, {4, 8}}, {kBF16, {8, 4}}}, {{kBF16, {4, 4}}});
  EXPECT_EQ(cpuStepScratchBytes(low), 128u + 128u + 64u);
  EXPECT_EQ(cudaStepScratchBytes(low), 0u);  // cuBLAS takes 16-bit operands as they are
  EXPECT_EQ(cpuStepScratchBytes(step("matmul", {{kF32, {4, 8}}, {kF32, {8, 4}}}, {{kF32, {4, 4}}})),
            0u);
}

TEST(StepScratchTest, CudaReductionPartials) {
  // [4, 1e6] summed over its rows: 31 chunks of at most 32768 elements per output, a double each.
  EXPECT_EQ(cudaStepScratchBytes(
                step("reduce_sum", {{kF32, {4, 1000000}}}, {{kF32, {4}}}, {}, {{"axes", {1}}})),
            1024u);  // 31 · 4 · 8 = 992, rounded to 64
  // Short sums need no partials.
  EXPECT_EQ(cudaStepScratchBytes(
                step("reduce_sum", {{kF32, {4, 100}}}, {{kF32, {4}}}, {}, {{"axes", {1}}})),
            0u);
  EXPECT_EQ(cudaStepScratchBytes(step("sum_squares", {{kF32, {10}}}, {{kF32, {1}}})),
            cuda::kernels::kSumBlocks * sizeof(double));
  // LayerNorm's weight gradients: 2 chunks of 64 rows, dw and db partials of 64 doubles each.
  EXPECT_EQ(cudaStepScratchBytes(step(
                "layer_norm_grad",
                {{kF32, {100, 64}}, {kF32, {100, 64}}, {kF32, {64}}, {kF32, {100}}, {kF32, {100}}},
                {{kF32, {100, 64}}, {kF32, {64}}, {kF32, {64}}})),
            2u * 2 * 64 * 8);
}

TEST(StepScratchTest, CudaConvolutionColumns) {
  // x [2, 3, 8, 8], w [4, 3, 3, 3], y [2, 4, 8, 8]: k = 27, p = 64; col [2, 27, 64] floats.
  const ScratchOperand x{kF32, {2, 3, 8, 8}}, w{kF32, {4, 3, 3, 3}}, y{kF32, {2, 4, 8, 8}};
  EXPECT_EQ(cudaStepScratchBytes(step("conv2d", {x, w}, {y})), 13824u);
  EXPECT_EQ(cudaStepScratchBytes(step("conv2d_grad_input", {y, w}, {x})), 13824u);
  // The weight gradient's per-sample parts [2, 4, 27] floats follow the columns.
  EXPECT_EQ(cudaStepScratchBytes(step("conv2d_grad_weight", {y, x}, {w})), 14720u);
}

TEST(StepScratchTest, CudaAttentionPlansTheGemmPathOnSixteenBitOperands) {
  const std::vector<int64_t> shape = {2, 3, 16, 8};  // 6 slices of T = 16
  auto grad = [&](DType t) {
    std::vector<ScratchOperand> in(5, ScratchOperand{t, shape});
    in.push_back({kF32, {2, 3, 16}});
    return step("causal_attention_grad", in, std::vector<ScratchOperand>(3, {t, shape}));
  };
  // f32: the flash kernels; the backward's pre-pass keeps a float per row.
  EXPECT_EQ(cudaStepScratchBytes(grad(kF32)), 384u);
  EXPECT_EQ(
      cudaStepScratchBytes(step("causal_attention", std::vector<ScratchOperand>(3, {kF32, shape}),
                                {{kF32, shape}, {kF32, {2, 3, 16}}})),
      0u);
  // bf16, the GEMM path: S and dP (f32) and P and dS (bf16), [6, 16, 16] each, 256-aligned —
  // forward, as cuDNN's forward needs no workspace.
  EXPECT_EQ(
      cudaStepScratchBytes(step("causal_attention", std::vector<ScratchOperand>(3, {kBF16, shape}),
                                {{kBF16, shape}, {kF32, {2, 3, 16}}})),
      6144u + 3072);
  // The backward plans the larger of that (18,432 bytes) and cuDNN's bound: 6 slices of rows
  // padded to 128, 64 floats wide, two floats per padded row, 4 KiB.
  const uint64_t cudnn = 6u * 128 * 64 * 4 + 2 * 6 * 128 * 4 + 4096;
  EXPECT_EQ(cudaStepScratchBytes(grad(kBF16)), cudnn);
  // Grouped-query attention (k and v of 1 head for q's 3): the bound's two more buffers.
  const std::vector<int64_t> kv = {2, 1, 16, 8};
  std::vector<ScratchOperand> in = {{kBF16, shape}, {kBF16, shape}, {kBF16, kv},
                                    {kBF16, kv},    {kBF16, shape}, {kF32, {2, 3, 16}}};
  EXPECT_EQ(cudaStepScratchBytes(
                step("causal_attention_grad", in, {{kBF16, shape}, {kBF16, kv}, {kBF16, kv}})),
            3u * 6 * 128 * 64 * 4 + 2 * 6 * 128 * 4 + 4096);
}

TEST(StepScratchTest, CudaCollectivesPackStridedBlocksAndWidenSixteenBits) {
  // Gathered along dim 1 of [4, 16]: rank blocks are strided, packed whole (64 floats).
  EXPECT_EQ(
      cudaStepScratchBytes(step("all_gather", {{kF32, {4, 8}}}, {{kF32, {4, 16}}}, {{"dim", 1}})),
      256u);
  EXPECT_EQ(
      cudaStepScratchBytes(step("all_gather", {{kF32, {4, 8}}}, {{kF32, {8, 8}}}, {{"dim", 0}})),
      0u);
  // bf16: float32 copies of all 96 values first (384 bytes, to 512), then the packing.
  const ScratchStep low = step("all_gather", {{kBF16, {4, 8}}}, {{kBF16, {4, 16}}}, {{"dim", 1}});
  EXPECT_EQ(widenedCollectiveBytes(low), 512u);
  EXPECT_EQ(cudaStepScratchBytes(low), 512u + 256u);
  // all_to_all with a strided side: the blocks sent, then those received.
  EXPECT_EQ(cudaStepScratchBytes(step("all_to_all", {{kF32, {4, 8}}}, {{kF32, {8, 4}}},
                                      {{"split_dim", 1}, {"concat_dim", 0}})),
            2u * 32 * 4);
}

TEST(StepScratchTest, CpuCollectivesPackBucketsAndStridedBlocks) {
  // A bucket of [3] and [5]: 8 floats packed end to end (32 bytes, to 64); one tensor: none.
  EXPECT_EQ(cpuStepScratchBytes(
                step("all_reduce", {{kF32, {3}}, {kF32, {5}}}, {{kF32, {3}}, {kF32, {5}}}, {})),
            64u);
  EXPECT_EQ(cpuStepScratchBytes(step("all_reduce", {{kF32, {40}}}, {{kF32, {40}}}, {})), 0u);
  // Gathered along dim 1: strided blocks, packed (64 floats); along dim 0 MPI writes in place.
  EXPECT_EQ(
      cpuStepScratchBytes(step("all_gather", {{kF32, {4, 8}}}, {{kF32, {4, 16}}}, {{"dim", 1}})),
      256u);
  EXPECT_EQ(
      cpuStepScratchBytes(step("all_gather", {{kF32, {4, 8}}}, {{kF32, {8, 8}}}, {{"dim", 0}})),
      0u);
  EXPECT_EQ(
      cpuStepScratchBytes(step("reduce_scatter", {{kF32, {8, 8}}}, {{kF32, {8, 4}}}, {{"dim", 1}})),
      256u);
  // bf16: a float32 copy of each operand (32 and 64 values: 128 and 256 bytes), then the
  // packing.
  const ScratchStep low = step("all_gather", {{kBF16, {4, 8}}}, {{kBF16, {4, 16}}}, {{"dim", 1}});
  EXPECT_EQ(cpuStepScratchBytes(low), 128u + 256u + 256u);
}

TEST(StepScratchTest, GemmWorkspaceUsers) {
  EXPECT_TRUE(usesBlasWorkspace(*findKernel("matmul")));
  EXPECT_TRUE(usesBlasWorkspace(*findKernel("conv2d_grad_weight")));
  EXPECT_TRUE(usesBlasWorkspace(*findKernel("causal_attention_grad")));
  EXPECT_FALSE(usesBlasWorkspace(*findKernel("add")));
  EXPECT_FALSE(usesBlasWorkspace(*findKernel("all_reduce")));
}

TEST(StepScratchTest, EmbeddingSortBoundCoversItsOwnPieces) {
  // Keys (8 bytes), positions and order (4 bytes each) of 1000 ids, each piece 256-aligned, then
  // the bound on CUB's storage.
  const uint64_t pieces = 8192 + 2 * 4096;
  EXPECT_EQ(cuda::kernels::embeddingGradScratchBound(1000),
            pieces + cuda::kernels::alignPiece(16000 + 65536));
}

}  // namespace
}  // namespace dtc
