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

// A step of `kernel` with int and float attributes (name, value), as a plan holds them (sorted
// by name).
std::vector<uint8_t> stepBuffer(Kernel kernel, size_t inputs, size_t outputs,
                                std::vector<std::pair<std::string, int64_t>> attrs,
                                std::vector<std::pair<std::string, double>> floats = {}) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<uint32_t> ins, outs;
  for (size_t i = 0; i < inputs; ++i) ins.push_back(static_cast<uint32_t>(i));
  for (size_t i = 0; i < outputs; ++i) outs.push_back(static_cast<uint32_t>(inputs + i));
  std::vector<std::pair<std::string, std::pair<int64_t, double>>> all;
  for (const auto& [name, value] : attrs) all.push_back({name, {value, 0.0}});
  for (const auto& [name, value] : floats) all.push_back({name, {0, value}});
  std::sort(all.begin(), all.end());
  std::vector<flatbuffers::Offset<plan::Attr>> offsets;
  for (const auto& [name, value] : all)
    offsets.push_back(plan::CreateAttrDirect(b, name.c_str(), value.first, value.second));
  b.Finish(plan::CreateStepDirect(b, &ins, &outs, &offsets, "router", kernel));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

// Checks the contract, binds and runs; the first error.
Status runStep(Kernel kernel, std::vector<Operand>& ins, std::vector<Operand>& outs,
               std::vector<std::pair<std::string, int64_t>> attrs, ThreadPool& pool,
               std::vector<std::pair<std::string, double>> floats = {}) {
  const std::vector<uint8_t> buffer =
      stepBuffer(kernel, ins.size(), outs.size(), std::move(attrs), std::move(floats));
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
