// What the runtime knows of each kernel, generated from ops/kernels.def: its plan code and name,
// the element types it accepts, its family and the attributes it reads. The plan writer, the plan
// verifier, both backends' dispatch and the cost model all ask here, so a kernel is declared once.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "plan_generated.h"

namespace dtc {

// The plan's kernel identifier (the enum generated from ops/kernels.def into the plan schema).
using Kernel = plan::Kernel;

// The element types a kernel's operands may have (see ops/kernels.def).
enum class KernelTypes : uint8_t { kF32, kFloat, kAny };

enum class KernelFamily : uint8_t {
  kGemm,
  kAttention,
  kPointwise,
  kReduction,
  kNormalization,
  kConv,
  kLoss,
  kOptimizer,
  kPrecision,
  kCollective,
  kLayout,
  kEmbedding,
};

// How a plan stores one attribute: Attr.i (Int), Attr.f (Float), Attr.ints (Ints, MeshAxes) or
// Attr.s (String).
enum class AttrKind : uint8_t { kInt, kFloat, kInts, kMeshAxes, kString };

struct KernelAttr {
  const char* name;
  AttrKind kind;
};

struct KernelInfo {
  Kernel kernel = Kernel::none;
  const char* name = "";
  KernelTypes types = KernelTypes::kF32;
  KernelFamily family = KernelFamily::kPointwise;
  std::vector<KernelAttr> attrs;
  // The kernel a device profile's cost per element stands in for this one's, or null.
  const char* pricedAs = nullptr;

  // The declared attribute `name`, or null.
  const KernelAttr* attr(std::string_view name) const;
};

// The kernel with plan code `kernel`, or null for a code this build does not know.
const KernelInfo* kernelInfo(Kernel kernel);
// The kernel named `name` ("matmul"), or null.
const KernelInfo* findKernel(std::string_view name);
// Every kernel, in code order.
const std::vector<const KernelInfo*>& allKernels();
// One more than the largest code: the size of a table indexed by code.
uint16_t kernelCodeLimit();
// The kernel's name, or "kernel <code>" for an unknown code (error messages of old or bad plans).
std::string kernelName(Kernel kernel);

const char* attrKindName(AttrKind kind);

}  // namespace dtc
