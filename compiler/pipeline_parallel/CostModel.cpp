#include "pipeline_parallel/CostModel.h"

#include <cmath>

#include "mlir/IR/BuiltinTypes.h"

#include "dist/IR/DistOps.h"
#include "ops/kernel_registry.h"
#include "plan/IR/KernelQueries.h"

using namespace mlir;

namespace dtc::pipeline {
namespace {

double elements(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type ? static_cast<double>(type.getNumElements()) : 0.0;
}

}  // namespace

double valueBytes(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type) return 0;
  return elements(v) * std::max<unsigned>(1, type.getElementTypeBitWidth() / 8);
}

double opFlops(Operation* op) {
  const KernelInfo* kernel = kernelOf(op);
  if (op->getNumResults() == 0 || op->getNumOperands() < 2) {
    double n = 0;
    for (Value r : op->getResults()) n += elements(r);
    return n;
  }
  double a = elements(op->getOperand(0)), b = elements(op->getOperand(1));
  double c = elements(op->getResult(0));
  // A contraction A[M,K]·B[K,N] = C[M,N] does 2·M·K·N FLOPs, and |A|·|B|·|C| = (M·K·N)², whatever
  // the transposes (linear layers' input and weight gradients included). A batch of b shared by
  // all three counts b³ where the FLOPs count b.
  if (kernel && kernel->family == KernelFamily::kGemm) {
    double batch = 1;
    if (kernel->kernel == Kernel::batch_matmul)
      if (auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType()))
        for (int64_t d = 0; d + 2 < t.getRank(); ++d) batch *= t.getDimSize(d);
    return 2 * std::sqrt(a * b * c / batch);
  }
  // Convolutions: 2 FLOPs per output element per weight of one output channel.
  if (kernel && (kernel->kernel == Kernel::conv2d || kernel->kernel == Kernel::conv2d_grad_input ||
                 kernel->kernel == Kernel::conv2d_grad_weight)) {
    double big = std::max({a, b, c}), small = std::min({a, b, c});
    if (auto w = dyn_cast<RankedTensorType>(op->getOperand(1).getType()); w && w.getRank() == 4)
      return 2 * big * small / std::max<int64_t>(1, w.getDimSize(0));
  }
  // Element-wise and normalisation ops: a few FLOPs per element.
  double n = 0;
  for (Value r : op->getResults()) n += elements(r);
  return 4 * n;
}

double opBytes(Operation* op) {
  double total = 0;
  for (Value v : op->getOperands()) total += valueBytes(v);
  for (Value v : op->getResults()) total += valueBytes(v);
  return total;
}

double opSeconds(Operation* op, const DeviceModel& device) {
  const KernelInfo* kernel = kernelOf(op);
  if (kernel && (kernel->kernel == Kernel::recv || kernel->kernel == Kernel::reshape))
    return 0;  // a receive's time is its wait; a reshape is a view
  if (kernel && kernel->kernel == Kernel::send) return opBytes(op) / device.bytesPerSecond;
  return std::max(opFlops(op) / device.flopsPerSecond, opBytes(op) / device.bytesPerSecond);
}

double transferSeconds(double bytes, const DeviceModel& device) {
  return device.linkLatencySeconds + bytes / device.linkBytesPerSecond;
}

}  // namespace dtc::pipeline
