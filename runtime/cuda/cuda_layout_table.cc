// The layout ops on CUDA (cpu/cpu_layout_table.cc's): transpose, split and concat as strided
// copies of f32 or 16-bit elements, with the CPU's contracts (exec/layout_contracts.h).
#include <array>
#include <climits>

#include "cuda_bind.h"
#include "exec/layout_contracts.h"
#include "exec/precision_contracts.h"

namespace dtc::cuda {
namespace {

// Layout ops move f32 under the CPU's contract (expect(), the same messages), or (after
// dtc-fold-casts) bf16/f16 elements, or FP8 codes, one type for every operand. The size of an
// element.
StatusOr<int> layoutElementBytes(const StepContext& ctx, size_t inputs, size_t outputs) {
  const TensorView* low = nullptr;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& v : *list)
      if (!low && (lowPrecision(v.dtype) || float8(v.dtype))) low = &v;
  if (!low) {
    // int64 labels move as 8-byte elements (split only: transposes and concats take floats).
    const bool labels = !ctx.inputs.empty() && ctx.inputs[0].dtype == DType::kI64 &&
                        ctx.step.kernel() == plan::Kernel::split;
    if (labels) {
      DTC_ASSIGN_OR_RETURN(const PiecesLayout unused, checkSplit(ctx));
      (void)unused;
      return 8;
    }
    DTC_RETURN_IF_ERROR(expect(ctx, inputs, outputs));
    return 4;
  }
  if (ctx.inputs.size() != inputs || ctx.outputs.size() != outputs)
    return invalid(ctx, "expects " + std::to_string(inputs) + " inputs and " +
                            std::to_string(outputs) + " outputs");
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& v : *list)
      if (v.dtype != low->dtype)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low->dtype) +
                                " and " + dtypeName(v.dtype));
  return static_cast<int>(dtypeSize(low->dtype));
}

StatusOr<BoundStep> bindTranspose(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const int bytes, layoutElementBytes(ctx, 1, 1));
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, transposePerm(ctx));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  if (x.shape.size() > static_cast<size_t>(kernels::kMaxDims))
    return invalid(ctx, "rank " + std::to_string(x.shape.size()) +
                            " is above the kernels' limit of " + std::to_string(kernels::kMaxDims));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::transpose(x.data, x.shape, perm, out.data, bytes, stream), where);
  });
}

// The whole seen as [outer, row] bytes around `axis`; part p is [outer, width[p]], starting at
// byte offset[p] of each row.
struct Pieces {
  int64_t outer = 1, row = 0;
  std::vector<int64_t> width, offset;
  Pieces(const Shape& whole, const PiecesLayout& l, int bytes) {
    int64_t inner = bytes;
    for (int64_t d = 0; d < l.axis; ++d) outer *= whole[d];
    for (size_t d = l.axis + 1; d < whole.size(); ++d) inner *= whole[d];
    for (int64_t size : l.sizes) {
      offset.push_back(row);
      width.push_back(size * inner);
      row += size * inner;
    }
  }
};

// Copies part p between the whole and its piece: one strided 2-D copy per part.
Status copyPart(uint8_t* whole, uint8_t* part, const Pieces& s, size_t p, bool toWhole,
                cudaStream_t stream, const std::string& where) {
  const size_t width = s.width[p], pitch = s.row;
  if (s.outer * width == 0) return Status::Ok();
  cudaError_t e = toWhole ? cudaMemcpy2DAsync(whole + s.offset[p], pitch, part, width, width,
                                              s.outer, cudaMemcpyDeviceToDevice, stream)
                          : cudaMemcpy2DAsync(part, width, whole + s.offset[p], pitch, width,
                                              s.outer, cudaMemcpyDeviceToDevice, stream);
  return cudaStatus(e, where + "a strided copy");
}

// split (the input cut into the outputs) and concat (the inputs joined into the output).
template <bool Concat>
StatusOr<BoundStep> bindPieces(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const int bytes, Concat ? layoutElementBytes(ctx, ctx.inputs.size(), 1)
                                               : layoutElementBytes(ctx, 1, ctx.outputs.size()));
  DTC_ASSIGN_OR_RETURN(const PiecesLayout layout, Concat ? concatLayout(ctx) : splitLayout(ctx));
  const TensorView& all = Concat ? ctx.outputs[0] : ctx.inputs[0];
  uint8_t* whole = all.data;
  std::vector<uint8_t*> parts;
  for (const TensorView& t : Concat ? ctx.inputs : ctx.outputs) parts.push_back(t.data);
  const Pieces s(all.shape, layout, bytes);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    for (size_t p = 0; p < parts.size(); ++p)
      DTC_RETURN_IF_ERROR(copyPart(whole, parts[p], s, p, Concat, stream, where));
    return Status::Ok();
  });
}

}  // namespace

DTC_CUDA_BINDER(transpose, bindTranspose)
DTC_CUDA_BINDER(split, bindPieces<false>)
DTC_CUDA_BINDER(concat, bindPieces<true>)

}  // namespace dtc::cuda
