#include "plan/IR/PlanOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

#define GET_OP_CLASSES
#include "plan/IR/PlanOps.cpp.inc"

namespace dtc::plan {

bool holdsKernelAttr(AttrKind kind, Attribute value) {
  switch (kind) {
    case AttrKind::kInt: return isa<BoolAttr, IntegerAttr>(value);
    case AttrKind::kFloat: return isa<FloatAttr>(value);
    case AttrKind::kInts: return isa<DenseI64ArrayAttr>(value);
    case AttrKind::kMeshAxes:
      if (auto a = dyn_cast<ArrayAttr>(value))
        return llvm::all_of(a, [](Attribute e) { return isa<StringAttr>(e); });
      return false;
    case AttrKind::kString: return isa<StringAttr>(value);
  }
  return false;
}

LogicalResult KernelOp::verify() {
  const KernelInfo* kernel = findKernel(getKernel().str());
  if (!kernel)
    return emitOpError("runs '") << getKernel()
                                 << "', which the kernel registry (runtime/ops/kernels.def) "
                                    "does not declare";
  for (NamedAttribute param : getParams()) {
    const KernelAttr* declared = kernel->attr(param.getName().str());
    if (!declared)
      return emitOpError("kernel '")
             << getKernel() << "' does not read parameter '" << param.getName().getValue()
             << "' (declare it in runtime/ops/kernels.def)";
    if (!holdsKernelAttr(declared->kind, param.getValue()))
      return emitOpError("parameter '")
             << param.getName().getValue() << "' of '" << getKernel() << "' is not a "
             << attrKindName(declared->kind) << ": " << param.getValue();
  }
  return success();
}

}  // namespace dtc::plan
