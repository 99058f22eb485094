// One step through the CPU backend, as dtrun binds it: operands, a Step table with int
// attributes, the kernel's contract, its binder and its run.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "exec/kernel_contract.h"
#include "exec/step.h"
#include "ops/kernel_registry.h"
#include "ops/shape.h"
#include "plan_generated.h"

namespace dtc::cpu::testing {

struct Operand {
  std::vector<uint8_t> bytes;
  TensorView view;
};

Operand operand(DType dtype, Shape shape, const void* data = nullptr) {
  Operand o;
  o.bytes.assign(static_cast<size_t>(dtc::numElements(shape)) * dtypeSize(dtype), 0);
  if (data) std::memcpy(o.bytes.data(), data, o.bytes.size());
  o.view.dtype = dtype;
  o.view.shape = std::move(shape);
  return o;
}

using IntsAttrs = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// A step of `kernel` with int, float and int-list attributes (name, value), as a plan holds
// them (sorted by name).
std::vector<uint8_t> stepBuffer(Kernel kernel, size_t inputs, size_t outputs,
                                std::vector<std::pair<std::string, int64_t>> attrs,
                                std::vector<std::pair<std::string, double>> floats = {},
                                IntsAttrs ints = {}) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<uint32_t> ins, outs;
  for (size_t i = 0; i < inputs; ++i) ins.push_back(static_cast<uint32_t>(i));
  for (size_t i = 0; i < outputs; ++i) outs.push_back(static_cast<uint32_t>(inputs + i));
  struct Value {
    int64_t i = 0;
    double f = 0;
    std::vector<int64_t> ints;
    bool hasInts = false;
  };
  std::vector<std::pair<std::string, Value>> all;
  for (const auto& [name, value] : attrs) all.push_back({name, {value, 0.0, {}, false}});
  for (const auto& [name, value] : floats) all.push_back({name, {0, value, {}, false}});
  for (const auto& [name, value] : ints) all.push_back({name, {0, 0.0, value, true}});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<flatbuffers::Offset<plan::Attr>> offsets;
  for (const auto& [name, value] : all)
    offsets.push_back(plan::CreateAttrDirect(b, name.c_str(), value.i, value.f,
                                             value.hasInts ? &value.ints : nullptr));
  b.Finish(plan::CreateStepDirect(b, &ins, &outs, &offsets, "router", kernel));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

// Checks the contract, binds and runs; the first error.
Status runStep(Kernel kernel, std::vector<Operand>& ins, std::vector<Operand>& outs,
               std::vector<std::pair<std::string, int64_t>> attrs, ThreadPool& pool,
               std::vector<std::pair<std::string, double>> floats = {}, IntsAttrs ints = {}) {
  const std::vector<uint8_t> buffer = stepBuffer(kernel, ins.size(), outs.size(), std::move(attrs),
                                                 std::move(floats), std::move(ints));
  StepContext ctx{*flatbuffers::GetRoot<plan::Step>(buffer.data()), {}, {}, pool};
  for (auto [list, views] : {std::pair{&ins, &ctx.inputs}, std::pair{&outs, &ctx.outputs}})
    for (Operand& o : *list) {
      o.view.data = o.bytes.data();
      views->push_back(o.view);
    }
  DTC_RETURN_IF_ERROR(checkKernelContract(ctx));
  DTC_ASSIGN_OR_RETURN(BoundStep bound, bindCpuStep(ctx));
  return bound();
}

}  // namespace dtc::cpu::testing
