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

StatusOr<BoundStep> bindTranspose(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, checkTranspose(ctx));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
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
