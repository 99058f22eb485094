// Memory a step uses besides its operands, planned by the compiler with the operands (the
// step's scratch_offset/scratch_bytes in its function's arena), so that a plan's memory is all a
// device allocates. What a step needs depends on the device the plan is compiled for:
// - CPU: widened copies. A kernel declared for float types (KernelTypes::kFloat) runs on
//   bf16/f16 operands through float32 copies of them, one per 16-bit input and then per 16-bit
//   output, in operand order, each starting on a kScratchAlign boundary. Collectives then pack
//   what MPI needs contiguous: a bucket's tensors, or blocks strided along their dimension.
// - CUDA: what its kernels keep beside the operands (partial sums, sort buffers, im2col columns,
//   attention's score buffers, collectives' packed blocks and widened copies), sized by the
//   functions of ops/cuda_scratch.h that the CUDA binders lay their pieces out with.
// What a kernel needs beyond the widened copies and a collective's packing is declared on its
// line of ops/kernels.def (DTC_KERNEL_CUDA_SCRATCH, DTC_KERNEL_CPU_SCRATCH), naming a sizer of
// step_scratch.cc.
// Both sides size a step from its kernel, operand types and attributes (a ScratchStep): the
// compiler from the IR, the runtime from the plan.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ops/kernel_registry.h"
#include "support/dtype.h"

namespace dtc {

inline constexpr uint64_t kScratchAlign = 64;

// The bytes of one float32 copy of `elements` values, rounded up to the alignment.
inline uint64_t widenedCopyBytes(uint64_t elements) {
  return (elements * sizeof(float) + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// Whether the CPU runs `kernel` on widened copies, given whether any operand is 16-bit.
inline bool cpuWidens(const KernelInfo& kernel, bool anyLowPrecisionOperand) {
  return kernel.types == KernelTypes::kFloat && anyLowPrecisionOperand;
}

struct ScratchOperand {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t elements() const;
};

// One step as scratch sizing sees it. Attribute readers give 0 / empty for an absent attribute.
struct ScratchStep {
  const KernelInfo* kernel = nullptr;
  std::vector<ScratchOperand> inputs, outputs;
  std::function<int64_t(const char*)> intAttr;
  std::function<std::vector<int64_t>(const char*)> intsAttr;
};

// The scratch bytes a step needs on the CPU and on CUDA; multiples of kScratchAlign, 0 for none.
// On the CPU: the widened copies, then (after them) what a collective packs (below).
uint64_t cpuStepScratchBytes(const ScratchStep& step);
// The floats a collective packs on the CPU: a bucket's tensors end to end, or strided blocks
// (collectivePackingFloats); 0 where it works on its operands in place.
uint64_t cpuCollectiveFloats(const ScratchStep& step);
uint64_t cudaStepScratchBytes(const ScratchStep& step);

// On CUDA, a collective on 16-bit operands runs its float32 form on widened copies of them all
// (inputs then outputs, contiguous, from the scratch's start), its own scratch after them at
// this offset. Sums and gathers that NCCL runs in the 16-bit type itself still plan them: they
// fall back to the widened form where the group has no NCCL communicator.
uint64_t widenedCollectiveBytes(const ScratchStep& step);

// The product of the dimensions before `dim` (1 for the first; 0 where `dim` is outside): a
// collective's per-rank blocks along `dim` are contiguous where it is at most 1.
int64_t outerOf(const std::vector<int64_t>& shape, int64_t dim);

// What a collective packs into contiguous blocks for NCCL where its blocks are strided (floats;
// 0 where they are contiguous): the float32 form's shapes.
uint64_t collectivePackingFloats(const ScratchStep& step);

// Whether the CUDA plan's functions reserve the GEMM libraries' workspace (ops/cuda_scratch.h's
// kBlasWorkspaceBytes at the start of the arena): any kernel that calls cuBLAS.
bool usesBlasWorkspace(const KernelInfo& kernel);

}  // namespace dtc
