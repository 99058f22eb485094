// Which of a function's GEMMs run in FP8 (fp8_gemm) and which do not, by model node, and how its
// operands are quantized, for dtc inspect.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ops/kernel_registry.h"
#include "plan_generated.h"
#include "planfile/plan.h"

namespace dtc {

struct Fp8Layers {
  std::vector<std::string> fp8;    // nodes whose GEMMs are fp8_gemm steps, in step order
  std::vector<std::string> other;  // nodes with other GEMM steps and none in FP8
  size_t fp8Gemms = 0;
  size_t quantizations = 0;  // fp8_quantize and fp8_quantize_recorded steps
  size_t amaxPasses = 0;     // fp8_amax steps: a pass over a tensor before its quantization
  size_t delayed = 0;        // quantizations on an amax history, recording their own
  size_t castsFolded = 0;    // amax and quantization steps that round to bf16 as they load
};

inline Fp8Layers fp8LayersOf(const plan::Function& f) {
  Fp8Layers r;
  if (!f.steps()) return r;
  auto has = [](const std::vector<std::string>& list, const std::string& loc) {
    return std::find(list.begin(), list.end(), loc) != list.end();
  };
  for (const plan::Step* s : *f.steps()) {
    const std::string loc = s->loc() ? s->loc()->str() : "";
    const Kernel kernel = s->kernel();
    const bool quantizes =
        kernel == Kernel::fp8_quantize || kernel == Kernel::fp8_quantize_recorded;
    r.quantizations += quantizes;
    r.delayed += kernel == Kernel::fp8_quantize_recorded;
    r.amaxPasses += kernel == Kernel::fp8_amax;
    if (quantizes || kernel == Kernel::fp8_amax) {
      const plan::Attr* load = findStepAttr(*s, "load_bf16");
      r.castsFolded += load && load->i() != 0;
    }
    if (kernel != Kernel::fp8_gemm) continue;
    ++r.fp8Gemms;
    if (!has(r.fp8, loc)) r.fp8.push_back(loc);
  }
  for (const plan::Step* s : *f.steps()) {
    const KernelInfo* k = kernelInfo(s->kernel());
    const std::string loc = s->loc() ? s->loc()->str() : "";
    if (k && k->family == KernelFamily::kGemm && !has(r.fp8, loc) && !has(r.other, loc))
      r.other.push_back(loc);
  }
  return r;
}

}  // namespace dtc
