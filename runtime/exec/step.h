// What a kernel binder sees of one plan step: its operands' storage, attributes and context.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "planfile/plan.h"
#include "support/thread_pool.h"

namespace dtc {

struct KernelInfo;  // ops/kernel_registry.h

// A value's storage as a kernel sees it: host memory on the CPU backend, device memory on a
// device backend.
struct TensorView {
  uint8_t* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  float* f32() const { return reinterpret_cast<float*>(data); }
  int64_t* i64() const { return reinterpret_cast<int64_t*>(data); }
  int64_t numElements() const;
};

// One plan step bound to its buffers, ready to run.
using BoundStep = std::function<Status()>;

struct StepContext {
  const plan::Step& step;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  ThreadPool& pool;
  comm::DeviceMesh* mesh = nullptr;  // collectives: this device's mesh (null: one device)
  // The step's planned scratch (ops/step_scratch.h) in the function's arena; null when it has
  // none. A binder that needs memory the plan did not give it allocates its own and adds the
  // bytes to *unplannedBytes (when set), so that the memory a run uses is reported whole.
  uint8_t* scratch = nullptr;
  uint64_t scratchBytes = 0;
  uint64_t* unplannedBytes = nullptr;

  // Attribute accessors (attributes are optional in the format; absent means 0).
  int64_t intAttr(const char* name) const;
  bool hasAttr(const char* name) const;
  double floatAttr(const char* name) const;
  std::vector<int64_t> intsAttr(const char* name) const;
  std::string stringAttr(const char* name) const;
  // The step's kernel in the registry, or the error of a code this build does not know (the
  // verifier refuses those at load; binders called on their own see it here).
  StatusOr<const KernelInfo*> kernel() const;
  // "matmul at fc0: " — the prefix of every error about this step.
  std::string where() const;
};

struct ScratchStep;  // ops/step_scratch.h
// The step as scratch sizing sees it: its kernel, operand types and attributes (null kernel for
// an unknown code). Its attribute readers refer to `ctx`, which must outlive it.
ScratchStep scratchStepOf(const StepContext& ctx);

// Validates a step's operands against its CPU kernel's contract and binds it (the CPU
// backend's kernel table, cpu_kernel_table.cc and its siblings).
StatusOr<BoundStep> bindCpuStep(const StepContext& ctx);

}  // namespace dtc
