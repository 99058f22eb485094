// The step context's accessors, in a file of their own: the CUDA plugin links them (and not the
// executor, which would bring the CPU kernels and BLAS along).
#include "exec/step.h"
#include "ops/kernel_registry.h"
#include "ops/step_scratch.h"

namespace dtc {

int64_t TensorView::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool StepContext::hasAttr(const char* name) const { return findStepAttr(step, name) != nullptr; }

int64_t StepContext::intAttr(const char* name) const {
  const plan::Attr* a = findStepAttr(step, name);
  return a ? a->i() : 0;
}

double StepContext::floatAttr(const char* name) const {
  const plan::Attr* a = findStepAttr(step, name);
  return a ? a->f() : 0.0;
}

std::vector<int64_t> StepContext::intsAttr(const char* name) const {
  const plan::Attr* a = findStepAttr(step, name);
  if (!a || !a->ints()) return {};
  return {a->ints()->begin(), a->ints()->end()};
}

std::string StepContext::stringAttr(const char* name) const {
  const plan::Attr* a = findStepAttr(step, name);
  return a && a->s() ? a->s()->str() : std::string();
}

StatusOr<const KernelInfo*> StepContext::kernel() const {
  if (const KernelInfo* k = kernelInfo(step.kernel())) return k;
  return Status::InvalidInput(where() + "unknown kernel (the plan needs a newer dtrun)");
}

ScratchStep scratchStepOf(const StepContext& ctx) {
  ScratchStep s;
  s.kernel = kernelInfo(ctx.step.kernel());
  for (const TensorView& t : ctx.inputs) s.inputs.push_back({t.dtype, t.shape});
  for (const TensorView& t : ctx.outputs) s.outputs.push_back({t.dtype, t.shape});
  const StepContext* c = &ctx;
  s.intAttr = [c](const char* name) { return c->intAttr(name); };
  s.intsAttr = [c](const char* name) { return c->intsAttr(name); };
  return s;
}

std::string StepContext::where() const {
  std::string loc = step.loc() ? step.loc()->str() : "";
  return kernelName(step.kernel()) + (loc.empty() ? "" : " at " + loc) + ": ";
}

}  // namespace dtc
