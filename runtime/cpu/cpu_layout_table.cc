// Bindings of the layout ops (transpose, split, concat), with the contracts of
// exec/layout_contracts.h.
#include <algorithm>
#include <vector>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/transformer_kernels.h"
#include "exec/layout_contracts.h"

namespace dtc {
namespace {

// out = x permuted, element by element, for 1-byte elements (FP8 codes).
void transposeBytes(const uint8_t* x, const Shape& shape, const std::vector<int64_t>& perm,
                    uint8_t* out) {
  const size_t rank = shape.size();
  std::vector<int64_t> strides(rank, 1), outShape(rank), index(rank, 0);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  int64_t total = 1;
  for (size_t d = 0; d < rank; ++d) {
    outShape[d] = shape[perm[d]];
    total *= shape[d];
  }
  for (int64_t i = 0; i < total; ++i) {
    int64_t from = 0;
    for (size_t d = 0; d < rank; ++d) from += index[d] * strides[perm[d]];
    out[i] = x[from];
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < outShape[d]) break;
      index[d] = 0;
    }
  }
}

StatusOr<BoundStep> bindTranspose(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, checkTranspose(ctx));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  if (dtypeSize(x.dtype) == 1)
    return BoundStep([=] {
      transposeBytes(x.data, x.shape, perm, out.data);
      return Status::Ok();
    });
  return BoundStep([=] {
    cpu::transpose(x.f32(), x.shape, perm, out.f32(), *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindSplit(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(PiecesLayout l, checkSplit(ctx));
  TensorView x = ctx.inputs[0];
  std::vector<uint8_t*> outs;
  for (const TensorView& out : ctx.outputs) outs.push_back(out.data);
  const size_t element = dtypeSize(x.dtype);
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::splitBytes(x.data, x.shape, l.axis, l.sizes, outs, element, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindConcat(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(PiecesLayout l, checkConcat(ctx));
  TensorView out = ctx.outputs[0];
  std::vector<const float*> parts;
  for (const TensorView& in : ctx.inputs) parts.push_back(in.f32());
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::concat(parts, l.sizes, out.shape, l.axis, out.f32(), *pool);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(transpose, bindTranspose)
DTC_CPU_BINDER(split, bindSplit)
DTC_CPU_BINDER(concat, bindConcat)

}  // namespace dtc
